/* gradnet: NDN (ndn, docs/ndn.md) headers, metadata and bounds.
 *
 * NDN packet format v0.3 directly over Ethernet (EtherType 0x8624). The parser
 * reads the outer TLV (Interest 0x05 / Data 0x06) and the Name; everything after
 * the Name stays payload. Without varbit, the Name's bytes are extracted one by
 * one into a header stack (so the deparser emits them back unchanged) while each
 * component's (type, length, value) is copied into fixed-width metadata slots.
 *
 * Bounds (anything outside is a counted drop, NDN_DROP_*):
 *   outer TLV length: 1-byte or 3-byte (0xFD) form; Name TLV length <= 64;
 *   at most 6 name components; component value <= 16 bytes, type < 128.
 * After an Interest's Name the parser also takes CanBePrefix, MustBeFresh, Nonce and
 * InterestLifetime (1-, 2- or 4-byte value) when they come in that order, as python-ndn
 * and NFD encode them; anything else after the Name stays payload.
 */
#ifndef _GRADNET_NDN_HEADERS_P4_
#define _GRADNET_NDN_HEADERS_P4_

#include "config.p4"
#include "headers.p4"

#define NDN_MAX_NAME_BYTES 64
#define NDN_MAX_DEPTH      6
#define NDN_MAX_COMPONENT  16
/* Transient PIT: 2^NDN_PIT_BITS entries indexed by the low bits of the name hash
 * (each holds the whole name, compared exactly). */
#define NDN_PIT_BITS 12
#define NDN_PIT_SIZE 4096
/* Nonces remembered for duplicate/loop suppression (indexed by a hash of name and nonce). */
#define NDN_NONCE_BITS 12
#define NDN_NONCE_SIZE 4096
/* InterestLifetime when the Interest has none (NDN's default), and the most a nonce is kept. */
#define NDN_DEFAULT_LIFETIME_MS 4000
#define NDN_MAX_NONCE_US 60000000
/* Subscriptions kept in the data plane: 2^NDN_SUB_BITS entries (by the hash of /PS/train),
 * NDN_PIT_PORTS expiry times each. */
#define NDN_SUB_BITS 8
/* In-ports recorded in a PIT entry: a bitmap of ports 1..8 (bit p-1). */
#define NDN_PIT_PORTS 8
#define NDN_FIB_SIZE 1024
#define NDN_PERSISTENT_PIT_SIZE 256
/* Guarded subscriptions (ndn_sub_admission.p4): jobs with a slot, members on one switch. */
#define NDN_SUB_JOBS_SIZE 256
#define NDN_SUB_MEMBERS_SIZE 2048

const bit<8> NDN_TLV_INTEREST = 0x05;
const bit<8> NDN_TLV_DATA     = 0x06;
const bit<8> NDN_TLV_NAME     = 0x07;
const bit<8> NDN_TLV_GENERIC_COMPONENT = 0x08;
/* The subscription protocol's markers (docs/ndn.md): first name component "*insert*" / "*distribute*"
 * (GenericNameComponent, ASCII). */
const bit<128> NDN_INSERT_MARKER     = 0x2a696e736572742a;            /* "*insert*" */
const bit<128> NDN_DISTRIBUTE_MARKER = 0x2a646973747269627574652a;    /* "*distribute*" */
const bit<128> NDN_UNSUBSCRIBE_MARKER = 0x2a756e7375627363726962652a; /* "*unsubscribe*" (ours) */
/* packet_out._pad: send the packet through the ingress pipeline (FIB, PIT) as if it had
 * come in on packet_out.egress_port, instead of straight out of that port. */
const bit<7> NDN_OUT_VIA_PIPELINE = 1;

/* Why an NDN packet was dropped: index of MyIngress.drops.ndn_drops. */
#define NDN_DROP_NOT_NDN            1   /* not EtherType 0x8624, or outer type not Interest/Data */
#define NDN_DROP_LENGTH_FORM        2   /* outer TLV length in the 5- or 9-byte form */
#define NDN_DROP_MALFORMED          3   /* Name missing/empty, component overruns the Name, ... */
#define NDN_DROP_NAME_TOO_LONG      4   /* Name TLV value > NDN_MAX_NAME_BYTES */
#define NDN_DROP_NAME_TOO_DEEP      5   /* > NDN_MAX_DEPTH components */
#define NDN_DROP_COMPONENT_TOO_LONG 6   /* component value > NDN_MAX_COMPONENT bytes, or type >= 128 */
#define NDN_DROP_NO_ROUTE           7   /* Interest: no FIB entry */
#define NDN_DROP_UNSOLICITED        8   /* Data: no live PIT entry */
#define NDN_DROP_NO_SUBSCRIBERS     9   /* distribute Data: no persistent PIT entry */
#define NDN_DROP_PORT_RANGE         10  /* Interest from a port > NDN_PIT_PORTS */
#define NDN_DROP_PARSER_ERROR       11  /* truncated packet and other parser errors */
#define NDN_DROP_BAD_MARKER         12  /* insert/distribute name without /PS/train after the marker */
#define NDN_DROP_NOT_UPSTREAM       13  /* distribute Data not from the FIB's face toward /PS (upstream check) */
#define NDN_DROP_DUPLICATE_NONCE    14  /* Interest whose (name, nonce) was seen within its lifetime: a loop or a copy */
#define NDN_DROP_PIT_EXPIRED        15  /* Data whose PIT entry outlived its InterestLifetime (entry freed) */
#define NDN_DROP_SUB_COLLISION      16  /* subscription whose slot holds another live /PS/train */
#define NDN_DROP_SUB_NOT_MEMBER     17  /* guarded: subscription from a host port not a member of the job */
#define NDN_DROP_SUB_UNKNOWN_JOB    18  /* guarded: subscription under a prefix no job holds */
#define NDN_DROP_PIT_BUDGET         19  /* Interest from a limited port past its PIT entries per second */
#define NDN_DROP_DATA_NOT_UPSTREAM  20  /* other Data not from the FIB's face for its name */
#define NDN_DROP_REASON_COUNT       24

