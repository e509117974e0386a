/* gradnet: packet headers and per-packet metadata. */
#ifndef _GRADNET_HEADERS_P4_
#define _GRADNET_HEADERS_P4_

#include "config.p4"

/* P4Runtime PacketIn metadata: prepended to packets sent to CPU_PORT.
 * p4c puts these fields into P4Info controller_packet_metadata "packet_in"
 * (ids 1, 2 in field order); the whole header is 2 bytes on the wire
 * between switch and P4Runtime server. */
@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

/* P4Runtime PacketOut metadata: prepended by the server to packets the
 * controller sends; the packet arrives on CPU_PORT. */
@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

/* IPv4 without options; packets with options (ihl > 5) are parsed up to the
 * fixed header only (see parsers.p4). */
header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      diffserv;     /* DSCP (6) + ECN (2) */
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

/* TCP fixed header (options stay in the payload): enough for the 5-tuple
 * hash and for flags-based rules. */
header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

struct headers_t {
    packet_out_t packet_out;   /* only on packets from CPU_PORT */
    packet_in_t  packet_in;    /* only on packets to CPU_PORT; emitted first */
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    tcp_t        tcp;
    udp_t        udp;
    /* Technique headers go here, after udp, in wire order (each parsed from
     * the UDP destination port GRADNET_*_UDP_PORT, see parsers.p4):
     *   ina_t / ina_values_t  (in-network aggregation, technique 1)
     *   ndn TLV headers       (NDN PIT/FIB, technique 2)
     *   ... */
}

struct metadata_t {
    /* L4 ports of TCP or UDP (0 otherwise): one place for the 5-tuple hash. */
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    /* Forwarding */
    bit<16> ecmp_group_id;
    bit<16> ecmp_group_size;
    bit<16> ecmp_member_index;
    bit<8>  drop_reason;        /* DROP_REASON_*, 0 = not dropped */
    /* Link emulation (egress) */
    bit<32> loss_threshold;
    bit<32> loss_random;
    /* Technique metadata goes here (aggregator index, PIT port set, ...). */
}

#endif  /* _GRADNET_HEADERS_P4_ */
