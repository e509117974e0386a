/* gradnet: NDN parser and deparser (ndn, bounds in ndn_headers.p4).
 *
 * Per name component: look at its (type, length) without consuming them, pick the
 * take_<len> state (one per allowed length, since P4 has no variable-width
 * lookahead), extract the two TL bytes, copy the value into meta.ndn.cur_v with a
 * lookahead of exactly <len> bytes, check that it fits in what is left of the Name,
 * copy it into slot <depth>, then extract its value bytes one by one (eat loop).
 * A packet outside the bounds stops parsing with meta.ndn.parse_drop set; the
 * ingress drops and counts it.
 */
#ifndef _GRADNET_NDN_PARSER_P4_
#define _GRADNET_NDN_PARSER_P4_

#include "ndn_headers.p4"

#define NDN_TAKE(K) \
    state take_##K { \
        packet.extract(hdr.ndn_name_bytes.next); \
        packet.extract(hdr.ndn_name_bytes.next); \
        meta.cur_l = K; \
        meta.cur_v = (bit<128>)packet.lookahead<bit<(8 * K)>>(); \
        meta.eat = K; \
        transition check_fit; \
    }

parser NdnParser(packet_in packet,
                 out ndn_headers_t hdr,
                 inout ndn_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default:  parse_ethernet;
        }
    }

    /* The hot loop first (the embedded target tries states in this order). */
    state eat {
        transition select(meta.eat) {
            0: component_done;
            default: eat_byte;
        }
    }

    state eat_byte {
        packet.extract(hdr.ndn_name_bytes.next);
        meta.eat = meta.eat - 1;
        transition eat;
    }

    state component_done {
        transition select(meta.name_left, hdr.ndn_packet.type) {
            (0, NDN_TLV_INTEREST): after_name;
            (0, _): accept;
            default: parse_component;
        }
    }

    state parse_component {
        meta.cur_t = packet.lookahead<bit<8>>();
        /* (type, length) of the component */
        transition select(packet.lookahead<bit<16>>()) {
            0x8000 &&& 0x8000: component_too_long;   /* type >= 128 */
            0x0000 &&& 0x00FF: take_0;
            0x0001 &&& 0x00FF: take_1;
            0x0002 &&& 0x00FF: take_2;
            0x0003 &&& 0x00FF: take_3;
            0x0004 &&& 0x00FF: take_4;
            0x0005 &&& 0x00FF: take_5;
            0x0006 &&& 0x00FF: take_6;
            0x0007 &&& 0x00FF: take_7;
            0x0008 &&& 0x00FF: take_8;
            0x0009 &&& 0x00FF: take_9;
            0x000A &&& 0x00FF: take_10;
            0x000B &&& 0x00FF: take_11;
            0x000C &&& 0x00FF: take_12;
            0x000D &&& 0x00FF: take_13;
            0x000E &&& 0x00FF: take_14;
            0x000F &&& 0x00FF: take_15;
            0x0010 &&& 0x00FF: take_16;
            default: component_too_long;
        }
    }

    state take_0 {
        packet.extract(hdr.ndn_name_bytes.next);
        packet.extract(hdr.ndn_name_bytes.next);
        meta.cur_l = 0;
        meta.cur_v = 0;
        meta.eat = 0;
        transition check_fit;
    }
    NDN_TAKE(1)
    NDN_TAKE(2)
    NDN_TAKE(3)
    NDN_TAKE(4)
    NDN_TAKE(5)
    NDN_TAKE(6)
    NDN_TAKE(7)
    NDN_TAKE(8)
    NDN_TAKE(9)
    NDN_TAKE(10)
    NDN_TAKE(11)
    NDN_TAKE(12)
    NDN_TAKE(13)
    NDN_TAKE(14)
    NDN_TAKE(15)
    NDN_TAKE(16)

    /* The component (2 + length bytes) must fit in what is left of the Name. */
    state check_fit {
        meta.name_left = meta.name_left - 2 - (bit<16>)meta.cur_l;
        transition select(meta.name_left) {
            0x8000 &&& 0x8000: malformed;
            default: store;
        }
    }

    state store {
        transition select(meta.depth) {
            0: store_0;
            1: store_1;
            2: store_2;
            3: store_3;
            4: store_4;
            5: store_5;
            default: name_too_deep;
        }
    }

    state store_0 { meta.t0 = meta.cur_t; meta.l0 = meta.cur_l; meta.c0 = meta.cur_v; meta.depth = 1; transition eat; }
    state store_1 { meta.t1 = meta.cur_t; meta.l1 = meta.cur_l; meta.c1 = meta.cur_v; meta.depth = 2; transition eat; }
    state store_2 { meta.t2 = meta.cur_t; meta.l2 = meta.cur_l; meta.c2 = meta.cur_v; meta.depth = 3; transition eat; }
    state store_3 { meta.t3 = meta.cur_t; meta.l3 = meta.cur_l; meta.c3 = meta.cur_v; meta.depth = 4; transition eat; }
    state store_4 { meta.t4 = meta.cur_t; meta.l4 = meta.cur_l; meta.c4 = meta.cur_v; meta.depth = 5; transition eat; }
    state store_5 { meta.t5 = meta.cur_t; meta.l5 = meta.cur_l; meta.c5 = meta.cur_v; meta.depth = 6; transition eat; }

    /* Controller's PacketOut: its metadata header precedes the frame. */
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_NDN: parse_ndn;
            default: accept;
        }
    }

    state parse_ndn {
        packet.extract(hdr.ndn_packet);
        meta.rest = (bit<16>)hdr.ndn_packet.len;
        transition select(hdr.ndn_packet.type, hdr.ndn_packet.len) {
            (NDN_TLV_INTEREST, 0xFD): parse_len16;
            (NDN_TLV_DATA, 0xFD): parse_len16;
            (NDN_TLV_INTEREST, 0xFE &&& 0xFE): bad_length_form;
            (NDN_TLV_DATA, 0xFE &&& 0xFE): bad_length_form;
            (NDN_TLV_INTEREST, _): parse_name;
            (NDN_TLV_DATA, _): parse_name;
            default: accept;   /* not Interest/Data: the ingress drops it */
        }
    }

    state parse_len16 {
        packet.extract(hdr.ndn_len16);
        meta.rest = hdr.ndn_len16.len;
        transition parse_name;
    }

    state parse_name {
        packet.extract(hdr.ndn_name);
        meta.name_left = (bit<16>)hdr.ndn_name.len;
        meta.rest = meta.rest - 2 - (bit<16>)hdr.ndn_name.len;
        transition select(hdr.ndn_name.type, hdr.ndn_name.len) {
            (NDN_TLV_NAME, 0): malformed;
            (NDN_TLV_NAME, 0x00 &&& 0xC0): parse_component;   /* 1..63 */
            (NDN_TLV_NAME, 64): parse_component;
            (NDN_TLV_NAME, _): name_too_long;
            default: malformed;
        }
    }

    /* Interest fields after the Name, each only when at least its TL is left in the
     * Interest (no lookahead past its end): CanBePrefix?, MustBeFresh?, Nonce,
     * InterestLifetime. Another field first (ForwardingHint, ...) ends the parse:
     * the Interest then has no nonce and the default lifetime for the switch. */