/* What the switch did with a packet it did not drop: index of
 * MyIngress.drops.ndn_events (each packet counts once: a drop or one event). */
#define NDN_EV_FORWARDED      1   /* Interest sent on by the FIB */
#define NDN_EV_AGGREGATED     2   /* Interest added to a live PIT entry, not sent on */
#define NDN_EV_PIT_HIT        3   /* Data sent to the PIT entry's ports, entry consumed */
#define NDN_EV_PUNTED         4   /* insert Interest sent to the controller */
#define NDN_EV_DISTRIBUTED    5   /* distribute Data replicated along the persistent PIT */
#define NDN_EV_PACKET_OUT     6   /* packet from the controller sent out */
#define NDN_EV_SUBSCRIBED     7   /* insert Interest recorded in the data-plane persistent PIT, sent on */
#define NDN_EV_UNSUBSCRIBED   8   /* unsubscribe Interest: its port removed (sent on when none is left) */
#define NDN_EV_COUNT          16

header ndn_tl_t {
    bit<8> type;
    bit<8> len;     /* 0xFD: a 16-bit length follows (ndn_len16_t) */
}

header ndn_len16_t {
    bit<16> len;
}

header ndn_byte_t {
    bit<8> b;
}

header ndn_nonce_t {
    bit<8>  type;   /* 0x0A */
    bit<8>  len;    /* 4 */
    bit<32> value;
}

header ndn_u8_t  { bit<8>  v; }
header ndn_u16_t { bit<16> v; }
header ndn_u32_t { bit<32> v; }

struct ndn_headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ndn_tl_t     ndn_packet;    /* Interest or Data */
    ndn_len16_t  ndn_len16;
    ndn_tl_t     ndn_name;
    ndn_byte_t[NDN_MAX_NAME_BYTES] ndn_name_bytes;
    /* Interest fields after the Name (when present in this order) */
    ndn_tl_t     ndn_can_be_prefix;
    ndn_tl_t     ndn_must_be_fresh;
    ndn_nonce_t  ndn_nonce;
    ndn_tl_t     ndn_lifetime;
    ndn_u8_t     ndn_lifetime8;
    ndn_u16_t    ndn_lifetime16;
    ndn_u32_t    ndn_lifetime32;
}

struct ndn_metadata_t {
    bit<8>   parse_drop;   /* NDN_DROP_* found by the parser */
    bit<8>   drop_reason;  /* NDN_DROP_* decided in ingress; 0 = not dropped */
    bit<8>   event;        /* NDN_EV_* of a packet not dropped; 0 = none */
    bit<16>  name_left;    /* Name bytes not yet parsed (bit 15: overrun) */
    bit<16>  rest;         /* Interest bytes after the parsed fields (bit 15: overrun) */
    bit<32>  lifetime_ms;  /* InterestLifetime (0: absent) */
    bit<8>   eat;          /* bytes of the current component value left to extract */
    bit<8>   depth;        /* components parsed */
    bit<8>   cur_t;
    bit<8>   cur_l;
    bit<128> cur_v;
    /* component i: type, length, value right-aligned in 128 bits (zero-padded) */
    bit<8> t0; bit<8> l0; bit<128> c0;
    bit<8> t1; bit<8> l1; bit<128> c1;
    bit<8> t2; bit<8> l2; bit<128> c2;
    bit<8> t3; bit<8> l3; bit<128> c3;
    bit<8> t4; bit<8> l4; bit<128> c4;
    bit<8> t5; bit<8> l5; bit<128> c5;
    /* crc32 of the first k components, k = 1..6 (0 when depth < k) */
    bit<32> h1; bit<32> h2; bit<32> h3; bit<32> h4; bit<32> h5; bit<32> h6;
    bit<32> name_hash;     /* h_depth: the whole name */
    bit<1>  is_interest;
    bit<1>  insert;        /* Interest /<*insert*>/... */
    bit<1>  unsubscribe;   /* Interest /<*unsubscribe*>/... */
    bit<1>  distribute;    /* Data /<*distribute*>/... */
    bit<1>  marked;        /* one of the three: slots and depth now hold the name after the marker */
    bit<1>  ack;           /* distribute Data /PS/train/GPU: a subscription's ack (transient PIT) */
    bit<1>  forward;       /* Interest: send it on along the FIB */
    bit<1>  punt;          /* insert Interest: to the controller (controller-assisted subscriptions) */
    bit<1>  via_controller; /* came back from the controller through the pipeline */
    port_t  in_port;       /* the face it came in on (for via_controller: the punted one's) */
    port_t  next_hop;      /* the FIB's port (0: no route) */
    bit<1>  sub_no_slot;   /* guarded: /PS/train holds no slot here (persistent PIT table only) */
    bit<8>  sub_slot;      /* the persistent PIT slot of /PS/train (ndn_sub_admission.p4) */
}

#endif  /* _GRADNET_NDN_HEADERS_P4_ */
