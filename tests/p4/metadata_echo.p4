/* Conformance: standard_metadata, copied into the packet.
 *
 * Exercises reading (and where it is an input, writing) every
 * standard_metadata field simple_switch provides, plus the queue id that
 * v1model does not declare, through an @alias("queueing_metadata.qid")
 * field (see queueing_meta_t for how p4c is made to emit the alias).
 *
 * Packet: ethernet (0x88B6) | echo_t. Ingress sets
 *   egress_spec = echo.out_port (ingress port when 0),
 *   priority    = echo.set_priority (BMv2 needs --priority-queues to use it),
 *   mcast_grp   = echo.set_mcast_grp (0: unicast)
 * and both pipelines fill in the rest. Widths are padded to bytes.
 * What to check:
 *   ingress_port     port the packet came in on
 *   egress_spec      value ingress set (read back in ingress)
 *   egress_port      port it left on (egress)
 *   instance_type    0 (or 5 for multicast copies)
 *   packet_length    length of the received frame in bytes (ingress)
 *   mcast_grp        as set; egress_rid per multicast copy
 *   priority         as set, seen in egress
 *   qid              egress queue: priority with --priority-queues, else 0
 *   enq_qdepth, deq_qdepth, enq_timestamp, deq_timedelta: queueing data,
 *                    small / monotonic, not exact
 *   ingress_global_timestamp, egress_global_timestamp: microseconds,
 *                    egress >= ingress
 *   parser_error     0 (a truncated echo_t is dropped; error paths are in
 *                    parser_features.p4); checksum_error 0
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> ETHERTYPE_PROBE = 0x88B6;

header echo_t {
    /* inputs */
    bit<16> out_port;
    bit<8>  set_priority;
    bit<8>  _pad0;
    bit<16> set_mcast_grp;
    /* ingress */
    bit<16> ingress_port;
    bit<16> egress_spec;
    bit<32> ingress_instance_type;
    bit<32> packet_length;
    bit<48> ingress_global_timestamp;
    bit<8>  parser_error;
    bit<8>  checksum_error;
    /* egress */
    bit<16> egress_port;
    bit<32> egress_instance_type;
    bit<16> mcast_grp;
    bit<16> egress_rid;
    bit<8>  priority;
    bit<8>  qid;
    bit<32> enq_timestamp;
    bit<32> enq_qdepth;
    bit<32> deq_timedelta;
    bit<32> deq_qdepth;
    bit<48> egress_global_timestamp;
}

struct e_headers_t {
    ethernet_t ethernet;
    echo_t     echo;
}

/* v1model.p4 (p4c 1.2.4) has no qid field, and p4c emits an @alias only
 * for a field of a struct-like *type* that keeps its own BMv2 header type:
 * user metadata scalars are flattened and lose the annotation. A header
 * inside the metadata struct keeps its type, but the alias names the type
 * ("<type>.qid") while the instance is "userMetadata.<field>"; naming the
 * type like the instance makes the alias point at the instance:
 *   "field_aliases": [["queueing_metadata.qid", ["userMetadata.queueing", "qid"]]]
 * simple_switch then writes the queue id into it before egress. The header
 * stays invalid; only its field is used. */
@name("userMetadata.queueing")
header queueing_meta_t {
    @alias("queueing_metadata.qid")
    bit<5> qid;
    bit<3> _pad;
}

struct e_metadata_t {
    queueing_meta_t queueing;
}

parser EParser(packet_in packet, out e_headers_t hdr, inout e_metadata_t meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_echo;
            default: accept;
        }
    }
    state parse_echo {
        packet.extract(hdr.echo);
        transition accept;
    }
}

control EVerifyChecksum(inout e_headers_t hdr, inout e_metadata_t meta) {
    apply { }
}

control EIngress(inout e_headers_t hdr, inout e_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.echo.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        if (hdr.echo.out_port == 0) {
            standard_metadata.egress_spec = standard_metadata.ingress_port;
        } else {
            standard_metadata.egress_spec = (bit<9>)hdr.echo.out_port;
        }
        standard_metadata.priority = (bit<3>)hdr.echo.set_priority;
        standard_metadata.mcast_grp = hdr.echo.set_mcast_grp;

        hdr.echo.ingress_port = (bit<16>)standard_metadata.ingress_port;
        hdr.echo.egress_spec = (bit<16>)standard_metadata.egress_spec;
        hdr.echo.ingress_instance_type = standard_metadata.instance_type;
        hdr.echo.packet_length = standard_metadata.packet_length;
        hdr.echo.ingress_global_timestamp = standard_metadata.ingress_global_timestamp;
        hdr.echo.parser_error =
            standard_metadata.parser_error == error.NoError ? 8w0 : 8w1;
        hdr.echo.checksum_error = (bit<8>)standard_metadata.checksum_error;
    }
}

control EEgress(inout e_headers_t hdr, inout e_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply {
        hdr.echo.egress_port = (bit<16>)standard_metadata.egress_port;
        hdr.echo.egress_instance_type = standard_metadata.instance_type;
        hdr.echo.mcast_grp = standard_metadata.mcast_grp;
        hdr.echo.egress_rid = standard_metadata.egress_rid;
        hdr.echo.priority = (bit<8>)standard_metadata.priority;
        hdr.echo.qid = (bit<8>)meta.queueing.qid;
        hdr.echo.enq_timestamp = standard_metadata.enq_timestamp;
        hdr.echo.enq_qdepth = (bit<32>)standard_metadata.enq_qdepth;
        hdr.echo.deq_timedelta = standard_metadata.deq_timedelta;
        hdr.echo.deq_qdepth = (bit<32>)standard_metadata.deq_qdepth;
        hdr.echo.egress_global_timestamp = standard_metadata.egress_global_timestamp;
    }
}

control EComputeChecksum(inout e_headers_t hdr, inout e_metadata_t meta) {
    apply { }
}

control EDeparser(packet_out packet, in e_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.echo);
    }
}

V1Switch(EParser(), EVerifyChecksum(), EIngress(), EEgress(),
         EComputeChecksum(), EDeparser()) main;
