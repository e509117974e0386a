/* Conformance: parser features.
 *
 * Exercises
 *   - select on one field with exact values, value &&& mask and default;
 *     select on a tuple with a don't-care (_) and masks; a select with no
 *     default (no match -> error.NoMatch)
 *   - parser "set" ops (metadata assignments in states)
 *   - header stack: extract(hdr.mpls.next) in a loop, select on
 *     hdr.mpls.last.bos; overflow -> error.StackOutOfBounds
 *   - lookahead<bit<4>>() in a select (IP version nibble behind MPLS)
 *   - verify() with user errors; PacketTooShort on a truncated header;
 *     standard_metadata.parser_error reaches ingress (v1model does not drop)
 *   - ingress: stack push_front / pop_front, setValid, constant indices
 *   - deparser: emit order (result header inserted after ethernet; invalid
 *     headers and stack elements are skipped)
 *
 * Every packet comes back out of the port it came in on, as
 *   ethernet | parse_result (4 bytes) | mpls[0..3] | ipv4 | udp | exp
 * (only the valid ones). parse_result:
 *   path        bit mask of states visited: 0x01 ipv4, 0x02 mpls, 0x04
 *               after_mpls, 0x08 udp, 0x10 protocol 0..15 (the _ arm),
 *               0x20 experimental, 0x40 exp_kind matched
 *   label_count labels extracted by the parser
 *   error_code  0 NoError, 1 PacketTooShort, 2 NoMatch, 3 StackOutOfBounds,
 *               4 IPv4IncorrectVersion, 5 IPv4OptionsNotSupported,
 *               6 ExpTooLong, 255 other
 *   stack_valid bit i = mpls[i].isValid() as parsed (before push/pop)
 *
 * Packets to send (ethertype -> path):
 *   0x0800 IPv4 ihl 5 proto 17      -> path 0x09, udp parsed
 *   0x0800 IPv4 ihl 5 proto 6       -> path 0x11 (tuple with _ arm)
 *   0x0800 IPv4 ihl 6               -> error 5 (verify), ipv4 valid
 *   0x0800 version 6                -> error 4
 *   0x0800 with 10 bytes of IPv4    -> error 1, ipv4 invalid
 *   0x8847 or 0x8848 (mask 0xFFFE), labels ending with bos=1, then IPv4:
 *       label_count = n, path 0x07|0x08..; 5 labels -> error 3
 *       first label 3 (implicit null) -> popped in ingress
 *   0x8847, bos label followed by a non-4 nibble -> path 0x06, accept
 *   0x88xx (mask 0xFF00, e.g. 0x88B6) -> exp: kind 1 or 2 accept (0x40);
 *       other kind -> error 2; len > 16 -> error 6
 *   anything else (e.g. 0x86DD)     -> path 0, accept
 *   IPv4 without labels (ihl 5, any proto) gets two labels pushed in
 *   ingress (100, 200 bos) and ethertype 0x8847.
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

error { IPv4IncorrectVersion, IPv4OptionsNotSupported, ExpTooLong }

#define MPLS_DEPTH 4
const bit<16> ETHERTYPE_MPLS = 0x8847;

header mpls_t {
    bit<20> label;
    bit<3>  tc;
    bit<1>  bos;
    bit<8>  ttl;
}

header exp_t {
    bit<8> kind;
    bit<8> len;
}

header parse_result_t {
    bit<8> path;
    bit<8> label_count;
    bit<8> error_code;
    bit<8> stack_valid;
}

struct p_headers_t {
    ethernet_t     ethernet;
    parse_result_t result;
    mpls_t[MPLS_DEPTH] mpls;
    ipv4_t         ipv4;
    udp_t          udp;
    exp_t          exp;
}

struct p_metadata_t {
    bit<8> path;
    bit<8> label_count;
}

parser PParser(packet_in packet, out p_headers_t hdr, inout p_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        meta.path = 0;
        meta.label_count = 0;
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4:          parse_ipv4;
            0x8847 &&& 0xFFFE:       parse_mpls;         /* 0x8847, 0x8848 */
            0x8800 &&& 0xFF00:       parse_experimental; /* rest of 0x88xx */
            default:                 accept;
        }
    }

    state parse_mpls {
        packet.extract(hdr.mpls.next);
        meta.path = meta.path | 0x02;
        meta.label_count = meta.label_count + 1;
        transition select(hdr.mpls.last.bos) {
            1: parse_after_mpls;
            default: parse_mpls;
        }
    }

    /* MPLS does not say what follows the labels: peek at the IP version. */
    state parse_after_mpls {
        meta.path = meta.path | 0x04;
        transition select(packet.lookahead<bit<4>>()) {
            4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        meta.path = meta.path | 0x01;
        verify(hdr.ipv4.version == 4, error.IPv4IncorrectVersion);
        verify(hdr.ipv4.ihl == 5, error.IPv4OptionsNotSupported);
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_UDP): parse_udp;
            (_, 0x00 &&& 0xF0): parse_low_proto;  /* protocols 0..15, incl. TCP */
            default: accept;
        }
    }

    state parse_low_proto {
        meta.path = meta.path | 0x10;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.path = meta.path | 0x08;
        transition accept;
    }

    state parse_experimental {
        packet.extract(hdr.exp);
        meta.path = meta.path | 0x20;
        verify(hdr.exp.len <= 16, error.ExpTooLong);
        transition select(hdr.exp.kind) {   /* no default: else NoMatch */
            1: exp_known;
            2: exp_known;
        }
    }

    state exp_known {
        meta.path = meta.path | 0x40;
        transition accept;
    }
}

