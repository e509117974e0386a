/* Conformance: frames that take the L2 path.
 *
 * A small router/bridge: IPv4 frames whose destination is in ipv4_host are
 * routed (TTL - 1, checksum updated); everything else -- frames that are
 * not IPv4 (ARP, an unknown EtherType, a bare 14-byte Ethernet header) and
 * IPv4 frames too short for an IPv4 header, which the parser leaves invalid
 * with parser_error = PacketTooShort -- is bridged by an exact match on
 * the destination MAC (dmac: hit, or its default action, which the control
 * plane changes over P4Runtime). Egress then applies port_smac, keyed on
 * egress_port, whose action rewrites a bit slice of the source MAC.
 *
 * So that a test sees the metadata without a probe header, egress also
 * writes into the source MAC:
 *   src_addr[7:0]   = port_smac's parameter (unchanged on a miss)
 *   src_addr[15:8]  = parser_error: 0 NoError, 1 PacketTooShort, 0xFF other
 *   src_addr[31:16] = standard_metadata.packet_length (egress)
 *   src_addr[39:32] = ingress_port (low 8 bits, carried in user metadata)
 *   src_addr[47:40] unchanged
 *
 * Control plane (tests/test_conformance.py l2_setup):
 *   dmac 02:00:00:00:00:02 -> forward(2), ff:ff:ff:ff:ff:ff -> forward(4);
 *   default: drop(), then forward(3) over P4Runtime;
 *   ipv4_host 10.0.0.2 -> route(1);
 *   port_smac 2 -> rewrite_smac(0x22), 3 -> rewrite_smac(0x33); port 1 and
 *   4 miss (NoAction: the low byte stays as sent).
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

struct l2_headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

struct l2_metadata_t {
    bit<8> in_port;
}

parser L2Parser(packet_in packet, out l2_headers_t hdr, inout l2_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control L2VerifyChecksum(inout l2_headers_t hdr, inout l2_metadata_t meta) {
    apply { }
}

control L2Ingress(inout l2_headers_t hdr, inout l2_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action route(port_t port) {
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table dmac {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; drop; }
        default_action = drop();
        size = 64;
    }
    table ipv4_host {
        key = { hdr.ipv4.dst_addr: exact; }
        actions = { route; NoAction; }
        default_action = NoAction();
        size = 64;
    }
    apply {
        meta.in_port = (bit<8>)standard_metadata.ingress_port;
        if (hdr.ipv4.isValid()) {
            if (!ipv4_host.apply().hit) {
                dmac.apply();
            }
        } else {
            dmac.apply();
        }
    }
}

control L2Egress(inout l2_headers_t hdr, inout l2_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    action rewrite_smac(bit<8> low) {
        hdr.ethernet.src_addr[7:0] = low;
    }
    table port_smac {
        key = { standard_metadata.egress_port: exact; }
        actions = { rewrite_smac; NoAction; }
        default_action = NoAction();
        size = 16;
    }
    apply {
        port_smac.apply();
        if (standard_metadata.parser_error == error.NoError) {
            hdr.ethernet.src_addr[15:8] = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.ethernet.src_addr[15:8] = 1;
        } else {
            hdr.ethernet.src_addr[15:8] = 0xFF;
        }
        hdr.ethernet.src_addr[31:16] = (bit<16>)standard_metadata.packet_length;
        hdr.ethernet.src_addr[39:32] = meta.in_port;
    }
}

control L2ComputeChecksum(inout l2_headers_t hdr, inout l2_metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control L2Deparser(packet_out packet, in l2_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(L2Parser(), L2VerifyChecksum(), L2Ingress(), L2Egress(),
         L2ComputeChecksum(), L2Deparser()) main;