#define NDN_ROOM(NEXT) \
        transition select(meta.rest) { \
            0x0000 &&& 0xFFFE: accept; \
            0x8000 &&& 0x8000: accept; \
            default: NEXT; \
        }
    state after_name { NDN_ROOM(after_name_field) }
    state after_name_field {
        transition select(packet.lookahead<bit<16>>()) {
            0x2100: parse_can_be_prefix;
            0x1200: parse_must_be_fresh;
            0x0A04: parse_nonce;
            default: accept;
        }
    }
    state parse_can_be_prefix {
        packet.extract(hdr.ndn_can_be_prefix);
        meta.rest = meta.rest - 2;
        transition after_can_be_prefix;
    }
    state after_can_be_prefix { NDN_ROOM(after_can_be_prefix_field) }
    state after_can_be_prefix_field {
        transition select(packet.lookahead<bit<16>>()) {
            0x1200: parse_must_be_fresh;
            0x0A04: parse_nonce;
            default: accept;
        }
    }
    state parse_must_be_fresh {
        packet.extract(hdr.ndn_must_be_fresh);
        meta.rest = meta.rest - 2;
        transition after_must_be_fresh;
    }
    state after_must_be_fresh { NDN_ROOM(after_must_be_fresh_field) }
    state after_must_be_fresh_field {
        transition select(packet.lookahead<bit<16>>()) {
            0x0A04: parse_nonce;
            default: accept;
        }
    }
    state parse_nonce {
        packet.extract(hdr.ndn_nonce);
        meta.rest = meta.rest - 6;
        transition after_nonce;
    }
    state after_nonce { NDN_ROOM(after_nonce_field) }
    state after_nonce_field {
        transition select(packet.lookahead<bit<16>>()) {
            0x0C01: parse_lifetime8;
            0x0C02: parse_lifetime16;
            0x0C04: parse_lifetime32;
            default: accept;
        }
    }
    state parse_lifetime8 {
        packet.extract(hdr.ndn_lifetime);
        packet.extract(hdr.ndn_lifetime8);
        meta.lifetime_ms = (bit<32>)hdr.ndn_lifetime8.v;
        transition accept;
    }
    state parse_lifetime16 {
        packet.extract(hdr.ndn_lifetime);
        packet.extract(hdr.ndn_lifetime16);
        meta.lifetime_ms = (bit<32>)hdr.ndn_lifetime16.v;
        transition accept;
    }
    state parse_lifetime32 {
        packet.extract(hdr.ndn_lifetime);
        packet.extract(hdr.ndn_lifetime32);
        meta.lifetime_ms = hdr.ndn_lifetime32.v;
        transition accept;
    }

    state bad_length_form { meta.parse_drop = NDN_DROP_LENGTH_FORM; transition accept; }
    state malformed { meta.parse_drop = NDN_DROP_MALFORMED; transition accept; }
    state name_too_long { meta.parse_drop = NDN_DROP_NAME_TOO_LONG; transition accept; }
    state name_too_deep { meta.parse_drop = NDN_DROP_NAME_TOO_DEEP; transition accept; }
    state component_too_long { meta.parse_drop = NDN_DROP_COMPONENT_TOO_LONG; transition accept; }
}

control NdnVerifyChecksum(inout ndn_headers_t hdr, inout ndn_metadata_t meta) {
    apply { }
}

control NdnComputeChecksum(inout ndn_headers_t hdr, inout ndn_metadata_t meta) {
    apply { }
}

/* Emit order = wire order; packet_in first (the P4Runtime server strips it). */
control NdnDeparser(packet_out packet, in ndn_headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ndn_packet);
        packet.emit(hdr.ndn_len16);
        packet.emit(hdr.ndn_name);
        packet.emit(hdr.ndn_name_bytes);
        packet.emit(hdr.ndn_can_be_prefix);
        packet.emit(hdr.ndn_must_be_fresh);
        packet.emit(hdr.ndn_nonce);
        packet.emit(hdr.ndn_lifetime);
        packet.emit(hdr.ndn_lifetime8);
        packet.emit(hdr.ndn_lifetime16);
        packet.emit(hdr.ndn_lifetime32);
    }
}

#endif  /* _GRADNET_NDN_PARSER_P4_ */