control PVerifyChecksum(inout p_headers_t hdr, inout p_metadata_t meta) {
    apply { }
}

control PIngress(inout p_headers_t hdr, inout p_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.result.setValid();
        hdr.result.path = meta.path;
        hdr.result.label_count = meta.label_count;

        if (standard_metadata.parser_error == error.NoError) {
            hdr.result.error_code = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.result.error_code = 1;
        } else if (standard_metadata.parser_error == error.NoMatch) {
            hdr.result.error_code = 2;
        } else if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.result.error_code = 3;
        } else if (standard_metadata.parser_error == error.IPv4IncorrectVersion) {
            hdr.result.error_code = 4;
        } else if (standard_metadata.parser_error == error.IPv4OptionsNotSupported) {
            hdr.result.error_code = 5;
        } else if (standard_metadata.parser_error == error.ExpTooLong) {
            hdr.result.error_code = 6;
        } else {
            hdr.result.error_code = 255;
        }

        hdr.result.stack_valid = 0;
        if (hdr.mpls[0].isValid()) { hdr.result.stack_valid = hdr.result.stack_valid | 1; }
        if (hdr.mpls[1].isValid()) { hdr.result.stack_valid = hdr.result.stack_valid | 2; }
        if (hdr.mpls[2].isValid()) { hdr.result.stack_valid = hdr.result.stack_valid | 4; }
        if (hdr.mpls[3].isValid()) { hdr.result.stack_valid = hdr.result.stack_valid | 8; }

        if (hdr.mpls[0].isValid() && hdr.mpls[0].label == 3) {
            /* implicit null: pop the top label */
            hdr.mpls.pop_front(1);
        } else if (!hdr.mpls[0].isValid() && hdr.ipv4.isValid()
                   && standard_metadata.parser_error == error.NoError) {
            /* push two labels: push_front leaves the new elements invalid */
            hdr.mpls.push_front(2);
            hdr.mpls[0].setValid();
            hdr.mpls[0].label = 100;
            hdr.mpls[0].tc = 0;
            hdr.mpls[0].bos = 0;
            hdr.mpls[0].ttl = 64;
            hdr.mpls[1].setValid();
            hdr.mpls[1].label = 200;
            hdr.mpls[1].tc = 0;
            hdr.mpls[1].bos = 1;
            hdr.mpls[1].ttl = 64;
            hdr.ethernet.ether_type = ETHERTYPE_MPLS;
        }
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
}

control PEgress(inout p_headers_t hdr, inout p_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control PComputeChecksum(inout p_headers_t hdr, inout p_metadata_t meta) {
    apply { }
}

control PDeparser(packet_out packet, in p_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.result);
        packet.emit(hdr.mpls);      /* whole stack: valid elements in order */
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.exp);
    }
}

V1Switch(PParser(), PVerifyChecksum(), PIngress(), PEgress(),
         PComputeChecksum(), PDeparser()) main;
