/* Conformance: action profiles and action selectors (ECMP the P4 way).
 *
 * Packet: ethernet (0x88B6) | sel_t. Ingress applies
 *   ecmp: sel.key exact, sel.flow_a and sel.flow_b selector;
 *         implementation = action_selector(crc16, 128, 14)
 *         set_out(port, tag): egress_spec = port, sel.member_tag = tag
 *   prof: sel.key exact; implementation = action_profile(64)
 *         set_prof(tag): sel.prof_tag = tag
 * A miss in ecmp sends the packet back out of its ingress port; a miss in
 * prof leaves prof_tag as sent. switch (ecmp.apply().action_run) sets sel.run
 * to 1 for set_out and 2 for NoAction (a member may run NoAction); a miss runs
 * BMv2's empty default action and takes neither arm (run stays 0).
 *
 * Entries come over P4Runtime: members of the selector's profile, groups
 * (with weights), table entries pointing at a member or a group, and one-shot
 * action sets. BMv2 picks a group member as
 *   handles = sorted BMv2 member handles of the group (one per unit of weight)
 *   member  = handles[crc16(flow_a ++ flow_b) % len(handles)]
 * where crc16 is CRC-16/ARC over the 6 bytes of the two selector fields.
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> ETHERTYPE_PROBE = 0x88B6;

header sel_t {
    bit<16> key;
    bit<32> flow_a;
    bit<16> flow_b;
    bit<16> member_tag;
    bit<16> prof_tag;
    bit<8>  run;
}

struct s_headers_t {
    ethernet_t ethernet;
    sel_t      sel;
}

struct s_metadata_t { }

parser SParser(packet_in packet, out s_headers_t hdr, inout s_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_sel;
            default: accept;
        }
    }
    state parse_sel {
        packet.extract(hdr.sel);
        transition accept;
    }
}

control SVerifyChecksum(inout s_headers_t hdr, inout s_metadata_t meta) {
    apply { }
}

control SIngress(inout s_headers_t hdr, inout s_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    action set_out(bit<9> port, bit<16> tag) {
        standard_metadata.egress_spec = port;
        hdr.sel.member_tag = tag;
    }
    action set_prof(bit<16> tag) {
        hdr.sel.prof_tag = tag;
    }
    action_selector(HashAlgorithm.crc16, 32w128, 32w14) ecmp_selector;
    action_profile(32w64) tag_profile;
    table ecmp {
        key = {
            hdr.sel.key    : exact;
            hdr.sel.flow_a : selector;
            hdr.sel.flow_b : selector;
        }
        actions = { set_out; NoAction; }
        implementation = ecmp_selector;
        size = 64;
    }
    table prof {
        key = { hdr.sel.key : exact; }
        actions = { set_prof; NoAction; }
        implementation = tag_profile;
        size = 64;
    }
    apply {
        if (!hdr.sel.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        standard_metadata.egress_spec = standard_metadata.ingress_port;
        switch (ecmp.apply().action_run) {
            set_out: { hdr.sel.run = 1; }
            NoAction: { hdr.sel.run = 2; }
        }
        prof.apply();
    }
}

control SEgress(inout s_headers_t hdr, inout s_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control SComputeChecksum(inout s_headers_t hdr, inout s_metadata_t meta) {
    apply { }
}

control SDeparser(packet_out packet, in s_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.sel);
    }
}

V1Switch(SParser(), SVerifyChecksum(), SIngress(), SEgress(), SComputeChecksum(), SDeparser()) main;
