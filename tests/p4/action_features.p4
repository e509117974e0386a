/* Conformance: action primitives and expressions.
 *
 * Exercises
 *   - header setValid / setInvalid / isValid
 *   - + - * (mod 2^W), unary minus, << >> by constants and by a runtime
 *     amount (>= width gives 0), arithmetic >> on int<8>
 *   - bit slices [h:l] read and write, ++ concatenation
 *   - casts: truncation, zero extension, sign extension int<8> -> int<16>,
 *     int -> bit reinterpretation, bool -> bit<1>, bit<1> -> bool
 *   - saturating |+| |-| on bit<8> and int<8>
 *   - & | ^ ~, == != < >= on bit and int, && || !, ?: (ternary)
 *   - action parameters from a direct call, random() in a range,
 *     log_msg (with and without arguments), mark_to_drop
 *   - indirect counter (index from the packet) and indirect meter
 *
 * Packet: ethernet (0x88B6) | arith_t [| extra_t when arith.flags bit 0]
 * It comes back out of its ingress port (unless flags bit 7: dropped).
 * flags: bit 0 the packet carries extra_t; bit 1 invalidate extra_t;
 *        bit 2 make extra_t valid (value 0xCAFE) if it was not;
 *        bit 7 mark_to_drop.
 * Every result field is defined by P4_16 semantics on the operand fields
 * (the comment beside it); a test recomputes it with Python ints masked to
 * the field width. E.g. u8a = 200, u8b = 100: sat_add 255, sat_sub 0;
 * s = -100: sext 0xFF9C, sshr -25, ssat_add -128, ssat_sub -128.
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> ETHERTYPE_PROBE = 0x88B6;

header arith_t {
    /* operands */
    bit<32> a;
    bit<32> b;
    bit<8>  shift;
    int<8>  s;
    bit<8>  u8a;
    bit<8>  u8b;
    bit<8>  flags;
    bit<8>  counter_index;   /* indirect counter/meter index, 0..15 */
    /* results */
    bit<32> sum;         /* a + b */
    bit<32> diff;        /* a - b */
    bit<32> prod;        /* a * b */
    bit<32> neg;         /* -a */
    bit<32> shl;         /* a << shift */
    bit<32> shr;         /* a >> shift */
    bit<32> shl_const;   /* a << 3 */
    bit<16> slice;       /* a[23:8] */
    bit<32> concat;      /* a[15:0] ++ b[15:0] */
    bit<32> slice_set;   /* a with bits [11:4] replaced by u8a */
    bit<8>  trunc;       /* (bit<8>)a */
    bit<16> zext;        /* (bit<16>)u8a */
    int<16> sext;        /* (int<16>)s */
    bit<8>  s_as_bits;   /* (bit<8>)s */
    int<8>  sshr;        /* s >> 2, arithmetic */
    bit<8>  sat_add;     /* u8a |+| u8b */
    bit<8>  sat_sub;     /* u8b |-| u8a */
    int<8>  ssat_add;    /* s |+| (-100) */
    int<8>  ssat_sub;    /* s |-| 100 */
    bit<32> bitwise;     /* (a & b) ^ (~a | (b >> 8)) */
    bit<32> max_ab;      /* a > b ? a : b */
    bit<8>  cmp;         /* bit0 a==b, 1 a!=b, 2 a<b, 3 a>=b, 4 s<0,
                            5 (a>b && s<0), 6 (a==b || u8a>u8b), 7 !(u8a==u8b) */
    bit<8>  bool_bits;   /* (bit<1>)(a > b) ++ 7 low bits of an action
                            parameter (0x80 -> 0) */
    bit<16> rand;        /* random in [100, 199] */
    bit<8>  valid_bits;  /* bit0 extra valid at ingress start, bit1 at end,
                            bit2 (bool)(bit<1>)(a > b) */
    bit<8>  meter_color; /* indirect meter color */
}

header extra_t {
    bit<16> value;
}

struct a_headers_t {
    ethernet_t ethernet;
    arith_t    arith;
    extra_t    extra;
}

struct a_metadata_t {
    bit<1> a_gt_b;
}

parser AParser(packet_in packet, out a_headers_t hdr, inout a_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_arith;
            default: accept;
        }
    }
    state parse_arith {
        packet.extract(hdr.arith);
        transition select(hdr.arith.flags[0:0]) {
            1: parse_extra;
            default: accept;
        }
    }
    state parse_extra {
        packet.extract(hdr.extra);
        transition accept;
    }
}

control AVerifyChecksum(inout a_headers_t hdr, inout a_metadata_t meta) {
    apply { }
}

