/* gradnet: NDN persistent PIT (ingress): subscriptions, and the updates they receive.
 *
 * The ingress has taken the marker off the name: slots 0 and 1 hold /PS/train.
 *
 * Data-plane subscriptions (default): entry i = the slot of /PS/train (ndn_sub_admission.p4:
 * open, the low NDN_SUB_BITS bits of h_2; guarded, the controller's) holds /PS/train itself (compared exactly) and, per port 1..8, the time
 * its subscription expires. An insert Interest /<*insert*>/PS/train/G from port p
 * creates the entry (absent, or every port expired) or finds it (held by /PS/train) and
 * sets port p's expiry to now + the subscription lifetime (subscription_config): soft
 * state, refreshed by the GPU's periodic insert Interests, gone when they stop, rebuilt
 * by them after a switch restart (registers do not survive one). The ingress then sends
 * the Interest on along the FIB toward the PS. A slot held by another /PS/train with a
 * live port is a counted NDN_DROP_SUB_COLLISION drop. An unsubscribe Interest
 * /<*unsubscribe*>/PS/train/G from port p clears port p and is sent on toward the PS only
 * when no port is left (so the upstream switch drops this switch's port in turn). The
 * controller sends the same Interest through the pipeline as if from port p
 * (NDN_OUT_VIA_PIPELINE) for a subscriber that died without unsubscribing.
 *
 * Lifetime: subscription_config's lifetime; the controller's persistent choice is a
 * lifetime of 2^47 us (4.5 years): the entry then lives until it is unsubscribed.
 *
 * A distribute Data /<*distribute*>/PS/train/v=r/seg=i goes to the multicast group whose
 * id is the bitmap of the entry's live ports (the PIT's port-subset groups); ports found
 * expired are freed and counted in subscriptions_expired (checked lazily, when a Data
 * touches the entry). Entries are never consumed by Data.
 *
 * Controller-assisted subscriptions (subscription_config via_controller = 1, the older
 * way, kept to compare): insert Interests go to the controller (packet-in), which
 * writes the exact table persistent_pit (/PS/train -> a multicast group of the
 * subscribed ports) and sends the Interest back through the pipeline
 * (NDN_OUT_VIA_PIPELINE), so the FIB, not the controller, picks where it goes on. A
 * distribute Data with no live data-plane entry looks that table up.
 *
 * The upstream check (docs/trust.md), that a distribute Data came in on the FIB's port
 * toward the PS, is in the ingress, before this block.
 */
#ifndef _GRADNET_NDN_PERSISTENT_PIT_P4_
#define _GRADNET_NDN_PERSISTENT_PIT_P4_

#include "ndn_headers.p4"

/* Port k's expiry (k = 1..8): read it, free it if it expired, add it to the live bitmap. */
#define NDN_SUB_PORT(K) \
    sub_expiry.read(e, base + (K - 1)); \
    if (e != 0 && e <= now) { \
        if (meta.distribute == 1) { sub_expiry.write(base + (K - 1), 0); subscriptions_expired.count(0); } \
    } else if (e != 0) { \
        live = live | (8w1 << (K - 1)); \
    }

control PersistentPit(inout ndn_headers_t hdr,
                      inout ndn_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    register<bit<144>>(1 << NDN_SUB_BITS) sub_key0;   /* (type, length, value) of /PS */
    register<bit<144>>(1 << NDN_SUB_BITS) sub_key1;   /* ... of /train */
    register<bit<48>>((1 << NDN_SUB_BITS) * NDN_PIT_PORTS) sub_expiry;   /* 0: not subscribed */
    counter(1, CounterType.packets) subscriptions_expired;

    bit<1>   via_controller;
    bit<48>  sub_lifetime;
    bit<32>  index;
    bit<32>  base;
    bit<144> k0;
    bit<144> k1;
    bit<48>  e;
    bit<48>  now;
    bit<8>   live;
    bit<8>   in_bit;

    action set_subscriptions(bit<1> controller, bit<48> lifetime_us) {
        via_controller = controller;
        sub_lifetime = lifetime_us;
    }

    /* Keyless: subscriptions in the data plane (0) or by the controller (1), and how long
     * a data-plane subscription lives without a refresh (default 6 s). */
    table subscription_config {
        actions = { set_subscriptions; }
        default_action = set_subscriptions(0, 6000000);
    }

    action set_subscribers(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }

    action no_subscribers() {
        meta.drop_reason = NDN_DROP_NO_SUBSCRIBERS;
    }

    /* Controller-assisted entries: /PS/train, component by component. */
    table persistent_pit {
        key = {
            meta.t0: exact;
            meta.l0: exact;
            meta.c0: exact;
            meta.t1: exact;
            meta.l1: exact;
            meta.c1: exact;
        }
        actions = { set_subscribers; no_subscribers; }
        default_action = no_subscribers();
        size = NDN_PERSISTENT_PIT_SIZE;
    }

    apply {
        /* a controller's packet-out through the pipeline is a subscription it already
         * handled (controller mode), or an unsubscribe it sends on behalf of a port whose
         * subscriber died without unsubscribing: that one clears the port here */
        bool mine = meta.drop_reason == 0 && meta.marked == 1 && meta.ack == 0
                    && (meta.via_controller == 0 || meta.unsubscribe == 1);
        if (mine) {
            subscription_config.apply();
            if (meta.insert == 1 && via_controller == 1) {
                meta.punt = 1;
            } else if (meta.sub_no_slot == 1) {   /* guarded, no job's: Data only (see above) */
                persistent_pit.apply();
            } else {
                now = standard_metadata.ingress_global_timestamp;
                index = (bit<32>)meta.sub_slot;   /* ndn_sub_admission.p4 */
                base = index * NDN_PIT_PORTS;
                sub_key0.read(k0, index);
                sub_key1.read(k1, index);
                bool same = k0 == meta.t0 ++ meta.l0 ++ meta.c0 && k1 == meta.t1 ++ meta.l1 ++ meta.c1;
                live = 0;
                NDN_SUB_PORT(1)
                NDN_SUB_PORT(2)
                NDN_SUB_PORT(3)
                NDN_SUB_PORT(4)
                NDN_SUB_PORT(5)
                NDN_SUB_PORT(6)
                NDN_SUB_PORT(7)
                NDN_SUB_PORT(8)
                in_bit = (bit<8>)1 << (bit<8>)(meta.in_port - 1);
                if (meta.insert == 1) {
                    if (!same && live != 0) {
                        meta.drop_reason = NDN_DROP_SUB_COLLISION;
                    } else {
                        if (!same) {                  /* a new entry */
                            sub_key0.write(index, meta.t0 ++ meta.l0 ++ meta.c0);
                            sub_key1.write(index, meta.t1 ++ meta.l1 ++ meta.c1);
                        }                             /* add or refresh the port */
                        sub_expiry.write(base + (bit<32>)(meta.in_port - 1), now + sub_lifetime);
                    }
                } else if (meta.unsubscribe == 1) {
                    if (same) {
                        sub_expiry.write(base + (bit<32>)(meta.in_port - 1), 0);
                    }
                    /* none left here: the upstream switch may drop our port too */
                    meta.forward = !same || (live & ~in_bit) == 0 ? 1w1 : 1w0;
                } else if (same && live != 0) {      /* replicate the update */
                    standard_metadata.mcast_grp = (bit<16>)live;
                } else {
                    persistent_pit.apply();
                }
            }
        }
    }
}

#endif  /* _GRADNET_NDN_PERSISTENT_PIT_P4_ */
