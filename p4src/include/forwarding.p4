/* gradnet: IPv4 forwarding with ECMP, and controller packet-out (ingress).
 *
 * ipv4_routes (LPM on the destination) either names the next hop directly
 * or an ECMP group; for a group, the member is
 *     crc16(src, dst, protocol, l4 src port, l4 dst port) mod group_size
 * and ecmp_members maps (group_id, member_index) to the next hop, so the
 * controller installs group_size entries per group (index 0..size-1).
 * Routing rewrites the destination MAC; the source MAC is rewritten per
 * egress port in egress (port_macs.p4).
 */
#ifndef _GRADNET_FORWARDING_P4_
#define _GRADNET_FORWARDING_P4_

#include "config.p4"
#include "headers.p4"

control Forwarding(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    /* Every drop decided here is counted by reason (config.p4 DROP_REASON_*):
     * the checks and the tables only record meta.drop_reason; one action at
     * the end drops and counts. */
    counter(DROP_REASON_COUNT, CounterType.packets) ingress_drops;

    /* No route: dropped and counted at the end of apply. */
    action drop() {
        meta.drop_reason = DROP_REASON_NO_ROUTE;
    }

    action drop_and_count() {
        mark_to_drop(standard_metadata);
        ingress_drops.count((bit<32>)meta.drop_reason);
    }

    action set_next_hop(mac_addr_t dmac, port_t port) {
        hdr.ethernet.dst_addr = dmac;
        standard_metadata.egress_spec = port;
    }

    /* A multicast route: the PRE replicates (ina_result_fanout.p4 in egress). */
    action set_multicast_group(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }

    action set_ecmp_group(bit<16> group_id, bit<16> group_size) {
        meta.ecmp_group_id = group_id;
        meta.ecmp_group_size = group_size;
    }

    /* Separate from set_ecmp_group so that a group_size of 0 (a controller
     * bug) is a counted drop, not a modulo by zero in the target. The salt
     * differs per switch: with one hash everywhere a flow would take the same
     * member index at every stage (ECMP polarization). */
    action compute_ecmp_member() {
        hash(meta.ecmp_member_index, HashAlgorithm.crc16, (bit<16>)0,
             { meta.ecmp_salt, hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
               hdr.ipv4.protocol, meta.l4_src_port, meta.l4_dst_port },
             meta.ecmp_group_size);
    }

    action set_ecmp_salt(bit<16> salt) {
        meta.ecmp_salt = salt;
    }

    /* Keyless: the controller sets the default action (salt = device id). */
    table ecmp_salt {
        actions = { set_ecmp_salt; }
        default_action = set_ecmp_salt(0);
    }

    table ipv4_routes {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { set_next_hop; set_ecmp_group; set_multicast_group; drop; }
        default_action = drop();
        size = IPV4_ROUTES_SIZE;
    }

    table ecmp_members {
        key = {
            meta.ecmp_group_id: exact;
            meta.ecmp_member_index: exact;
        }
        actions = { set_next_hop; drop; }
        default_action = drop();
        size = ECMP_MEMBERS_SIZE;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            /* From the controller: send where it says, unrouted. */
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else if (standard_metadata.parser_error != error.NoError) {
            meta.drop_reason = DROP_REASON_PARSER_ERROR;
        } else if (standard_metadata.checksum_error == 1) {
            meta.drop_reason = DROP_REASON_CHECKSUM_ERROR;
        } else if (!hdr.ipv4.isValid()) {
            meta.drop_reason = DROP_REASON_NOT_IPV4;
        } else if (hdr.ipv4.ihl != 5) {
            /* Only what the parser read whole is forwarded: behind options
             * or in a fragment, a host's kernel would deliver a UDP datagram
             * (an INA one too) that the parser never saw, so admission and
             * the aggregators never checked it (docs/trust.md, "IP: only
             * what the switch parsed"). On every port: no switch and no
             * agent sends either. */
            meta.drop_reason = DROP_REASON_IP_OPTIONS;
        } else if (hdr.ipv4.flags & 1 != 0 || hdr.ipv4.frag_offset != 0) {
            meta.drop_reason = DROP_REASON_IP_FRAGMENT;
        } else if (meta.src_spoof == 1) {
            /* source_guard.p4, before forwarding: after the checks above, so that
             * a malformed frame keeps its reason whoever it claims to be from */
            meta.drop_reason = DROP_REASON_SRC_SPOOF;
        } else if (hdr.ipv4.ttl <= 1) {
            /* TTL would reach 0 here. */
            meta.drop_reason = DROP_REASON_TTL_EXPIRED;
        } else {
            switch (ipv4_routes.apply().action_run) {
                set_ecmp_group: {
                    if (meta.ecmp_group_size == 0) {
                        drop();
                    } else {
                        ecmp_salt.apply();
                        compute_ecmp_member();
                        ecmp_members.apply();
                    }
                }
            }
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
        if (meta.drop_reason != 0) {
            drop_and_count();
        }
    }
}

#endif  /* _GRADNET_FORWARDING_P4_ */
