/* gradnet: the smart NIC's gradient accumulator (token, docs/token.md).
 *
 * GRAD frames carry TOKEN_VALUES int32 fixed-point values (scale 2^S chosen by
 * the hosts, docs/token.md) of fragment `frag` of the sender's gradient for
 * batch `batch`. Slot = (batch & 1) * TOKEN_MAX_FRAGS + frag: two banks, so
 * the next batch's gradients can arrive while the host still reads this one.
 * A slot remembers its batch and the bitmap of contributors (bit = sender's
 * sequence number): a slot holding another batch is overwritten, a
 * contributor already in is not added again (a resend), a batch outside
 * [min_batch, min_batch + 1] is dropped as stale. Gradients from the LAN are
 * consumed; the host's own GRADs are added too (its sum includes itself) and
 * go on to the LAN.
 *
 * Read-out (works on BMv2, whose P4Runtime server cannot read registers): the
 * host sends READ(batch, frag); the NIC answers READ_REPLY with the slot's
 * sums and contributor bitmap (zeros if the slot holds another batch). READ
 * with flag LAST sets min_batch = batch + 1.
 *
 * Overflow: the adds wrap mod 2^32. Hosts quantize so that the sum of all
 * members cannot exceed int32 (wire/fixedpoint.py refuses otherwise).
 */
#ifndef _GRADNET_TOKEN_ACCUMULATOR_P4_
#define _GRADNET_TOKEN_ACCUMULATOR_P4_

#include "token_headers.p4"

/* acc_drops indices */
#define TOKEN_ACC_DROP_STALE     1
#define TOKEN_ACC_DROP_DUPLICATE 2
#define TOKEN_ACC_DROP_BAD_FRAG  3
#define TOKEN_ACC_DROP_NOT_HOLDER 4  /* a GRAD from a member that does not hold the token */
#define TOKEN_ACC_DROP_UNASKED   5   /* a re-sent GRAD nobody asked for (no NACK seen) */
#define TOKEN_ACC_DROP_REASONS   8
/* acc_events indices */
#define TOKEN_ACC_EV_ADDED     0   /* a contribution added to a slot */
#define TOKEN_ACC_EV_STARTED   1   /* first contribution of a slot (of its batch) */
#define TOKEN_ACC_EV_READ      2
#define TOKEN_ACC_EV_OWN       3   /* the host's own GRAD added */
#define TOKEN_ACC_EV_NACK_GAP  4   /* NACK sent: a gap in a broadcast's fragments */
#define TOKEN_ACC_EV_NACK_TAIL 5   /* NACK sent: the sender's TOKEN said more fragments */
#define TOKEN_ACC_EV_REPAIRED  6   /* a re-sent GRAD filled a missing contribution */
#define TOKEN_ACC_EV_NACK_SEEN 7   /* a NACK recorded (own host's, own NIC's or another's) */
#define TOKEN_ACC_EVENTS       8

