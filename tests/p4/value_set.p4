/* Conformance: parser value sets (value_set<T>(N) in select), programmed over
 * P4Runtime (ValueSetEntry MODIFY replaces the whole set).
 *
 * Packet: ethernet | vs_t, where the EtherType itself is looked up in a set:
 *   start:     ether_type 0x88B6, or in value set `ethertypes` (bit<16>, size 4)
 *              -> parse_vs; else accept (the frame is dropped by ingress)
 *   parse_vs:  vs.low12 in `lows` (bit<12>, size 3)           -> path 1
 *              (vs.hi4, vs.low12) in `pairs` (struct, size 2)  -> path 2
 *              vs.tag == 0x55                                  -> path 3
 *              otherwise                                       -> path 4
 * Ingress writes the path into vs.path and sends the frame back out of its
 * ingress port. A set entry of `pairs` is a P4Runtime member with one exact
 * match per struct field (ids 1 = hi4, 2 = low12); BMv2 stores it compressed
 * (16 bits) and compares it with the select key laid out field by field in
 * whole bytes.
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> ETHERTYPE_PROBE = 0x88B6;

header vs_t {
    bit<4>  hi4;
    bit<12> low12;
    bit<8>  tag;
    bit<8>  path;
}

struct v_headers_t {
    ethernet_t ethernet;
    vs_t       vs;
}

struct pair_t {
    bit<4>  hi4;
    bit<12> low12;
}

struct v_metadata_t {
    bit<8> path;
}

parser VParser(packet_in packet, out v_headers_t hdr, inout v_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    value_set<bit<16>>(4) ethertypes;
    value_set<bit<12>>(3) lows;
    value_set<pair_t>(2) pairs;

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_vs;
            ethertypes: parse_vs;
            default: accept;
        }
    }
    state parse_vs {
        packet.extract(hdr.vs);
        transition select(hdr.vs.low12) {
            lows: path_lows;
            default: check_pairs;
        }
    }
    state check_pairs {
        transition select(hdr.vs.hi4, hdr.vs.low12) {
            pairs: path_pairs;
            default: check_tag;
        }
    }
    state check_tag {
        transition select(hdr.vs.tag) {
            0x55: path_tag;
            default: path_other;
        }
    }
    state path_lows {
        meta.path = 1;
        transition accept;
    }
    state path_pairs {
        meta.path = 2;
        transition accept;
    }
    state path_tag {
        meta.path = 3;
        transition accept;
    }
    state path_other {
        meta.path = 4;
        transition accept;
    }
}

control VVerifyChecksum(inout v_headers_t hdr, inout v_metadata_t meta) {
    apply { }
}

control VIngress(inout v_headers_t hdr, inout v_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.vs.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        hdr.vs.path = meta.path;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
}

control VEgress(inout v_headers_t hdr, inout v_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control VComputeChecksum(inout v_headers_t hdr, inout v_metadata_t meta) {
    apply { }
}

control VDeparser(packet_out packet, in v_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vs);
    }
}

V1Switch(VParser(), VVerifyChecksum(), VIngress(), VEgress(), VComputeChecksum(), VDeparser()) main;
