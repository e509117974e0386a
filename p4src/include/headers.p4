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

/* In-network aggregation (ina): docs/ina.md is the wire spec. */
header ina_t {
    bit<8>  msg_type;    /* INA_GRAD, INA_PARTIAL, INA_RESULT, INA_CLEAR */
    bit<8>  job_id;
    bit<16> worker_id;   /* rank of the sender of a GRAD */
    bit<32> fragment;
    bit<16> tag;         /* device id of the switch that must aggregate; 0 = PS */
    bit<16> origin;      /* switch that passed it on unaggregated, else 0 */
    bit<256> bitmap;     /* contributors summed in this packet (bit r = rank r) */
    bit<16> count;       /* number of contributors */
    bit<16> fanin;       /* contributions the tagged switch expects */
    bit<8>  flags;       /* INA_FLAG_RETX, INA_FLAG_VIA_SD */
    bit<16> sd_fanin;    /* with VIA_SD: contributions s_d expects when merging */
    bit<8>  max_exp;     /* block floating point: max of the contributors' exponents */
}

/* INA_VALUES two's-complement fixed-point values; sums wrap mod 2^32. */
header ina_values_t {
#include "generated/ina_lanes_header.p4"
}

struct headers_t {
    packet_out_t packet_out;   /* only on packets from CPU_PORT */
    packet_in_t  packet_in;    /* only on packets to CPU_PORT; emitted first */
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    tcp_t        tcp;
    udp_t        udp;
    /* Technique headers, after udp, in wire order (each parsed from the UDP
     * destination port GRADNET_*_UDP_PORT by programs that define the
     * matching GRADNET_WITH_* macro, see parsers.p4). */
    ina_t        ina;
    ina_values_t ina_values;
}

struct ina_metadata_t {
    bit<16>     switch_id;      /* this switch's aggregator id (0: not configured) */
    ipv4_addr_t switch_ip;
    bit<16>     sd_id;          /* the PS's ToR switch, which also aggregates */
    ipv4_addr_t sd_ip;
    ipv4_addr_t ps_ip;
    bit<16>     result_group;   /* multicast group of the job's workers (on s_d) */
    bit<32>     index;          /* aggregator index */
    bit<32>     ring_pos;       /* the fragment's point on the ring (ina_ring) */
    bit<16>     locate_origin;  /* the origin locate hashes with */
    bit<64>     key;            /* 1 ++ origin ++ job ++ fragment; 0 = free */
    bit<64>     stored_key;
    bit<256>    stored_bitmap;
    bit<16>     stored_count;
    bit<8>      stored_exp;     /* the aggregator's max_exp so far */
    bit<48>     stored_time;    /* the aggregator's last contribution (us) */
    bit<48>     aging_timeout;  /* take over an aggregator idle this long; 0 = never */
    bit<1>      handled;        /* INA consumed or multicast the packet */
}

struct metadata_t {
    /* L4 ports of TCP or UDP (0 otherwise): one place for the 5-tuple hash. */
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    /* Forwarding */
    bit<16> ecmp_group_id;
    bit<16> ecmp_group_size;
    bit<16> ecmp_member_index;
    bit<16> ecmp_salt;          /* per switch, see forwarding.p4 */
    bit<8>  drop_reason;        /* DROP_REASON_*, 0 = not dropped */
    bit<1>  src_spoof;          /* source not its host port's (source_guard.p4) */
    /* In-network aggregation (ina_aggregator.p4) */
    ina_metadata_t ina;
}

#endif  /* _GRADNET_HEADERS_P4_ */