control TokenAccumulator(inout token_headers_t hdr,
                         inout token_metadata_t meta,
                         inout standard_metadata_t standard_metadata) {

    register<bit<32>>(TOKEN_ACC_SLOTS) acc_batch;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_bitmap;
    register<bit<32>>(1) min_batch;
    /* Repair (loss recovery), per sender: the batch of its broadcast this NIC tracks,
     * the next fragment expected, how many of its fragments were added, and
     * batch + 1 of the last NACK naming it (re-sent GRADs are accepted only then). */
    register<bit<32>>(TOKEN_MAX_MEMBERS) rx_batch;
    register<bit<32>>(TOKEN_MAX_MEMBERS) rx_next;
    register<bit<32>>(TOKEN_MAX_MEMBERS) rx_have;
    register<bit<32>>(TOKEN_MAX_MEMBERS) rx_gaps;   /* fragments already NACKed for a gap */
    register<bit<32>>(TOKEN_MAX_MEMBERS) asked;
#include "generated/token_lanes_registers.p4"
    counter(TOKEN_ACC_DROP_REASONS, CounterType.packets) acc_drops;
    counter(TOKEN_ACC_EVENTS, CounterType.packets) acc_events;

    bit<32> v;

    action drop_frame(bit<32> reason) {
        mark_to_drop(standard_metadata);
        acc_drops.count(reason);
        meta.tk.handled = 1;
    }

    action locate() {
        meta.tk.slot = (bit<32>)(hdr.token.batch & 1) * TOKEN_MAX_FRAGS + (bit<32>)hdr.token.frag;
        acc_batch.read(meta.tk.slot_batch, meta.tk.slot);
        acc_bitmap.read(meta.tk.slot_bitmap, meta.tk.slot);
        min_batch.read(meta.tk.min_batch, 0);
        meta.tk.sender_bit = (bit<32>)1 << hdr.token.sender;
    }

    /* The slot's first contribution of this batch: overwrite. */
    action start_slot() {
#include "generated/token_lanes_start.p4"
        acc_batch.write(meta.tk.slot, hdr.token.batch);
        acc_bitmap.write(meta.tk.slot, meta.tk.sender_bit);
        acc_events.count(TOKEN_ACC_EV_STARTED);
        acc_events.count(TOKEN_ACC_EV_ADDED);
    }

    /* Add the frame's values; the frame itself keeps its own values. */
    action add_to_slot() {
#include "generated/token_lanes_add.p4"
        acc_bitmap.write(meta.tk.slot, meta.tk.slot_bitmap | meta.tk.sender_bit);
        acc_events.count(TOKEN_ACC_EV_ADDED);
    }

    action read_slot() {
#include "generated/token_lanes_read.p4"
        hdr.token.bitmap = meta.tk.slot_bitmap;
    }

    action empty_reply() {
#include "generated/token_lanes_zero.p4"
        hdr.token.bitmap = 0;
    }

    action reply() {
        hdr.token.msg_type = TOKEN_MSG_READ_REPLY;
        standard_metadata.egress_spec = NIC_HOST_PORT;
        meta.tk.handled = 1;
        acc_events.count(TOKEN_ACC_EV_READ);
    }

    action consume() {
        mark_to_drop(standard_metadata);
        meta.tk.handled = 1;
    }

    action load_rx(bit<8> s) {
        rx_batch.read(meta.tk.rx_batch, (bit<32>)s);
        rx_next.read(meta.tk.rx_next, (bit<32>)s);
        rx_have.read(meta.tk.rx_have, (bit<32>)s);
        rx_gaps.read(meta.tk.rx_gaps, (bit<32>)s);
    }

    action store_rx(bit<8> s) {
        rx_batch.write((bit<32>)s, meta.tk.rx_batch);
        rx_next.write((bit<32>)s, meta.tk.rx_next);
        rx_have.write((bit<32>)s, meta.tk.rx_have);
        rx_gaps.write((bit<32>)s, meta.tk.rx_gaps);
    }

    /* A GRAD revealed a gap: after adding it, the frame itself becomes this NIC's
     * NACK to the LAN (member = the broadcaster, fragments [frag, nfrags)). */
    action nack_from_grad() {
        hdr.values.setInvalid();
        hdr.ethernet.dst_addr = 0xFFFFFFFFFFFF;
        hdr.ethernet.src_addr = meta.tk.my_mac;
        hdr.token.msg_type = TOKEN_MSG_NACK;
        hdr.token.flags = 0;
        hdr.token.member = meta.tk.nack_member;
        hdr.token.sender = meta.tk.my_seq;
        hdr.token.next_holder = 0;
        hdr.token.frag = meta.tk.nack_lo;
        hdr.token.nfrags = meta.tk.nack_hi;
        hdr.token.pass_no = 0;
        hdr.token.bitmap = 0;
        hdr.token.aux = 0;
        asked.write((bit<32>)meta.tk.nack_member, hdr.token.batch + 1);
        standard_metadata.egress_spec = NIC_LAN_PORT;
        meta.tk.handled = 1;
        acc_events.count(TOKEN_ACC_EV_NACK_GAP);
    }

    apply {
        if (meta.tk.accept == 1 && hdr.values.isValid() && meta.tk.handled == 0) {
            if (hdr.token.frag >= TOKEN_MAX_FRAGS || hdr.token.sender >= TOKEN_MAX_MEMBERS) {
                drop_frame(TOKEN_ACC_DROP_BAD_FRAG);
            } else if (hdr.token.msg_type == TOKEN_MSG_GRAD) {
                asked.read(meta.tk.asked, (bit<32>)hdr.token.sender);
                locate();
                if ((hdr.token.flags & TOKEN_FLAG_RESEND) == 0 && hdr.token.sender != meta.tk.holder) {
                    /* only the token holder broadcasts */
                    drop_frame(TOKEN_ACC_DROP_NOT_HOLDER);
                } else if ((hdr.token.flags & TOKEN_FLAG_RESEND) != 0
                           && standard_metadata.ingress_port == NIC_LAN_PORT
                           && meta.tk.asked != hdr.token.batch + 1) {
                    drop_frame(TOKEN_ACC_DROP_UNASKED);
                } else if (hdr.token.batch < meta.tk.min_batch
                        || hdr.token.batch > meta.tk.min_batch + 1) {
                    if (standard_metadata.ingress_port == NIC_HOST_PORT
                            && (hdr.token.flags & TOKEN_FLAG_RESEND) != 0) {
                        /* the host re-sends for a node still repairing a batch this
                         * NIC finished: pass it on, add nothing */
                        acc_drops.count(TOKEN_ACC_DROP_STALE);
                    } else {
                        drop_frame(TOKEN_ACC_DROP_STALE);
                    }
                } else {
                    meta.tk.added = 1;
                    if (meta.tk.slot_batch != hdr.token.batch || meta.tk.slot_bitmap == 0) {
                        start_slot();
                    } else if ((meta.tk.slot_bitmap & meta.tk.sender_bit) == 0) {
                        add_to_slot();
                    } else {
                        meta.tk.added = 0;
                        acc_drops.count(TOKEN_ACC_DROP_DUPLICATE);
                    }
                    if (standard_metadata.ingress_port == NIC_HOST_PORT) {
                        acc_events.count(TOKEN_ACC_EV_OWN);
                    } else {
                        /* loss recovery: a fragment beyond the next expected one
                         * means the ones between were lost on the way here */
                        load_rx(hdr.token.sender);
                        if ((hdr.token.flags & TOKEN_FLAG_RESEND) == 0) {
                            if (meta.tk.rx_batch != hdr.token.batch) {
                                meta.tk.rx_batch = hdr.token.batch;
                                meta.tk.rx_next = 0;
                                meta.tk.rx_have = 0;
                                meta.tk.rx_gaps = 0;
                            }
                            if ((bit<32>)hdr.token.frag > meta.tk.rx_next) {
                                meta.tk.nack = 1;
                                meta.tk.nack_member = hdr.token.sender;
                                meta.tk.nack_lo = (bit<16>)meta.tk.rx_next;
                                meta.tk.nack_hi = hdr.token.frag;
                                meta.tk.rx_gaps = meta.tk.rx_gaps + ((bit<32>)hdr.token.frag - meta.tk.rx_next);
                            }
                            if ((bit<32>)hdr.token.frag + 1 > meta.tk.rx_next) {
                                meta.tk.rx_next = (bit<32>)hdr.token.frag + 1;
                            }
                        }
                        if (meta.tk.added == 1 && meta.tk.rx_batch == hdr.token.batch) {
                            meta.tk.rx_have = meta.tk.rx_have + 1;
                        }
                        if (meta.tk.added == 1 && (hdr.token.flags & TOKEN_FLAG_RESEND) != 0) {
                            acc_events.count(TOKEN_ACC_EV_REPAIRED);
                        }
                        store_rx(hdr.token.sender);
                        if (meta.tk.nack == 1) {
                            nack_from_grad();
                        } else {
                            consume();
                        }
                    }
                }
            } else if (hdr.token.msg_type == TOKEN_MSG_READ) {
                locate();
                if (meta.tk.slot_batch == hdr.token.batch && meta.tk.slot_bitmap != 0) {
                    read_slot();
                } else {
                    empty_reply();
                }
                if ((hdr.token.flags & TOKEN_FLAG_LAST) != 0
                        && hdr.token.batch + 1 > meta.tk.min_batch) {
                    min_batch.write(0, hdr.token.batch + 1);
                }
                reply();
            }
        } else if (meta.tk.accept == 1 && meta.tk.handled == 0 && hdr.token.sender < TOKEN_MAX_MEMBERS
                   && (hdr.token.msg_type == TOKEN_MSG_TOKEN || hdr.token.msg_type == TOKEN_MSG_STOP)
                   && hdr.token.nfrags != 0
                   && standard_metadata.ingress_port == NIC_LAN_PORT) {
            /* loss recovery, the tail: the TOKEN (or the STOP after the last batch) says
             * how many fragments its sender broadcast (nfrags; of batch - 1 with flag
             * PREV, a batch-opening token);
             * fewer added here -> NACK them. The TOKEN goes to the host, a copy to the
             * LAN, which MyEgress turns into the NACK. */
            meta.tk.rx_batch = hdr.token.batch;
            if ((hdr.token.flags & TOKEN_FLAG_PREV) != 0) {
                meta.tk.rx_batch = hdr.token.batch - 1;
            }
            meta.tk.asked = meta.tk.rx_batch;   /* the batch the fragments belong to */
            load_rx(hdr.token.sender);
            if (meta.tk.rx_batch != meta.tk.asked) {
                meta.tk.nack = 1;
                meta.tk.nack_lo = 0;
            } else if (meta.tk.rx_have < (bit<32>)hdr.token.nfrags) {
                if (meta.tk.rx_next <= meta.tk.rx_have + meta.tk.rx_gaps) {
                    /* every hole below rx_next is NACKed already (its re-sends may be on
                     * the way): ask for the tail only, if any */
                    if (meta.tk.rx_next < (bit<32>)hdr.token.nfrags) {
                        meta.tk.nack = 1;
                        meta.tk.nack_lo = (bit<16>)meta.tk.rx_next;
                    }
                } else {
                    meta.tk.nack = 1;
                    meta.tk.nack_lo = 0;
                }
            }
            if (meta.tk.nack == 1) {
                meta.tk.nack_hi = hdr.token.nfrags;
                meta.tk.nack_member = hdr.token.sender;
                meta.tk.rx_batch = meta.tk.asked;        /* NACK's batch, for MyEgress */
                asked.write((bit<32>)hdr.token.sender, meta.tk.asked + 1);
                standard_metadata.mcast_grp = NIC_BOTH_PORTS_GROUP;
                meta.tk.handled = 1;
                acc_events.count(TOKEN_ACC_EV_NACK_TAIL);
            }
        } else if (meta.tk.accept == 1 && meta.tk.handled == 0 && hdr.token.msg_type == TOKEN_MSG_NACK
                   && hdr.token.member < TOKEN_MAX_MEMBERS) {
            /* any NACK (own host's, or another NIC's) opens the named sender's
             * re-sends of that batch here too; a NACK for another member stops here */
            asked.write((bit<32>)hdr.token.member, hdr.token.batch + 1);
            acc_events.count(TOKEN_ACC_EV_NACK_SEEN);
            if (standard_metadata.ingress_port == NIC_LAN_PORT && hdr.token.member != meta.tk.my_seq) {
                consume();
            }
        }
    }
}

#endif  /* _GRADNET_TOKEN_ACCUMULATOR_P4_ */
