/* Conformance: standard_metadata per instance type, and the packet length
 * simple_switch reports in egress.
 *
 * simple_switch keeps a packet-length register besides the PHV: the
 * received length, plus or minus the size of every header that an action
 * makes valid (setValid) or invalid (setInvalid), in ingress and in
 * egress. Egress reads standard_metadata.packet_length from it, so it is
 * the length of the packet as deparsed; an E2E clone gets the original's
 * register after the original's egress, an I2E clone and a resubmitted
 * packet the ingress length, a recirculated one the deparsed length, and
 * a PacketOut the length of what arrived on the CPU port (packet_out
 * header included, minus it once ingress invalidates it).
 *
 * Packet: ethernet (0x88B6) | im_probe_t | [im_extra_t if has_extra]
 *   from the CPU port (PacketOut): packet_out_t | ethernet | probe ...
 * Ingress (every pass) records what it sees into the i_* fields, then
 *   egress_spec = out_port (or packet_out.egress_port on a PacketOut, whose
 *   header it invalidates) and acts on op (first pass only):
 *     1 multicast to mcast_grp   2 clone I2E to session 5 (field list: tag)
 *     3 clone E2E to session 6 in egress   4 resubmit (field list: tag)
 *     5 recirculate in egress, once (field list: tag = 0xC7)   other: unicast
 *   hdr_ops bit 0: ingress setValid(extra); bit 1: ingress setInvalid(extra);
 *           bit 2: egress (instance_type 0) setValid(extra);
 *           bit 3: egress (instance_type 0) setInvalid(extra).
 * Egress records every standard_metadata field (e_*) and the metadata
 * the parser and ingress left (parser_mark, tag). A probe with magic 0xEE
 * fails a verify() in the parser (parser_error = ProbeMagic) after the
 * probe was extracted; the parser sets parser_mark = 0x77 first.
 */
#include <core.p4>
#include <v1model.p4>
#include "config.p4"
#include "headers.p4"

const bit<16> ETHERTYPE_PROBE = 0x88B6;
const bit<32> I2E_SESSION = 5;
const bit<32> E2E_SESSION = 6;

error { ProbeMagic }

header im_probe_t {
    /* inputs */
    bit<8>  op;
    bit<8>  hdr_ops;
    bit<8>  magic;
    bit<8>  has_extra;
    bit<16> out_port;
    bit<16> mcast_grp;
    /* ingress */
    bit<8>  i_instance_type;
    bit<8>  i_parser_error;
    bit<16> i_ingress_port;
    bit<32> i_packet_length;
    /* egress */
    bit<8>  e_instance_type;
    bit<8>  e_parser_error;
    bit<16> e_ingress_port;
    bit<16> e_egress_spec;
    bit<16> e_egress_port;
    bit<16> e_egress_rid;
    bit<16> e_mcast_grp;
    bit<32> e_packet_length;
    bit<8>  e_priority;
    bit<8>  e_checksum_error;
    bit<8>  e_parser_mark;
    bit<8>  e_tag;
}

header im_extra_t {
    bit<32> value;
}

struct im_headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    im_probe_t   probe;
    im_extra_t   extra;
}

struct im_metadata_t {
    bit<8> parser_mark;
    @field_list(1)
    bit<8> tag;
}

parser ImParser(packet_in packet, out im_headers_t hdr, inout im_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        meta.parser_mark = 0x77;
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
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        packet.extract(hdr.probe);
        verify(hdr.probe.magic != 0xEE, error.ProbeMagic);
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

control ImVerifyChecksum(inout im_headers_t hdr, inout im_metadata_t meta) {
    apply { }
}

control ImIngress(inout im_headers_t hdr, inout im_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.probe.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        hdr.probe.i_instance_type = (bit<8>)standard_metadata.instance_type;
        hdr.probe.i_parser_error =
            standard_metadata.parser_error == error.NoError ? 8w0 : 8w1;
        hdr.probe.i_ingress_port = (bit<16>)standard_metadata.ingress_port;
        hdr.probe.i_packet_length = standard_metadata.packet_length;
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            standard_metadata.egress_spec = (bit<9>)hdr.probe.out_port;
        }
        if (hdr.probe.hdr_ops & 1 != 0) {
            hdr.extra.setValid();
            hdr.extra.value = 0xABCD0123;
        }
        if (hdr.probe.hdr_ops & 2 != 0) {
            hdr.extra.setInvalid();
        }
        if (standard_metadata.instance_type == 0) {
            if (hdr.probe.op == 1) {
                standard_metadata.mcast_grp = hdr.probe.mcast_grp;
            } else if (hdr.probe.op == 2) {
                meta.tag = 0xA5;
                clone_preserving_field_list(CloneType.I2E, I2E_SESSION, 1);
            } else if (hdr.probe.op == 4) {
                meta.tag = 0xB6;
                resubmit_preserving_field_list(1);
            }
        }
    }
}

control ImEgress(inout im_headers_t hdr, inout im_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.probe.e_instance_type = (bit<8>)standard_metadata.instance_type;
        hdr.probe.e_parser_error =
            standard_metadata.parser_error == error.NoError ? 8w0 :
            (standard_metadata.parser_error == error.ProbeMagic ? 8w2 : 8w1);
        hdr.probe.e_ingress_port = (bit<16>)standard_metadata.ingress_port;
        hdr.probe.e_egress_spec = (bit<16>)standard_metadata.egress_spec;
        hdr.probe.e_egress_port = (bit<16>)standard_metadata.egress_port;
        hdr.probe.e_egress_rid = standard_metadata.egress_rid;
        hdr.probe.e_mcast_grp = standard_metadata.mcast_grp;
        hdr.probe.e_packet_length = standard_metadata.packet_length;
        hdr.probe.e_priority = (bit<8>)standard_metadata.priority;
        hdr.probe.e_checksum_error = (bit<8>)standard_metadata.checksum_error;
        hdr.probe.e_parser_mark = meta.parser_mark;
        hdr.probe.e_tag = meta.tag;
        if (standard_metadata.instance_type == 0) {
            if (hdr.probe.hdr_ops & 4 != 0) {
                hdr.extra.setValid();
                hdr.extra.value = 0x4567CDEF;
            }
            if (hdr.probe.hdr_ops & 8 != 0) {
                hdr.extra.setInvalid();
            }
            if (hdr.probe.op == 3) {
                clone(CloneType.E2E, E2E_SESSION);
            } else if (hdr.probe.op == 5 && meta.tag != 0xC7) {
                meta.tag = 0xC7;
                recirculate_preserving_field_list(1);
            }
        }
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
        }
    }
}

control ImComputeChecksum(inout im_headers_t hdr, inout im_metadata_t meta) {
    apply { }
}

control ImDeparser(packet_out packet, in im_headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.probe);
        packet.emit(hdr.extra);
    }
}

V1Switch(ImParser(), ImVerifyChecksum(), ImIngress(), ImEgress(),
         ImComputeChecksum(), ImDeparser()) main;
