/* gradnet: token-passing gradient broadcast (token, docs/token.md).
 *
 * Headers, metadata, parser and deparser of the smart NIC (nic.p4) and of the
 * LAN switch (lan.p4). Protocol frames are Ethernet frames with EtherType
 * GRADNET_TOKEN_ETHERTYPE (0x88B5, IEEE "local experimental"); right after the
 * EtherType comes the 32-byte token header, whose next_holder field is the
 * token. GRAD and READ frames carry TOKEN_VALUES int32 fixed-point values.
 */
#ifndef _GRADNET_TOKEN_HEADERS_P4_
#define _GRADNET_TOKEN_HEADERS_P4_

#include "config.p4"
#include "headers.p4"

/* The two ports of a NIC: its host, and the LAN switch. */
const port_t NIC_HOST_PORT = 1;
const port_t NIC_LAN_PORT  = 2;
/* The NIC's multicast group for frames it originates itself (NODE_LOST):
 * to its host and to the LAN. */
const bit<16> NIC_BOTH_PORTS_GROUP = 1;

#include "generated/token_lanes_count.p4"  /* TOKEN_VALUES */
#define TOKEN_MAX_MEMBERS 32     /* sequence numbers 1..31, one bit each in a bitmap */
#define TOKEN_MAX_FRAGS   256    /* 256 x 128 = 32,768 values per gradient */
#define TOKEN_ACC_SLOTS   512    /* two banks (batch parity) of TOKEN_MAX_FRAGS */

/* msg_type: < 0x10 stays between a host and its own NIC; >= 0x10 is broadcast. */
const bit<8> TOKEN_MSG_CONFIG       = 0x01;  /* host -> NIC: own MAC (source), wait unit t (aux, us) */
const bit<8> TOKEN_MSG_READ         = 0x02;  /* host -> NIC: read one fragment of a batch's sums */
const bit<8> TOKEN_MSG_READ_REPLY   = 0x03;  /* NIC -> host */
const bit<8> TOKEN_MSG_TICK         = 0x04;  /* host -> NIC, periodic: evaluate the timeouts */
const bit<8> TOKEN_MSG_RESEND_DUE   = 0x05;  /* NIC -> host: silence after your broadcast, resend it */
const bit<8> TOKEN_MSG_PASS         = 0x06;  /* host -> NIC: done (or passing); the NIC emits the TOKEN */
const bit<8> TOKEN_MSG_FORM_START   = 0x10;  /* opens formation (sender = 1) */
const bit<8> TOKEN_MSG_FORM_REPLY   = 0x11;  /* a node answers (sender = 0) */
const bit<8> TOKEN_MSG_ROSTER       = 0x12;  /* member (seq, mac); flag LAST closes formation */
const bit<8> TOKEN_MSG_MODEL        = 0x20;  /* model parameters, raw payload */
const bit<8> TOKEN_MSG_DATA         = 0x21;  /* training data of member `member`, raw payload */
const bit<8> TOKEN_MSG_DATA_DONE    = 0x22;  /* distribution done: nodes ack, then training */
const bit<8> TOKEN_MSG_DATA_ACK     = 0x23;
const bit<8> TOKEN_MSG_TOKEN        = 0x30;  /* the token names next_holder */
const bit<8> TOKEN_MSG_GRAD         = 0x31;  /* one fragment of the holder's gradient */
const bit<8> TOKEN_MSG_NODE_LOST    = 0x32;  /* member `member` is gone; sender holds the token */
const bit<8> TOKEN_MSG_ABNORMAL     = 0x33;  /* too many departures: stop */
const bit<8> TOKEN_MSG_REJOIN_QUERY = 0x34;  /* after a batch: standby nodes, speak up */
const bit<8> TOKEN_MSG_REJOIN_REPLY = 0x35;  /* a standby (removed) member answers */
const bit<8> TOKEN_MSG_REJOIN       = 0x36;  /* member `member` is active again */
const bit<8> TOKEN_MSG_STOP         = 0x37;  /* training finished */
const bit<8> TOKEN_MSG_NACK         = 0x38;  /* member `member`: re-send fragments [frag, nfrags) of batch */

const bit<8> TOKEN_FLAG_RESEND = 0x01;  /* a re-sent broadcast */
const bit<8> TOKEN_FLAG_LAST   = 0x02;  /* last ROSTER frame / last READ of a batch */
const bit<8> TOKEN_FLAG_PREV   = 0x04;  /* TOKEN: its nfrags are of batch - 1 (batch-opening token) */

/* Member states (member_state register). */
const bit<8> TOKEN_MEMBER_NONE    = 0;
const bit<8> TOKEN_MEMBER_ACTIVE  = 1;
const bit<8> TOKEN_MEMBER_STANDBY = 2;   /* removed: ignored until it rejoins */

