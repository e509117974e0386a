/* gradnet: parser, checksum controls and deparser shared by the programs. */
#ifndef _GRADNET_PARSERS_P4_
#define _GRADNET_PARSERS_P4_

#include "config.p4"
#include "headers.p4"

parser GradnetParser(packet_in packet,
                     out headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default:  parse_ethernet;
        }
    }

    /* Controller's PacketOut: its metadata header precedes the frame. */
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* L4 only behind an option-less header of a whole datagram (MF clear,
         * offset 0): options are not parsed, and a fragment's L4 header and
         * payload are not all in this packet. Forwarding drops the rest
         * (forwarding.p4, DROP_REASON_IP_OPTIONS / _IP_FRAGMENT). */
        transition select(hdr.ipv4.ihl, hdr.ipv4.flags[0:0], hdr.ipv4.frag_offset,
                          hdr.ipv4.protocol) {
            (5, 0, 0, IP_PROTO_TCP): parse_tcp;
            (5, 0, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        /* Technique headers: one case per GRADNET_*_UDP_PORT, compiled in
         * only by the programs that handle them (the plain forwarding of the
         * baselines carries them as payload, at no parsing cost). */
#ifdef GRADNET_WITH_INA
        transition select(hdr.udp.dst_port) {
            GRADNET_INA_UDP_PORT: parse_ina;
            default: accept;
        }
#else
        transition accept;
#endif
    }

#ifdef GRADNET_WITH_INA
    state parse_ina {
        packet.extract(hdr.ina);
        /* A CLEAR carries no values: it only names the fragment to free, so the
         * PS's uplink (which also carries every RESULT) sends 62-byte frames for it. */
        transition select(hdr.ina.msg_type) {
            INA_CLEAR: accept;
            INA_NACK: accept;  /* header only, like CLEAR */
            default: parse_ina_values;
        }
    }

    state parse_ina_values {
        packet.extract(hdr.ina_values);
        transition accept;
    }
#endif
}

/* IPv4 header checksum over the 20-byte option-less header. Packets with
 * options are neither verified nor updated (their checksum covers bytes the
 * parser does not extract); forwarding drops them.
 * A failed check sets standard_metadata.checksum_error (BMv2 does not drop;
 * the ingress decides). */
control GradnetVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control GradnetComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

/* Emit order = wire order. packet_in first: the P4Runtime server strips it.
 * packet_out is never emitted (ingress invalidates it). */
control GradnetDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.ina);
        packet.emit(hdr.ina_values);
    }
}

#endif  /* _GRADNET_PARSERS_P4_ */
