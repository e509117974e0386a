/* Conformance: packet replication and re-injection.
 *
 * Exercises
 *   - multicast: standard_metadata.mcast_grp set in ingress; egress sees
 *     one copy per (port, rid) of the group, egress_rid per copy
 *   - clone I2E to a session, preserving a metadata field
 *     (clone_preserving_field_list + @field_list(3))
 *   - clone E2E to a session (plain clone(), nothing preserved)
 *   - resubmit preserving a metadata field (@field_list(1))
 *   - recirculate preserving a metadata field (@field_list(2))
 *   - instance_type seen in ingress and egress for each kind of copy.
 *     BMv2 simple_switch numbering (PktInstanceType):
 *       0 NORMAL, 1 INGRESS_CLONE, 2 EGRESS_CLONE, 3 COALESCED,
 *       4 RECIRC, 5 REPLICATION (multicast copy), 6 RESUBMIT
 *
 * Packet: ethernet (0x88B6) | rep_probe_t. Unicast copies leave on
 * probe.out_port. Preserved fields are written back into the probe.
 *   op 1 multicast: mcast_grp = probe.mcast_grp (install group 1 with
 *        replicas (port 1, rid 10), (port 2, rid 20)); each copy has
 *        egress instance_type 5 and its own egress_rid and egress_port.
 *   op 2 clone I2E to session I2E_SESSION (install session 5 -> port 3):
 *        the original leaves on out_port with instance types 0/0, the
 *        clone on port 3 with egress instance_type 1 and tag 0xA5
 *        (preserved; the original has it too, it is ordinary metadata).
 *   op 3 clone E2E to session E2E_SESSION (install 6 -> port 4) in
 *        egress: the clone re-runs egress with instance_type 2 and tag 0
 *        (metadata not preserved), and is not cloned again.
 *   op 4 resubmit once: pass 1 sets resubmit_count = 1 and resubmits;
 *        pass 2 (ingress instance_type 6) sees resubmit_count 1 and the
 *        packet leaves on out_port.
 *   op 5 recirculate once at the end of egress: pass 2 re-parses the
 *        emitted packet, enters ingress with instance_type 4 and
 *        recirc_count 1 (preserved), and leaves on out_port.
  */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> ETHERTYPE_PROBE = 0x88B6;
const bit<32> I2E_SESSION = 5;
const bit<32> E2E_SESSION = 6;

const bit<8> OP_MULTICAST   = 1;
const bit<8> OP_CLONE_I2E   = 2;
const bit<8> OP_CLONE_E2E   = 3;
const bit<8> OP_RESUBMIT    = 4;
const bit<8> OP_RECIRCULATE = 5;

header rep_probe_t {
    bit<8>  op;
    bit<8>  ingress_instance_type;  /* low 8 bits */
    bit<8>  egress_instance_type;
    bit<8>  resubmit_count;
    bit<8>  recirc_count;
    bit<8>  tag;                    /* clone-preserved metadata */
    bit<16> mcast_grp;
    bit<16> egress_rid;
    bit<16> out_port;               /* unicast egress port */
    bit<16> egress_port;            /* port this copy left on */
}

struct r_headers_t {
    ethernet_t  ethernet;
    rep_probe_t probe;
}

struct r_metadata_t {
    @field_list(1)
    bit<8> resubmit_count;
    @field_list(2)
    bit<8> recirc_count;
    @field_list(3)
    bit<8> tag;
}

parser RParser(packet_in packet, out r_headers_t hdr, inout r_metadata_t meta,
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

control RVerifyChecksum(inout r_headers_t hdr, inout r_metadata_t meta) {
    apply { }
}

control RIngress(inout r_headers_t hdr, inout r_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.probe.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        hdr.probe.ingress_instance_type = (bit<8>)standard_metadata.instance_type;
        /* preserved fields survive into this pass (0 on a fresh packet) */
        hdr.probe.resubmit_count = meta.resubmit_count;
        hdr.probe.recirc_count = meta.recirc_count;
        standard_metadata.egress_spec = (bit<9>)hdr.probe.out_port;

        if (hdr.probe.op == OP_MULTICAST) {
            standard_metadata.mcast_grp = hdr.probe.mcast_grp;
        } else if (hdr.probe.op == OP_CLONE_I2E) {
            meta.tag = 0xA5;
            clone_preserving_field_list(CloneType.I2E, I2E_SESSION, 3);
        } else if (hdr.probe.op == OP_RESUBMIT && meta.resubmit_count == 0) {
            meta.resubmit_count = 1;
            resubmit_preserving_field_list(1);
        }
    }
}

control REgress(inout r_headers_t hdr, inout r_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply {
        hdr.probe.egress_instance_type = (bit<8>)standard_metadata.instance_type;
        hdr.probe.egress_rid = standard_metadata.egress_rid;
        hdr.probe.egress_port = (bit<16>)standard_metadata.egress_port;
        hdr.probe.tag = meta.tag;

        if (hdr.probe.op == OP_CLONE_E2E && standard_metadata.instance_type == 0) {
            clone(CloneType.E2E, E2E_SESSION);
        } else if (hdr.probe.op == OP_RECIRCULATE && meta.recirc_count == 0) {
            meta.recirc_count = 1;
            recirculate_preserving_field_list(2);
        }
    }
}

control RComputeChecksum(inout r_headers_t hdr, inout r_metadata_t meta) {
    apply { }
}

control RDeparser(packet_out packet, in r_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.probe);
    }
}

V1Switch(RParser(), RVerifyChecksum(), RIngress(), REgress(),
         RComputeChecksum(), RDeparser()) main;