/* NIC phases (phase register). */
const bit<8> TOKEN_PHASE_FORMING  = 0;
const bit<8> TOKEN_PHASE_FORMED   = 1;   /* roster closed: non-members ignored */
const bit<8> TOKEN_PHASE_TRAINING = 2;   /* a token was seen: timeouts armed */

header token_t {
    bit<8>  msg_type;
    bit<8>  flags;
    bit<8>  sender;        /* sequence number of the sender (0: not a member yet) */
    bit<8>  next_holder;   /* the token: who may broadcast next */
    bit<32> batch;
    bit<32> pass_no;       /* token passes so far (duplicates of a pass are ignored) */
    bit<32> bitmap;        /* TOKEN: contributors of the batch; READ_REPLY: of the fragment */
    bit<16> frag;
    bit<16> nfrags;
    bit<8>  member;        /* ROSTER, NODE_LOST, REJOIN, DATA: a sequence number */
    bit<8>  count;         /* ROSTER: roster size */
    bit<48> mac;           /* ROSTER: the member's MAC */
    bit<32> aux;           /* CONFIG: wait unit t in us; GRAD: examples covered */
}

/* TOKEN_VALUES two's-complement fixed-point values; sums wrap mod 2^32. */
header token_values_t {
#include "generated/token_lanes_header.p4"
}

struct token_headers_t {
    ethernet_t     ethernet;
    token_t        token;
    token_values_t values;
}

struct token_nic_metadata_t {
    bit<48> my_mac;
    bit<8>  my_seq;
    bit<8>  roster_size;
    bit<8>  phase;
    bit<48> wait_unit;
    bit<48> last_ts;
    bit<8>  last_sender;
    bit<8>  last_holder;
    bit<8>  resend_state;  /* 0 none, 1 host asked to resend, 2 resend seen */
    bit<8>  resend_count;
    bit<8>  resend_limit;  /* re-sends of a pass before the wait for NODE_LOST (CONFIG) */
    bit<32> pass_seen;
    bit<1>  stale_pass;
    bit<48> elapsed;
    bit<48> limit;
    bit<48> distance;
    bit<48> peer_mac;
    bit<8>  peer_state;
    bit<1>  accept;        /* a valid protocol frame: act on it and pass it on */
    bit<1>  handled;       /* dropped or sent somewhere already */
    bit<32> slot;          /* accumulator slot: bank (batch parity) * TOKEN_MAX_FRAGS + frag */
    bit<32> slot_batch;
    bit<32> slot_bitmap;
    bit<32> min_batch;
    bit<32> sender_bit;
    bit<8>  holder;        /* who holds the token in this NIC's view (1 before any TOKEN) */
    bit<32> active_map;    /* bit i: member i active */
    bit<32> cand;          /* next-holder search */
    bit<8>  next_seq;
    bit<8>  lost_member;   /* the tie-break of NODE_LOST: last declared node, and by whom */
    bit<8>  lost_by;
    bit<48> init_mac;      /* who opened formation: the only source of ROSTER frames */
    bit<1>  opener_ok;     /* formation_openers: this source may open formation */
    bit<1>  added;         /* this GRAD added a contribution (not a duplicate) */
    bit<32> rx_batch;      /* repair tracking of one sender's broadcast */
    bit<32> rx_next;
    bit<32> rx_have;
    bit<32> rx_gaps;
    bit<32> asked;
    bit<1>  nack;          /* send a NACK to the LAN (egress rewrites the LAN copy) */
    bit<8>  nack_member;
    bit<16> nack_lo;
    bit<16> nack_hi;
}

struct token_metadata_t {
    token_nic_metadata_t tk;
}

parser TokenParser(packet_in packet,
                   out token_headers_t hdr,
                   inout token_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            GRADNET_TOKEN_ETHERTYPE: parse_token;
            default: accept;
        }
    }

    state parse_token {
        packet.extract(hdr.token);
        /* Only GRAD and READ carry values the NIC works on; MODEL and DATA
         * payloads stay unparsed and pass through as payload. */
        transition select(hdr.token.msg_type) {
            TOKEN_MSG_GRAD: parse_values;
            TOKEN_MSG_READ: parse_values;
            default: accept;
        }
    }

    state parse_values {
        packet.extract(hdr.values);
        transition accept;
    }
}

control TokenVerifyChecksum(inout token_headers_t hdr, inout token_metadata_t meta) {
    apply { }
}

control TokenComputeChecksum(inout token_headers_t hdr, inout token_metadata_t meta) {
    apply { }
}

control TokenDeparser(packet_out packet, in token_headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.token);
        packet.emit(hdr.values);
    }
}

#endif  /* _GRADNET_TOKEN_HEADERS_P4_ */
