/* Conformance: indirect meters, packets and bytes (two-rate three-colour).
 *
 * Packet: ethernet (0x88B6) | meter_probe_t. Ingress forwards by a one-table
 * port map (default: port 1) and, for a probe, runs
 *   pkt_meter  (8 cells, MeterType.packets)  at index probe.index -> probe.pkt_color
 *   byte_meter (8 cells, MeterType.bytes)    at index probe.index -> probe.byte_color
 *   pkt_meter  again at index probe.index + 1 into a 1-bit field -> probe.low_bit
 * (colours: 0 green, 1 yellow, 2 red; an index past the array or an unconfigured
 * cell: green; a 1-bit field keeps the colour's low bit). Meters are configured
 * over P4Runtime (MeterEntry) or the runtime CLI (meter_set_rates).
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_PROBE = 0x88B6;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header meter_probe_t {
    bit<8> index;
    bit<8> pkt_color;
    bit<8> byte_color;
    bit<1> low_bit;
    bit<7> pad;
}

struct headers_t {
    ethernet_t    ethernet;
    meter_probe_t probe;
}

struct meta_t { }

parser MParser(packet_in packet, out headers_t hdr, inout meta_t meta,
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
        transition accept;
    }
}

control MVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control MIngress(inout headers_t hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    meter(8, MeterType.packets) pkt_meter;
    meter(8, MeterType.bytes) byte_meter;

    action set_port(bit<9> port) { standard_metadata.egress_spec = port; }
    table port_map {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_port; }
        default_action = set_port(1);
        size = 64;
    }
    apply {
        port_map.apply();
        if (hdr.probe.isValid()) {
            pkt_meter.execute_meter((bit<32>)hdr.probe.index, hdr.probe.pkt_color);
            byte_meter.execute_meter((bit<32>)hdr.probe.index, hdr.probe.byte_color);
            pkt_meter.execute_meter((bit<32>)hdr.probe.index + 1, hdr.probe.low_bit);
        }
    }
}

control MEgress(inout headers_t hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) { apply { } }

control MCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control MDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.probe);
    }
}

V1Switch(MParser(), MVerify(), MIngress(), MEgress(), MCompute(), MDeparser()) main;
