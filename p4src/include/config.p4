/* gradnet: constants shared by every data plane and by the controller.
 *
 * The controller (controller/) mirrors the values it needs (CPU port, UDP
 * ports, table sizes); change both sides together.
 */
#ifndef _GRADNET_CONFIG_P4_
#define _GRADNET_CONFIG_P4_

typedef bit<9>  port_t;
typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

/* Ports. Data ports are 1..N as in the topology; 255 is the P4Runtime CPU
 * port (simple_switch_grpc --cpu-port 255); 511 is v1model's drop port. */
const port_t CPU_PORT  = 255;
const port_t DROP_PORT = 511;
/* Size of per-port arrays (counters, registers): every 9-bit port id. */
#define NUM_PORTS 512

/* EtherTypes and IP protocols the parsers know. */
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_NDN  = 0x8624;   /* IANA-registered NDN EtherType */
/* VLAN tag protocol ids: 802.1Q, 802.1ad, and the old QinQ 0x9100. Linux strips
 * a 0x8100/0x88A8 tag (VID 0: as untagged) before protocol dispatch. */
const bit<16> ETHERTYPE_VLAN_CTAG = 0x8100;
const bit<16> ETHERTYPE_VLAN_STAG = 0x88A8;
const bit<16> ETHERTYPE_VLAN_QINQ = 0x9100;
/* Token-passing gradient broadcast (token) runs in a LAN and carries its
 * token in a MAC-level header: IEEE 802 "local experimental" EtherType. */
const bit<16> GRADNET_TOKEN_ETHERTYPE = 0x88B5;
const bit<8>  IP_PROTO_TCP = 6;
const bit<8>  IP_PROTO_UDP = 17;

/* UDP ports reserved for the techniques' packets. A data plane recognises a
 * technique's header by the UDP destination port (hosts send to it). */
const bit<16> GRADNET_INA_UDP_PORT   = 40000;  /* ina: in-network aggregation */
const bit<16> GRADNET_DIFF_UDP_PORT  = 40001;  /* differentiated: unreliable blocks */
const bit<16> GRADNET_BCUBE_UDP_PORT = 40002;  /* bcube: level exchanges */
const bit<16> GRADNET_TOKEN_UDP_PORT = 40003;  /* token: broadcast over IP (tests) */
const bit<16> GRADNET_NDN_UDP_PORT   = 6363;   /* ndn: NDN over UDP (NFD's port) */

/* Table sizes (P4Info "size"; BMv2 enforces them). */
#define IPV4_ROUTES_SIZE   4096
#define ECMP_GROUPS_SIZE   1024
#define ECMP_MEMBERS_SIZE  8192   /* sum over groups of group_size */
#define PORT_TABLE_SIZE    NUM_PORTS
#define DSCP_PRIORITY_SIZE 64

/* Reasons a packet is dropped in ingress: index of the ingress_drops counter,
 * so every drop the program decides is counted and explainable. */
#define DROP_REASON_PARSER_ERROR   1
#define DROP_REASON_CHECKSUM_ERROR 2
#define DROP_REASON_NOT_IPV4       3
#define DROP_REASON_TTL_EXPIRED    4
#define DROP_REASON_NO_ROUTE       5
#define DROP_REASON_IP_OPTIONS     6   /* IPv4 header with options (IHL != 5) */
#define DROP_REASON_IP_FRAGMENT    7   /* an IPv4 fragment (MF set or offset != 0) */
#define DROP_REASON_SRC_SPOOF      8   /* source MAC/IPv4 not its host port's (source_guard.p4) */
#define DROP_REASON_COUNT          9

/* In-network aggregation (docs/ina.md). Values per packet: the default below
 * unless the build defines another; make p4 compiles ina.p4 once per size
 * (p4src/gen_lanes.py; docs/ina.md, "Values per packet"). */
#include "generated/ina_lanes_count.p4"
/* UDP length of a GRAD of this program's size: UDP 8 + INA header 52 + values.
 * A GRAD of another size (a job planned for another INA_VALUES) is not summed. */
#define INA_GRAD_UDP_LEN (8 + 52 + 4 * INA_VALUES)
#ifndef NUM_AGGREGATORS
#define NUM_AGGREGATORS 1024
#endif
/* Consistent hashing of the aggregator index (ina_aggregator.p4's ina_ring): a
 * fragment's point on a ring of 2^INA_RING_BITS positions, one table entry each. */
#define INA_RING_BITS 12
#define INA_RING_POSITIONS 4096
/* An aggregator idle this long (microseconds) may be taken over by another
 * fragment (ina_aggregator.p4's ina_aging; the controller may write another). */
const bit<48> INA_AGGREGATOR_TIMEOUT_US = 1000000;
/* An aggregator holding the packet's own key is taken over only when idle
 * 2^INA_SAME_KEY_AGING_SHIFT times the timeout (4x): a rank lagging the others
 * by more than the timeout adds to the round's aggregate instead of dropping
 * the others' sums; a stale aggregate of an earlier use of the fragment number
 * is older than that (the hosts wait longer before reuse, docs/ina.md, "Aging"). */
#define INA_SAME_KEY_AGING_SHIFT 2
const bit<8>  INA_GRAD    = 1;
const bit<8>  INA_PARTIAL = 2;
const bit<8>  INA_RESULT  = 3;
const bit<8>  INA_CLEAR   = 4;
/* Loss recovery (header only): PS -> worker "re-send", PS -> switch "flush",
 * worker -> PS "RESULT missing" (docs/ina.md, "Loss recovery"). */
const bit<8>  INA_NACK    = 5;
const bit<8>  INA_FLAG_RETX   = 1;   /* a worker's retransmission (to the PS) */
const bit<8>  INA_FLAG_VIA_SD = 2;   /* the partial aggregate is merged again at s_d */
/* RESULTs travel down a job's multicast tree addressed to 10.254.0.<job>. */
const bit<32> INA_RESULT_ADDRESS_BASE = 0x0AFE0000;
#define INA_JOBS_SIZE 256
#define INA_FANOUT_SIZE 8192
/* Why an INA packet was consumed at a switch: index of the ina_drops counter. */
#define INA_DROP_ABSORBED      1   /* added to an aggregator, not complete yet */
#define INA_DROP_DUPLICATE     2   /* contributor already in the aggregator */
#define INA_DROP_UNKNOWN_JOB   3
#define INA_DROP_CLEARED       4   /* CLEAR consumed */
#define INA_DROP_WRONG_SIZE    5   /* GRAD of another values per packet */
#define INA_DROP_NACK_EMPTY    6   /* flush NACK for a fragment the switch does not hold */
#define INA_DROP_REASON_COUNT  8

#endif  /* _GRADNET_CONFIG_P4_ */
