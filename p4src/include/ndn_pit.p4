/* gradnet: NDN transient PIT in registers (ingress).
 *
 * Entry i = low NDN_PIT_BITS bits of the name hash: the whole name (kind and depth, and
 * every component's type, length and value, compared exactly, so a crc32 collision can
 * never hand a Data to an Interest for another name), a bitmap of in-ports 1..8, and an
 * expiry time = arrival + the Interest's InterestLifetime (4 s when absent), capped by
 * pit_config (set by the controller).
 *
 * An Interest whose name has a live entry that lacks its in-port is aggregated (the
 * port is added, nothing is sent on); otherwise it (re)starts the entry and is sent on
 * (a retransmission from a port already in the entry goes up again). A Data with a live
 * entry of its name goes to the entry's ports (multicast group id = the bitmap,
 * installed by the controller for every subset of the switch's ports) and consumes it.
 *
 * Expiry is checked lazily, when a packet touches the entry (v1model has no timers):
 * an expired entry of the same name is freed and counted in pit_expired; a Data that
 * finds one is a counted NDN_DROP_PIT_EXPIRED drop. A different name whose hash picks a
 * live entry takes it over: the older Interest goes unanswered (its Data is then
 * unsolicited) and its consumer retransmits.
 *
 * Kinds: an insert Interest /<*insert*>/P/T/G makes a kind-1 entry of /P/T/G that only
 * its ack Data /<*distribute*>/P/T/G consumes, so the ack goes to the subscriber alone.
 *
 * Per-port budget: an in-port with an entry in pit_port_budget (the controller installs
 * one for every host port that is no member of a job, docs/trust.md) may start at most
 * that many entries per second (a fixed one-second window per port); past it, an
 * Interest that would start or take over an entry is a counted NDN_DROP_PIT_BUDGET
 * drop. Adding a port to a live entry of the same name is not counted.
 */
#ifndef _GRADNET_NDN_PIT_P4_
#define _GRADNET_NDN_PIT_P4_

#include "ndn_headers.p4"