control AIngress(inout a_headers_t hdr, inout a_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    counter(16, CounterType.packets_and_bytes) probe_counter;
    meter(16, MeterType.packets) probe_meter;

    action arithmetic() {
        hdr.arith.sum = hdr.arith.a + hdr.arith.b;
        hdr.arith.diff = hdr.arith.a - hdr.arith.b;
        hdr.arith.prod = hdr.arith.a * hdr.arith.b;
        hdr.arith.neg = -hdr.arith.a;
        hdr.arith.shl = hdr.arith.a << hdr.arith.shift;
        hdr.arith.shr = hdr.arith.a >> hdr.arith.shift;
        hdr.arith.shl_const = hdr.arith.a << 3;
    }

    action bits_and_casts() {
        hdr.arith.slice = hdr.arith.a[23:8];
        hdr.arith.concat = hdr.arith.a[15:0] ++ hdr.arith.b[15:0];
        hdr.arith.slice_set = hdr.arith.a;
        hdr.arith.slice_set[11:4] = hdr.arith.u8a;
        hdr.arith.trunc = (bit<8>)hdr.arith.a;
        hdr.arith.zext = (bit<16>)hdr.arith.u8a;
        hdr.arith.sext = (int<16>)hdr.arith.s;
        hdr.arith.s_as_bits = (bit<8>)hdr.arith.s;
        hdr.arith.sshr = hdr.arith.s >> 2;
    }

    action saturating() {
        hdr.arith.sat_add = hdr.arith.u8a |+| hdr.arith.u8b;
        hdr.arith.sat_sub = hdr.arith.u8b |-| hdr.arith.u8a;
        hdr.arith.ssat_add = hdr.arith.s |+| -100;
        hdr.arith.ssat_sub = hdr.arith.s |-| 100;
    }

    action logic(bit<8> bool_pad) {
        hdr.arith.bitwise = (hdr.arith.a & hdr.arith.b)
                            ^ (~hdr.arith.a | (hdr.arith.b >> 8));
        hdr.arith.max_ab = hdr.arith.a > hdr.arith.b ? hdr.arith.a : hdr.arith.b;
        meta.a_gt_b = (bit<1>)(hdr.arith.a > hdr.arith.b);
        /* bool -> bit<1> -> concatenated with a 7-bit action parameter slice */
        hdr.arith.bool_bits = meta.a_gt_b ++ bool_pad[6:0];
    }

    action compare() {
        hdr.arith.cmp = (bit<8>)(bit<1>)(hdr.arith.a == hdr.arith.b)
            | ((bit<8>)(bit<1>)(hdr.arith.a != hdr.arith.b) << 1)
            | ((bit<8>)(bit<1>)(hdr.arith.a < hdr.arith.b) << 2)
            | ((bit<8>)(bit<1>)(hdr.arith.a >= hdr.arith.b) << 3)
            | ((bit<8>)(bit<1>)(hdr.arith.s < 0) << 4)
            | ((bit<8>)(bit<1>)(hdr.arith.a > hdr.arith.b && hdr.arith.s < 0) << 5)
            | ((bit<8>)(bit<1>)(hdr.arith.a == hdr.arith.b
                                || hdr.arith.u8a > hdr.arith.u8b) << 6)
            | ((bit<8>)(bit<1>)(!(hdr.arith.u8a == hdr.arith.u8b)) << 7);
    }

    action externs() {
        random(hdr.arith.rand, 16w100, 16w199);
        log_msg("action_features: a={} b={}", {hdr.arith.a, hdr.arith.b});
        log_msg("action_features: externs ran");
        probe_counter.count((bit<32>)hdr.arith.counter_index);
        probe_meter.execute_meter((bit<32>)hdr.arith.counter_index,
                                  hdr.arith.meter_color);
    }

    apply {
        if (!hdr.arith.isValid()) {
            mark_to_drop(standard_metadata);
        } else {
            hdr.arith.valid_bits = (bit<8>)(bit<1>)hdr.extra.isValid();
            arithmetic();
            bits_and_casts();
            saturating();
            logic(0x80);
            compare();
            externs();
            if (hdr.arith.flags[1:1] == 1) {
                hdr.extra.setInvalid();
            }
            if (hdr.arith.flags[2:2] == 1 && !hdr.extra.isValid()) {
                hdr.extra.setValid();
                hdr.extra.value = 0xCAFE;
            }
            if (hdr.extra.isValid()) {
                hdr.arith.valid_bits = hdr.arith.valid_bits | 0x02;
            }
            if ((bool)meta.a_gt_b) {
                hdr.arith.valid_bits = hdr.arith.valid_bits | 0x04;
            }
            standard_metadata.egress_spec = standard_metadata.ingress_port;
            if (hdr.arith.flags[7:7] == 1) {
                mark_to_drop(standard_metadata);
            }
        }
    }
}

control AEgress(inout a_headers_t hdr, inout a_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control AComputeChecksum(inout a_headers_t hdr, inout a_metadata_t meta) {
    apply { }
}

control ADeparser(packet_out packet, in a_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arith);
        packet.emit(hdr.extra);
    }
}

V1Switch(AParser(), AVerifyChecksum(), AIngress(), AEgress(),
         AComputeChecksum(), ADeparser()) main;
