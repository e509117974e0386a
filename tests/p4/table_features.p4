/* Conformance: match-action tables.
 *
 * Exercises
 *   - match kinds exact, lpm, ternary (entry priorities), range, and an
 *     exact key on a header's validity (isValid(): exact)
 *   - mutable default action with parameters (controller may change it),
 *     const default_action, @defaultonly action, const entries (ternary,
 *     order = priority)
 *   - control flow: apply().hit, apply().miss, switch (apply().action_run)
 *     with a default arm, if/else, exit
 *   - direct counter (t_exact) and direct meter (t_lpm, packets, read into
 *     the header by the action)
 *
 * Packet: ethernet (ether_type 0x88B6) | table_probe_t; it comes back out
 * of its ingress port with the result fields filled in. Other ether types
 * are dropped (exit). The apply order:
 *   1. t_exact (exact_key): hit -> path |= 0x01 and t_lpm is applied;
 *      miss -> path |= 0x02, default action exact_miss(0xEEEE) (mutable).
 *   2. t_ternary (ternary_key ternary, extra.isValid() exact):
 *      action_run set_ternary -> path |= 0x04;
 *      ternary_then_range      -> t_range applied, path |= 0x08;
 *      default arm (NoAction)  -> path |= 0x10.
 *   3. if (t_const.apply().miss) path |= 0x20 (const default 0xFFFF).
 *   4. if exact_key == 0xFFFFFFFF: exit before the reflect (packet is still
 *      sent: exit ends ingress, egress_spec was set first) and path stays
 *      without 0x80; otherwise path |= 0x80.
 * t_const const entries (const_key ternary): 0x01/0xFF -> 1, 0x10/0xF0 -> 2,
 *   0x00/0x00 would be a catch-all but is left out so a miss is possible:
 *   0x11 -> 2, 0x01 -> 1, 0x05 -> miss.
 * Entries to install: t_exact 5 -> set_exact(0x0505); t_lpm 10.0.0.0/8 ->
 * set_lpm(8), 10.1.0.0/16 -> set_lpm(16) (LPM picks 16 for 10.1.2.3);
 * t_ternary 0x1200/0xFF00 prio 10 -> set_ternary(1), 0x1234/0xFFFF prio 20
 * -> ternary_then_range (higher priority wins for 0x1234);
 * t_range 100..199 -> set_range(1), 150..250 prio higher -> set_range(2).
 * extra: a 2-byte header present when probe.has_extra == 1.
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> ETHERTYPE_PROBE = 0x88B6;

header table_probe_t {
    bit<32> exact_key;
    bit<32> lpm_key;
    bit<16> ternary_key;
    bit<16> range_key;
    bit<8>  const_key;
    bit<8>  has_extra;
    /* results */
    bit<16> exact_result;
    bit<16> lpm_result;
    bit<16> ternary_result;
    bit<16> range_result;
    bit<16> const_result;
    bit<8>  path;
    bit<8>  lpm_color;   /* direct meter color: 0 green, 1 yellow, 2 red */
}

header extra_t {
    bit<16> value;
}

struct t_headers_t {
    ethernet_t    ethernet;
    table_probe_t probe;
    extra_t       extra;
}

struct t_metadata_t {
}

parser TParser(packet_in packet, out t_headers_t hdr, inout t_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        packet.extract(hdr.probe);
        transition select(hdr.probe.has_extra) {
            1: parse_extra;
            default: accept;
        }
    }
    state parse_extra {
        packet.extract(hdr.extra);
        transition accept;
    }
}

control TVerifyChecksum(inout t_headers_t hdr, inout t_metadata_t meta) {
    apply { }
}

control TIngress(inout t_headers_t hdr, inout t_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    direct_counter(CounterType.packets_and_bytes) exact_hits;
    direct_meter<bit<8>>(MeterType.packets) lpm_meter;

    action set_exact(bit<16> value) {
        hdr.probe.exact_result = value;
    }
    @defaultonly
    action exact_miss(bit<16> value) {
        hdr.probe.exact_result = value;
    }
    table t_exact {
        key = { hdr.probe.exact_key: exact; }
        actions = { set_exact; exact_miss; }
        default_action = exact_miss(0xEEEE);
        counters = exact_hits;
        size = 64;
    }

    action set_lpm(bit<16> value) {
        hdr.probe.lpm_result = value;
        lpm_meter.read(hdr.probe.lpm_color);
    }
    table t_lpm {
        key = { hdr.probe.lpm_key: lpm; }
        actions = { set_lpm; NoAction; }
        default_action = NoAction();
        meters = lpm_meter;
        size = 64;
    }

    action set_ternary(bit<16> value) {
        hdr.probe.ternary_result = value;
    }
    action ternary_then_range() {
        hdr.probe.ternary_result = 0x7777;
    }
    table t_ternary {
        key = {
            hdr.probe.ternary_key: ternary;
            hdr.extra.isValid():   exact;
        }
        actions = { set_ternary; ternary_then_range; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    action set_range(bit<16> value) {
        hdr.probe.range_result = value;
    }
    table t_range {
        key = { hdr.probe.range_key: range; }
        actions = { set_range; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    action set_const(bit<16> value) {
        hdr.probe.const_result = value;
    }
    table t_const {
        key = { hdr.probe.const_key: ternary; }
        actions = { set_const; }
        const entries = {
            0x01 &&& 0xFF: set_const(1);
            0x10 &&& 0xF0: set_const(2);
        }
        const default_action = set_const(0xFFFF);
    }

    apply {
        if (!hdr.probe.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        standard_metadata.egress_spec = standard_metadata.ingress_port;

        if (t_exact.apply().hit) {
            hdr.probe.path = hdr.probe.path | 0x01;
            t_lpm.apply();
        } else {
            hdr.probe.path = hdr.probe.path | 0x02;
        }

        switch (t_ternary.apply().action_run) {
            set_ternary: {
                hdr.probe.path = hdr.probe.path | 0x04;
            }
            ternary_then_range: {
                t_range.apply();
                hdr.probe.path = hdr.probe.path | 0x08;
            }
            default: {
                hdr.probe.path = hdr.probe.path | 0x10;
            }
        }

        if (t_const.apply().miss) {
            hdr.probe.path = hdr.probe.path | 0x20;
        }

        if (hdr.probe.exact_key == 0xFFFFFFFF) {
            exit;
        }
        hdr.probe.path = hdr.probe.path | 0x80;
    }
}

control TEgress(inout t_headers_t hdr, inout t_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control TComputeChecksum(inout t_headers_t hdr, inout t_metadata_t meta) {
    apply { }
}

control TDeparser(packet_out packet, in t_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.probe);
        packet.emit(hdr.extra);
    }
}

V1Switch(TParser(), TVerifyChecksum(), TIngress(), TEgress(),
         TComputeChecksum(), TDeparser()) main;
