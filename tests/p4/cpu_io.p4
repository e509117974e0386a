/* Conformance: controller I/O -- packet-in, packet-out, digest.
 *
 * A small L2 learning switch (as in p4lang/tutorials):
 *   - packet-out: a packet arriving on CPU_PORT carries packet_out_t
 *     (gradnet's @controller_header("packet_out")); it leaves on
 *     packet_out.egress_port with the header removed, no lookup.
 *   - digest: a source MAC missing from learned_macs triggers
 *     digest<mac_learn_digest_t>(1, {src_addr, ingress_port}); the
 *     controller acks it and installs learned_macs + dmac entries.
 *   - packet-in: a destination MAC missing from dmac goes to CPU_PORT with
 *     packet_in_t {ingress_port} prepended (@controller_header("packet_in"));
 *     the P4Runtime server strips it into PacketIn metadata id 1.
 * Broadcast (ff:ff:ff:ff:ff:ff) is multicast to group 1 when the
 * controller has installed it, like any other dmac entry with set_mcast.
 *
 * How to drive it: start with empty tables; send a frame from
 * 00:00:00:00:00:01 on port 1 to 00:00:00:00:00:02 -> one digest
 * {0x000000000001, 1} and one PacketIn (ingress_port 1) with the frame.
 * Install dmac 00:..:01 -> forward(1) and learned_macs 00:..:01; send the
 * reverse frame from port 2 -> digest {..02, 2}, delivered on port 1.
 * PacketOut with egress_port 3 -> the frame appears on port 3 unchanged.
 */
#include <core.p4>
#include <v1model.p4>
#include "config.p4"
#include "headers.p4"

struct c_headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
}

struct mac_learn_digest_t {
    mac_addr_t src_addr;
    port_t     ingress_port;
}

struct c_metadata_t {
}

parser CParser(packet_in packet, out c_headers_t hdr, inout c_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control CVerifyChecksum(inout c_headers_t hdr, inout c_metadata_t meta) {
    apply { }
}

control CIngress(inout c_headers_t hdr, inout c_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    action learn() {
        digest<mac_learn_digest_t>(1, { hdr.ethernet.src_addr,
                                        standard_metadata.ingress_port });
    }
    table learned_macs {
        key = { hdr.ethernet.src_addr: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
        size = 1024;
    }

    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }
    action set_mcast(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }
    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }
    table dmac {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; set_mcast; to_cpu; }
        default_action = to_cpu();
        size = 1024;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else if (hdr.ethernet.isValid()) {
            learned_macs.apply();
            dmac.apply();
        } else {
            mark_to_drop(standard_metadata);
        }
    }
}

control CEgress(inout c_headers_t hdr, inout c_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

control CComputeChecksum(inout c_headers_t hdr, inout c_metadata_t meta) {
    apply { }
}

control CDeparser(packet_out packet, in c_headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
    }
}

V1Switch(CParser(), CVerifyChecksum(), CIngress(), CEgress(),
         CComputeChecksum(), CDeparser()) main;