control TransientPit(inout ndn_headers_t hdr,
                     inout ndn_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    register<bit<8>>(NDN_PIT_SIZE)   pit_key;     /* depth | kind << 7; 0 = empty */
    register<bit<144>>(NDN_PIT_SIZE) pit_c0;      /* (type, length, value) of component 0 */
    register<bit<144>>(NDN_PIT_SIZE) pit_c1;
    register<bit<144>>(NDN_PIT_SIZE) pit_c2;
    register<bit<144>>(NDN_PIT_SIZE) pit_c3;
    register<bit<144>>(NDN_PIT_SIZE) pit_c4;
    register<bit<144>>(NDN_PIT_SIZE) pit_c5;
    register<bit<8>>(NDN_PIT_SIZE)   pit_ports;
    register<bit<48>>(NDN_PIT_SIZE)  pit_expiry;
    counter(1, CounterType.packets) pit_expired;
    register<bit<48>>(NDN_PIT_PORTS + 1) pit_window_start;  /* per in-port */
    register<bit<32>>(NDN_PIT_PORTS + 1) pit_window_count;

    bit<32>  index;
    bit<8>   kind_key;
    bit<8>   stored_key;
    bit<144> s0; bit<144> s1; bit<144> s2; bit<144> s3; bit<144> s4; bit<144> s5;
    bit<8>   stored_ports;
    bit<48>  expiry;
    bit<48>  cap;
    bit<48>  lifetime;
    bit<8>   in_bit;
    bit<32>  budget;
    bit<48>  window_start;
    bit<32>  window_count;

    action set_lifetime(bit<48> microseconds) {
        cap = microseconds;
    }

    action limit(bit<32> per_second) {
        budget = per_second;
    }

    /* In-ports whose new entries are limited (none: unlimited). */
    table pit_port_budget {
        key = { meta.in_port: exact; }
        actions = { limit; NoAction; }
        default_action = NoAction();
        size = NDN_PIT_PORTS + 1;
    }

    /* Keyless: the controller sets the longest entry lifetime (default 4 s). */
    table pit_config {
        actions = { set_lifetime; }
        default_action = set_lifetime(4000000);
    }

    apply {
        /* ordinary Interests and Data, insert Interests and their acks */
        bool mine = meta.drop_reason == 0 && meta.punt == 0 && meta.unsubscribe == 0
                    && (meta.distribute == 0 || meta.ack == 1);
        if (mine) {
            pit_config.apply();
            index = (bit<32>)meta.name_hash[NDN_PIT_BITS - 1:0];
            kind_key = meta.depth | (meta.insert == 1 || meta.ack == 1 ? 8w0x80 : 8w0);
            pit_key.read(stored_key, index);
            pit_c0.read(s0, index);
            pit_c1.read(s1, index);
            pit_c2.read(s2, index);
            pit_c3.read(s3, index);
            pit_c4.read(s4, index);
            pit_c5.read(s5, index);
            pit_ports.read(stored_ports, index);
            pit_expiry.read(expiry, index);
            bool same = stored_key == kind_key && stored_ports != 0
                        && s0 == meta.t0 ++ meta.l0 ++ meta.c0 && s1 == meta.t1 ++ meta.l1 ++ meta.c1
                        && s2 == meta.t2 ++ meta.l2 ++ meta.c2 && s3 == meta.t3 ++ meta.l3 ++ meta.c3
                        && s4 == meta.t4 ++ meta.l4 ++ meta.c4 && s5 == meta.t5 ++ meta.l5 ++ meta.c5;
            bool live = same && standard_metadata.ingress_global_timestamp < expiry;
            if (same && !live) {
                pit_expired.count(0);
            }
            if (meta.is_interest == 1) {
                in_bit = (bit<8>)1 << (bit<8>)(meta.in_port - 1);
                lifetime = (bit<48>)(meta.lifetime_ms == 0 ? (bit<32>)NDN_DEFAULT_LIFETIME_MS : meta.lifetime_ms) * 1000;
                if (lifetime > cap) {
                    lifetime = cap;
                }
                bool over = false;
                if (!(live && (stored_ports & in_bit) == 0) && pit_port_budget.apply().hit) {
                    pit_window_start.read(window_start, (bit<32>)meta.in_port);
                    pit_window_count.read(window_count, (bit<32>)meta.in_port);
                    if (standard_metadata.ingress_global_timestamp - window_start >= 1000000) {
                        window_start = standard_metadata.ingress_global_timestamp;
                        window_count = 0;
                    }
                    if (window_count >= budget) {
                        over = true;
                    } else {
                        window_count = window_count + 1;
                    }
                    pit_window_start.write((bit<32>)meta.in_port, window_start);
                    pit_window_count.write((bit<32>)meta.in_port, window_count);
                }
                if (over) {
                    meta.drop_reason = NDN_DROP_PIT_BUDGET;
                } else if (live && (stored_ports & in_bit) == 0) {
                    pit_ports.write(index, stored_ports | in_bit);
                    meta.forward = 0;
                } else {
                    pit_key.write(index, kind_key);
                    pit_c0.write(index, meta.t0 ++ meta.l0 ++ meta.c0);
                    pit_c1.write(index, meta.t1 ++ meta.l1 ++ meta.c1);
                    pit_c2.write(index, meta.t2 ++ meta.l2 ++ meta.c2);
                    pit_c3.write(index, meta.t3 ++ meta.l3 ++ meta.c3);
                    pit_c4.write(index, meta.t4 ++ meta.l4 ++ meta.c4);
                    pit_c5.write(index, meta.t5 ++ meta.l5 ++ meta.c5);
                    pit_ports.write(index, live ? stored_ports | in_bit : in_bit);
                    pit_expiry.write(index, standard_metadata.ingress_global_timestamp + lifetime);
                    meta.forward = 1;
                }
            } else if (live) {
                standard_metadata.mcast_grp = (bit<16>)stored_ports;
                pit_ports.write(index, 0);
            } else if (same) {
                pit_ports.write(index, 0);          /* expired: freed */
                meta.drop_reason = NDN_DROP_PIT_EXPIRED;
            } else {
                meta.drop_reason = NDN_DROP_UNSOLICITED;
            }
        }
    }
}

#endif  /* _GRADNET_NDN_PIT_P4_ */
