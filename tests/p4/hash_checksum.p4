/* Conformance: hash algorithms and the IPv4 checksum.
 *
 * Exercises
 *   - hash() with crc16, crc32, identity and csum16 over a field list:
 *     result = base + (h mod max). Full width needs max = 2^W explicitly:
 *     recent BMv2 treats max 0 as 1 (result = base), older BMv2 divided by 0.
 *   - verify_checksum(csum16) over the IPv4 header ->
 *     standard_metadata.checksum_error; update_checksum(csum16) after the
 *     ingress changed the TTL
 *
 * Packet: ethernet | ipv4 (protocol 253, option-less) | hash_probe_t.
 * It comes back out of its ingress port with TTL - 1, a recomputed IPv4
 * checksum (also when the received one was wrong) and the results:
 *   crc16      = crc16(a, b, c)            full 16 bits; BMv2's crc16 is
 *                CRC-16/ARC (poly 0x8005, reflected, init 0, xorout 0)
 *                over the fields packed big-endian (10 bytes here)
 *   crc32      = crc32(a, b, c)            full 32 bits (zlib's CRC-32)
 *   identity   = identity(a)               32 bits
 *   csum16     = csum16(a, b, c)           16 bits (ones' complement sum,
 *                                           complemented)
 *   crc16_mod  = 1000 + crc16(a, b, c) mod 100
 *   crc32_ipv4 = crc32(ipv4 src, dst, protocol) (5-tuple-style input with
 *                fields of mixed widths)
 *   checksum_error = standard_metadata.checksum_error as received
 * Drive it with a correct and with a corrupted IPv4 checksum.
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<8> IP_PROTO_HASH_PROBE = 253;   /* RFC 3692 experimental */

header hash_probe_t {
    bit<32> a;
    bit<32> b;
    bit<16> c;
    bit<16> crc16;
    bit<32> crc32;
    bit<32> identity;
    bit<16> csum16;
    bit<16> crc16_mod;
    bit<32> crc32_ipv4;
    bit<8>  checksum_error;
}

struct h_headers_t {
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    hash_probe_t probe;
}

struct h_metadata_t {
}

parser HParser(packet_in packet, out h_headers_t hdr, inout h_metadata_t meta,
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
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, IP_PROTO_HASH_PROBE): parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        packet.extract(hdr.probe);
        transition accept;
    }
}

control HVerifyChecksum(inout h_headers_t hdr, inout h_metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control HIngress(inout h_headers_t hdr, inout h_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.probe.isValid()) {
            mark_to_drop(standard_metadata);
        } else {
            hash(hdr.probe.crc16, HashAlgorithm.crc16, 16w0,
                 { hdr.probe.a, hdr.probe.b, hdr.probe.c }, 32w0x10000);
            hash(hdr.probe.crc32, HashAlgorithm.crc32, 32w0,
                 { hdr.probe.a, hdr.probe.b, hdr.probe.c }, 64w0x100000000);
            hash(hdr.probe.identity, HashAlgorithm.identity, 32w0,
                 { hdr.probe.a }, 64w0x100000000);
            hash(hdr.probe.csum16, HashAlgorithm.csum16, 16w0,
                 { hdr.probe.a, hdr.probe.b, hdr.probe.c }, 32w0x10000);
            hash(hdr.probe.crc16_mod, HashAlgorithm.crc16, 16w1000,
                 { hdr.probe.a, hdr.probe.b, hdr.probe.c }, 32w100);
            hash(hdr.probe.crc32_ipv4, HashAlgorithm.crc32, 32w0,
                 { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol },
                 64w0x100000000);
            hdr.probe.checksum_error = (bit<8>)standard_metadata.checksum_error;
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            standard_metadata.egress_spec = standard_metadata.ingress_port;
        }
    }
}

control HEgress(inout h_headers_t hdr, inout h_metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control HComputeChecksum(inout h_headers_t hdr, inout h_metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control HDeparser(packet_out packet, in h_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.probe);
    }
}

V1Switch(HParser(), HVerifyChecksum(), HIngress(), HEgress(),
         HComputeChecksum(), HDeparser()) main;
