/* Native backend checks: resubmit and recirculate chains that never end on their own
 * (the switch cuts them at its bound and counts loop_limit), and a unicast truncate.
 *
 * Packet: ethernet (0x88B7) | loop_probe_t | payload
 *   mode 1: ingress resubmits every pass (field list: passes);
 *   mode 2: egress recirculates every pass (field list: passes);
 *   mode 3: resubmit until passes == limit, then recirculate until passes == 2 * limit,
 *           then leave;
 *   mode 4: egress truncates the frame to limit bytes.
 * Every pass counts itself in meta.passes and in register pass_count[mode]; ingress
 * sends the packet to port 2 and writes passes and instance_type into the probe.
 */
#include <core.p4>
#include <v1model.p4>

header eth_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header loop_probe_t {
    bit<8>  mode;
    bit<8>  limit;
    bit<8>  passes;
    bit<8>  instance_type;
}

struct loop_headers_t {
    eth_t        eth;
    loop_probe_t probe;
}

struct loop_meta_t {
    @field_list(1)
    bit<8> passes;
}

parser LoopParser(packet_in packet, out loop_headers_t hdr, inout loop_meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            0x88B7: probe;
            default: accept;
        }
    }
    state probe {
        packet.extract(hdr.probe);
        transition accept;
    }
}

control LoopVerify(inout loop_headers_t hdr, inout loop_meta_t meta) {
    apply { }
}

control LoopIngress(inout loop_headers_t hdr, inout loop_meta_t meta,
                    inout standard_metadata_t standard_metadata) {
    register<bit<32>>(8) pass_count;

    apply {
        standard_metadata.egress_spec = 2;
        if (hdr.probe.isValid()) {
            meta.passes = meta.passes + 1;
            hdr.probe.passes = meta.passes;
            hdr.probe.instance_type = (bit<8>) standard_metadata.instance_type;
            bit<32> n;
            pass_count.read(n, (bit<32>) hdr.probe.mode[2:0]);
            pass_count.write((bit<32>) hdr.probe.mode[2:0], n + 1);
            if (hdr.probe.mode == 1 || (hdr.probe.mode == 3 && meta.passes < hdr.probe.limit)) {
                resubmit_preserving_field_list(1);
            }
        }
    }
}

control LoopEgress(inout loop_headers_t hdr, inout loop_meta_t meta,
                   inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.probe.isValid()) {
            if (hdr.probe.mode == 2 || (hdr.probe.mode == 3 && meta.passes < 2 * hdr.probe.limit)) {
                recirculate_preserving_field_list(1);
            } else if (hdr.probe.mode == 4) {
                truncate((bit<32>) hdr.probe.limit);
            }
        }
    }
}

control LoopCompute(inout loop_headers_t hdr, inout loop_meta_t meta) {
    apply { }
}

control LoopDeparser(packet_out packet, in loop_headers_t hdr) {
    apply {
        packet.emit(hdr.eth);
        packet.emit(hdr.probe);
    }
}

V1Switch(LoopParser(), LoopVerify(), LoopIngress(), LoopEgress(), LoopCompute(), LoopDeparser()) main;
