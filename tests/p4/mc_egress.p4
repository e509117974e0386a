/* Conformance: what a multicast replica's egress may ask for.
 *
 * Exercises, per replica of a multicast group (egress instance_type 5),
 * chosen by its replication id (egress_rid):
 *   rid 1: truncate(20) -- the replica leaves cut to 20 bytes
 *   rid 2: clone E2E to session MC_E2E_SESSION (an egress clone of a replica)
 *   rid 3: recirculate once, preserving a counter (@field_list(1)); the
 *          recirculated copy re-enters ingress as a unicast to mc_probe.out_port
 *   rid 4: mark_to_drop
 *   any other rid: leaves as it is
 * Every copy writes its instance_type, egress_rid, egress_port and the
 * recirculation count into the probe.
 *
 * Packet: ethernet (0x88B6) | mc_probe_t | payload. Ingress sets mcast_grp to
 * mc_probe.mcast_grp (0: unicast to out_port). Install groups with the rids
 * above and clone session MC_E2E_SESSION as the test needs.
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<32> MC_E2E_SESSION = 9;

header mc_probe_t {
    bit<16> mcast_grp;
    bit<16> out_port;
    bit<8>  instance_type;   /* results, written in egress */
    bit<16> egress_rid;
    bit<16> egress_port;
    bit<8>  recirc_count;
}

struct m_headers_t {
    ethernet_t ethernet;
    mc_probe_t probe;
}

struct m_metadata_t {
    @field_list(1)
    bit<8> recirc_count;
}

parser MParser(packet_in packet, out m_headers_t hdr, inout m_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x88B6: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        packet.extract(hdr.probe);
        transition accept;
    }
}

control MVerifyChecksum(inout m_headers_t hdr, inout m_metadata_t meta) {
    apply { }
}

control MIngress(inout m_headers_t hdr, inout m_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.probe.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        standard_metadata.egress_spec = (bit<9>)hdr.probe.out_port;
        if (meta.recirc_count == 0) {
            standard_metadata.mcast_grp = hdr.probe.mcast_grp;
        }
    }
}

control MEgress(inout m_headers_t hdr, inout m_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply {
        hdr.probe.instance_type = (bit<8>)standard_metadata.instance_type;
        hdr.probe.egress_rid = standard_metadata.egress_rid;
        hdr.probe.egress_port = (bit<16>)standard_metadata.egress_port;
        hdr.probe.recirc_count = meta.recirc_count;
        if (standard_metadata.instance_type == 5) {
            if (standard_metadata.egress_rid == 1) {
                truncate(20);
            } else if (standard_metadata.egress_rid == 2) {
                clone(CloneType.E2E, MC_E2E_SESSION);
            } else if (standard_metadata.egress_rid == 3) {
                meta.recirc_count = 1;
                recirculate_preserving_field_list(1);
            } else if (standard_metadata.egress_rid == 4) {
                mark_to_drop(standard_metadata);
            }
        }
    }
}

control MComputeChecksum(inout m_headers_t hdr, inout m_metadata_t meta) {
    apply { }
}

control MDeparser(packet_out packet, in m_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.probe);
    }
}

V1Switch(MParser(), MVerifyChecksum(), MIngress(), MEgress(),
         MComputeChecksum(), MDeparser()) main;
