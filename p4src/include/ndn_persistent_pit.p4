/* gradnet: NDN persistent PIT (ingress; seed 000 steps 1, 4.2, 4.4, 6).
 *
 * An Interest /<*insert*>/PS/train/... goes to the controller (packet-in), which adds
 * its in-port to the persistent PIT entry of /PS/train and to that entry's
 * multicast group, creating both if absent, and sends the Interest on upstream
 * (packet-out). A Data /<*distribute*>/PS/train/... is replicated to the group of
 * the entry keyed by its components 1 and 2 (/PS/train); entries are never
 * consumed by Data.
 *
 * Upstream check (docs/trust.md): a distribute Data is replicated only when it came
 * in on the port the FIB names for the name after its marker (meta.next_hop, looked
 * up by the ingress before this block), i.e. from the PS's side of the tree; from
 * any other port it is dropped and counted as NDN_DROP_NOT_UPSTREAM, so a host that
 * is not the PS cannot push "parameters" to the subscribers.
 */
#ifndef _GRADNET_NDN_PERSISTENT_PIT_P4_
#define _GRADNET_NDN_PERSISTENT_PIT_P4_

#include "ndn_headers.p4"

control PersistentPit(inout ndn_headers_t hdr,
                      inout ndn_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    action set_subscribers(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }

    action no_subscribers() {
        meta.drop_reason = NDN_DROP_NO_SUBSCRIBERS;
    }

    /* Key: the name /PS/train after the marker, component by component. */
    table persistent_pit {
        key = {
            meta.t1: exact;
            meta.l1: exact;
            meta.c1: exact;
            meta.t2: exact;
            meta.l2: exact;
            meta.c2: exact;
        }
        actions = { set_subscribers; no_subscribers; }
        default_action = no_subscribers();
        size = NDN_PERSISTENT_PIT_SIZE;
    }

    apply {
        if (meta.depth < 3) {
            meta.drop_reason = NDN_DROP_BAD_MARKER;
        } else if (meta.insert == 1) {
            standard_metadata.egress_spec = CPU_PORT;
        } else if (standard_metadata.ingress_port != meta.next_hop) {
            meta.drop_reason = NDN_DROP_NOT_UPSTREAM;
        } else {
            persistent_pit.apply();
        }
    }
}

#endif  /* _GRADNET_NDN_PERSISTENT_PIT_P4_ */
