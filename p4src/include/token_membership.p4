/* gradnet: the smart NIC's member list and liveness watchdog (token,
 * docs/token.md).
 *
 * Formation: the NIC learns its host's MAC from CONFIG, then the roster
 * (sequence number -> MAC) from ROSTER frames; the LAST one closes formation,
 * after which formation frames are dropped (late nodes stay out) and every
 * frame of the protocol must come from an active member: its `sender` names a
 * sequence number whose recorded MAC is the frame's source MAC.
 *
 * Watchdog: every member broadcast stamps last_ts with the ingress
 * timestamp; TOKEN and NODE_LOST also record who sent it and who holds the
 * token now. A P4 pipeline runs only when a packet arrives, so the host sends
 * TICK frames periodically and the NIC decides on each:
 *   - its host sent the last broadcast and silence lasted > t: the TICK goes
 *     back to the host as RESEND_DUE (the host re-sends it, flag RESEND);
 *   - the token holder is silent: this NIC is d positions after the holder in
 *     the roster (d = 1 for the next node); after the resend it waits d*t, or
 *     (d + roster size)*t when no resend came (the last sender died too), then
 *     turns the TICK into a NODE_LOST broadcast naming the holder, sent to the
 *     LAN and to its own host; the sender of NODE_LOST holds the token.
 */
#ifndef _GRADNET_TOKEN_MEMBERSHIP_P4_
#define _GRADNET_TOKEN_MEMBERSHIP_P4_

#include "token_headers.p4"

/* member_drops indices */
#define TOKEN_DROP_MALFORMED    1   /* parser error (e.g. a short GRAD) */
#define TOKEN_DROP_NON_MEMBER   2   /* sender/MAC not an active member */
#define TOKEN_DROP_CLOSED       3   /* formation frame after formation closed */
#define TOKEN_DROP_LOCAL_ON_LAN 4   /* a host<->NIC message arriving from the LAN */
#define TOKEN_DROP_UNKNOWN      5   /* unknown msg_type */
#define TOKEN_DROP_FORM_SOURCE  6   /* FORM_START / ROSTER not from who opened formation */
#define TOKEN_DROP_HOST_TOKEN   7   /* a TOKEN from the host: the NIC emits tokens (PASS) */
#define TOKEN_DROP_LOST_TIE     8   /* a second NODE_LOST for the same node, from farther after it */
#define TOKEN_DROP_TAGGED       9   /* an 802.1Q/802.1ad-tagged frame (docs/trust.md) */
#define TOKEN_DROP_REASONS      16
/* member_events indices */
#define TOKEN_EV_CONFIG      0
#define TOKEN_EV_ROSTER      1
#define TOKEN_EV_TOKEN       2
#define TOKEN_EV_TICK        3
#define TOKEN_EV_RESEND_DUE  4
#define TOKEN_EV_LOST_SENT   5   /* this NIC declared a node lost */
#define TOKEN_EV_LOST_SEEN   6   /* a NODE_LOST was applied (own or received) */
#define TOKEN_EV_REJOIN      7
#define TOKEN_EV_FORWARDED   8   /* protocol frames passed on */
#define TOKEN_EVENTS        16
/* A single re-send is not enough: on a lossy LAN a lost token and a lost resend would
 * declare a live node lost, so by default the last sender re-sends up to this often, every
 * t/2 after the first (the others' waits, >= t after the last resend they saw, never end
 * meanwhile). CONFIG's `member` field sets another count (1: the method's single re-send);
 * 0 keeps this default. */
#define TOKEN_RESENDS        3

control TokenMembership(inout token_headers_t hdr,
                        inout token_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {

    register<bit<48>>(TOKEN_MAX_MEMBERS) member_mac;
    register<bit<8>>(TOKEN_MAX_MEMBERS)  member_state;
    register<bit<48>>(1) my_mac;
    register<bit<8>>(1)  my_seq;
    register<bit<8>>(1)  roster_size;
    register<bit<8>>(1)  phase;
    register<bit<48>>(1) wait_unit;
    register<bit<48>>(1) last_ts;
    register<bit<8>>(1)  last_sender;
    register<bit<8>>(1)  last_holder;
    register<bit<8>>(1)  resend_state;
    register<bit<8>>(1)  resend_count;  /* RESEND_DUEs asked for the last pass */
    register<bit<8>>(1)  resend_limit;  /* CONFIG's count of re-sends (0: TOKEN_RESENDS) */
    register<bit<32>>(1) pass_seen;     /* highest pass_no of a TOKEN seen */
    register<bit<48>>(1) init_mac;     /* who opened formation (first FORM_START / ROSTER) */
    register<bit<32>>(1) active_map;   /* bit i: member i active (the next-holder search) */
    register<bit<8>>(1)  lost_member;  /* the last node declared lost ... */
    register<bit<8>>(1)  lost_by;      /* ... and who declared it (the tie-break) */
    counter(TOKEN_DROP_REASONS, CounterType.packets) member_drops;
    counter(TOKEN_EVENTS, CounterType.packets) member_events;

    action drop_frame(bit<32> reason) {
        mark_to_drop(standard_metadata);
        member_drops.count(reason);
        meta.tk.handled = 1;
    }

    action load_state() {
        my_mac.read(meta.tk.my_mac, 0);
        my_seq.read(meta.tk.my_seq, 0);
        roster_size.read(meta.tk.roster_size, 0);
        phase.read(meta.tk.phase, 0);
        wait_unit.read(meta.tk.wait_unit, 0);
        last_ts.read(meta.tk.last_ts, 0);
        last_sender.read(meta.tk.last_sender, 0);
        last_holder.read(meta.tk.last_holder, 0);
        resend_state.read(meta.tk.resend_state, 0);
        resend_count.read(meta.tk.resend_count, 0);
        resend_limit.read(meta.tk.resend_limit, 0);
        if (meta.tk.resend_limit == 0) {
            meta.tk.resend_limit = TOKEN_RESENDS;
        }
        pass_seen.read(meta.tk.pass_seen, 0);
        init_mac.read(meta.tk.init_mac, 0);
        active_map.read(meta.tk.active_map, 0);
        /* before any TOKEN, node 1 holds it */
        meta.tk.holder = meta.tk.last_holder;
        if (meta.tk.last_holder == 0) {
            meta.tk.holder = 1;
        }
    }

    action configure() {
        my_mac.write(0, hdr.ethernet.src_addr);
        wait_unit.write(0, (bit<48>)hdr.token.aux);
        resend_limit.write(0, hdr.token.member);
        mark_to_drop(standard_metadata);
        meta.tk.handled = 1;
        member_events.count(TOKEN_EV_CONFIG);
    }

    /* Who may open formation. Until the controller installs the job's initiator
     * (and sets the default to not_opener), anyone may: the first FORM_START or
     * ROSTER then names the opener (init_mac, trust on first use). */
    action opener() { meta.tk.opener_ok = 1; }
    action any_opener() { meta.tk.opener_ok = 1; }
    action not_opener() { meta.tk.opener_ok = 0; }

    table formation_openers {
        key = { hdr.ethernet.src_addr: exact; }
        actions = { opener; any_opener; not_opener; }
        default_action = any_opener();
        size = 8;
    }

    action load_peer(bit<8> seq) {
        member_mac.read(meta.tk.peer_mac, (bit<32>)seq);
        member_state.read(meta.tk.peer_state, (bit<32>)seq);
    }

    /* The TICK goes back to the host: resend your last broadcast. */
    action ask_resend() {
        hdr.token.msg_type = TOKEN_MSG_RESEND_DUE;
        standard_metadata.egress_spec = NIC_HOST_PORT;
        resend_state.write(0, 1);
        resend_count.write(0, meta.tk.resend_count + 1);
        meta.tk.handled = 1;
        member_events.count(TOKEN_EV_RESEND_DUE);
    }

    /* The TICK becomes this NIC's NODE_LOST broadcast (to the LAN and the host). */
    action declare_lost() {
        hdr.ethernet.dst_addr = 0xFFFFFFFFFFFF;
        hdr.ethernet.src_addr = meta.tk.my_mac;
        hdr.token.msg_type = TOKEN_MSG_NODE_LOST;
        hdr.token.flags = 0;
        hdr.token.sender = meta.tk.my_seq;
        hdr.token.member = meta.tk.last_holder;
        hdr.token.next_holder = meta.tk.my_seq;
        hdr.token.aux = (bit<32>)meta.tk.elapsed;   /* measured silence, us */
        member_state.write((bit<32>)meta.tk.last_holder, TOKEN_MEMBER_STANDBY);
        active_map.write(0, meta.tk.active_map & ~((bit<32>)1 << meta.tk.last_holder));
        lost_member.write(0, meta.tk.last_holder);
        lost_by.write(0, meta.tk.my_seq);
        last_ts.write(0, standard_metadata.ingress_global_timestamp);
        last_sender.write(0, meta.tk.my_seq);
        last_holder.write(0, meta.tk.my_seq);
        resend_state.write(0, 0);
        resend_count.write(0, 0);
        standard_metadata.mcast_grp = NIC_BOTH_PORTS_GROUP;
        meta.tk.handled = 1;
        member_events.count(TOKEN_EV_LOST_SENT);
        member_events.count(TOKEN_EV_LOST_SEEN);
    }

    action consume_tick() {
        mark_to_drop(standard_metadata);
        meta.tk.handled = 1;
    }

    action record_roster() {
        member_mac.write((bit<32>)hdr.token.member, hdr.token.mac);
        member_state.write((bit<32>)hdr.token.member, TOKEN_MEMBER_ACTIVE);
        active_map.write(0, meta.tk.active_map | ((bit<32>)1 << hdr.token.member));
        member_events.count(TOKEN_EV_ROSTER);
    }

    /* the host is done (or passes); the NIC names the next active member
     * (meta.tk.next_seq, from active_map) and broadcasts the TOKEN, to the LAN and
     * back to its host (which takes it again when it is alone). */
    action emit_token() {
        hdr.ethernet.dst_addr = 0xFFFFFFFFFFFF;
        hdr.ethernet.src_addr = meta.tk.my_mac;
        hdr.token.msg_type = TOKEN_MSG_TOKEN;
        hdr.token.sender = meta.tk.my_seq;
        hdr.token.next_holder = meta.tk.next_seq;
        standard_metadata.mcast_grp = NIC_BOTH_PORTS_GROUP;
        meta.tk.handled = 1;
        meta.tk.accept = 1;
    }

    action record_pass() {
        last_sender.write(0, hdr.token.sender);
        last_holder.write(0, hdr.token.next_holder);
    }

    apply {
        /* A tagged frame is never parsed as the protocol, yet Linux strips a
         * VLAN tag before it hands frames to the host's AF_PACKET socket for
         * 0x88B5 (any VID): bridged, it would reach the host unchecked. No
         * node sends tags, so the NIC drops every tagged frame, both ways. */
        if (hdr.ethernet.ether_type == ETHERTYPE_VLAN_CTAG
                || hdr.ethernet.ether_type == ETHERTYPE_VLAN_STAG
                || hdr.ethernet.ether_type == ETHERTYPE_VLAN_QINQ) {
            drop_frame(TOKEN_DROP_TAGGED);
        } else if (hdr.ethernet.ether_type == GRADNET_TOKEN_ETHERTYPE) {
            if (standard_metadata.parser_error != error.NoError || !hdr.token.isValid()) {
                drop_frame(TOKEN_DROP_MALFORMED);
            }
        }
        if (hdr.token.isValid() && meta.tk.handled == 0) {
            load_state();
            formation_openers.apply();
            if (standard_metadata.ingress_port == NIC_HOST_PORT) {
                /* Host side: local messages, or the host's own broadcasts. */
                if (hdr.token.msg_type == TOKEN_MSG_CONFIG) {
                    configure();
                } else if (hdr.token.msg_type == TOKEN_MSG_TICK) {
                    member_events.count(TOKEN_EV_TICK);
                    meta.tk.elapsed = standard_metadata.ingress_global_timestamp - meta.tk.last_ts;
                    if (meta.tk.phase != TOKEN_PHASE_TRAINING || meta.tk.my_seq == 0) {
                        consume_tick();
                    } else if (meta.tk.last_sender == meta.tk.my_seq
                               && meta.tk.last_holder != meta.tk.my_seq
                               && ((meta.tk.resend_state == 0 && meta.tk.elapsed > meta.tk.wait_unit)
                                   || (meta.tk.resend_state == 2 && meta.tk.resend_count < meta.tk.resend_limit
                                       && meta.tk.elapsed > (meta.tk.wait_unit >> 1)))) {
                        ask_resend();
                    } else if (meta.tk.last_holder != meta.tk.my_seq && meta.tk.last_holder != 0) {
                        /* d: positions from the silent holder to this node */
                        if (meta.tk.my_seq > meta.tk.last_holder) {
                            meta.tk.distance = (bit<48>)(meta.tk.my_seq - meta.tk.last_holder);
                        } else {
                            meta.tk.distance = (bit<48>)(meta.tk.my_seq + meta.tk.roster_size
                                                         - meta.tk.last_holder);
                        }
                        if (meta.tk.resend_state != 2) {
                            meta.tk.distance = meta.tk.distance + (bit<48>)meta.tk.roster_size;
                        }
                        meta.tk.limit = meta.tk.distance * meta.tk.wait_unit;
                        if (meta.tk.elapsed > meta.tk.limit) {
                            declare_lost();
                        } else {
                            consume_tick();
                        }
                    } else {
                        consume_tick();
                    }
                } else if (hdr.token.msg_type == TOKEN_MSG_READ) {
                    meta.tk.accept = 1;
                } else if (hdr.token.msg_type == TOKEN_MSG_PASS) {
                    if (meta.tk.phase == TOKEN_PHASE_FORMING || meta.tk.my_seq == 0) {
                        drop_frame(TOKEN_DROP_UNKNOWN);
                    } else {
                        /* the next active member after me, cyclically: lowest set bit
                         * of the active members above me, else of all of them */
                        meta.tk.cand = meta.tk.active_map & ~((32w2 << meta.tk.my_seq) - 1);
                        if (meta.tk.cand == 0) {
                            meta.tk.cand = meta.tk.active_map;
                        }
                        meta.tk.cand = meta.tk.cand & (32w0 - meta.tk.cand);
                        meta.tk.next_seq = 0;
                        if ((meta.tk.cand & 0xFFFF0000) != 0) { meta.tk.next_seq = meta.tk.next_seq + 16; }
                        if ((meta.tk.cand & 0xFF00FF00) != 0) { meta.tk.next_seq = meta.tk.next_seq + 8; }
                        if ((meta.tk.cand & 0xF0F0F0F0) != 0) { meta.tk.next_seq = meta.tk.next_seq + 4; }
                        if ((meta.tk.cand & 0xCCCCCCCC) != 0) { meta.tk.next_seq = meta.tk.next_seq + 2; }
                        if ((meta.tk.cand & 0xAAAAAAAA) != 0) { meta.tk.next_seq = meta.tk.next_seq + 1; }
                        if (meta.tk.cand == 0) {
                            meta.tk.next_seq = meta.tk.my_seq;
                        }
                        emit_token();
                    }
                } else if (hdr.token.msg_type == TOKEN_MSG_TOKEN) {
                    drop_frame(TOKEN_DROP_HOST_TOKEN);
                } else if ((hdr.token.msg_type == TOKEN_MSG_FORM_START
                            || hdr.token.msg_type == TOKEN_MSG_ROSTER)
                           && (meta.tk.opener_ok == 0
                               || (meta.tk.init_mac != 0 && meta.tk.init_mac != hdr.ethernet.src_addr))) {
                    drop_frame(TOKEN_DROP_FORM_SOURCE);
                } else if (hdr.token.msg_type >= TOKEN_MSG_FORM_START) {
                    meta.tk.accept = 1;
                } else {
                    drop_frame(TOKEN_DROP_UNKNOWN);
                }
            } else {
                /* LAN side: only broadcasts, and during training only members'. */
                if (hdr.token.msg_type < TOKEN_MSG_FORM_START) {
                    drop_frame(TOKEN_DROP_LOCAL_ON_LAN);
                } else if (hdr.token.msg_type == TOKEN_MSG_FORM_START
                           || hdr.token.msg_type == TOKEN_MSG_FORM_REPLY) {
                    if (meta.tk.phase != TOKEN_PHASE_FORMING) {
                        drop_frame(TOKEN_DROP_CLOSED);
                    } else if (hdr.token.msg_type == TOKEN_MSG_FORM_START
                               && (meta.tk.opener_ok == 0
                                   || (meta.tk.init_mac != 0 && meta.tk.init_mac != hdr.ethernet.src_addr))) {
                        drop_frame(TOKEN_DROP_FORM_SOURCE);
                    } else {
                        meta.tk.accept = 1;
                    }
                } else if (hdr.token.msg_type == TOKEN_MSG_ROSTER) {
                    /* only who opened formation may send the roster (a forged ROSTER
                     * LAST would close formation everywhere); repeats fill lost entries
                     * until the first TOKEN */
                    if (meta.tk.phase == TOKEN_PHASE_TRAINING) {
                        drop_frame(TOKEN_DROP_CLOSED);
                    } else if (meta.tk.opener_ok == 0
                               || (meta.tk.init_mac != 0 && meta.tk.init_mac != hdr.ethernet.src_addr)) {
                        drop_frame(TOKEN_DROP_FORM_SOURCE);
                    } else {
                        meta.tk.accept = 1;
                    }
                } else if (hdr.token.msg_type > TOKEN_MSG_NACK) {
                    drop_frame(TOKEN_DROP_UNKNOWN);
                } else if (hdr.token.sender == 0 || hdr.token.sender >= TOKEN_MAX_MEMBERS) {
                    drop_frame(TOKEN_DROP_NON_MEMBER);
                } else {
                    load_peer(hdr.token.sender);
                    if (meta.tk.peer_mac != hdr.ethernet.src_addr) {
                        drop_frame(TOKEN_DROP_NON_MEMBER);
                    } else if (meta.tk.peer_state == TOKEN_MEMBER_ACTIVE) {
                        meta.tk.accept = 1;
                        if (hdr.token.msg_type == TOKEN_MSG_NODE_LOST && hdr.token.member != 0
                                && hdr.token.member < TOKEN_MAX_MEMBERS) {
                            /* Tie-break: two NICs declared the same node lost (a stalled
                             * host's ticks). The declarer nearest after it in the roster
                             * wins, whatever the arrival order, on every NIC alike. */
                            lost_member.read(meta.tk.lost_member, 0);
                            lost_by.read(meta.tk.lost_by, 0);
                            if (meta.tk.lost_member == hdr.token.member && meta.tk.lost_by != 0) {
                                if (hdr.token.sender > hdr.token.member) {
                                    meta.tk.distance = (bit<48>)(hdr.token.sender - hdr.token.member);
                                } else {
                                    meta.tk.distance = (bit<48>)(hdr.token.sender + meta.tk.roster_size
                                                                 - hdr.token.member);
                                }
                                if (meta.tk.lost_by > hdr.token.member) {
                                    meta.tk.limit = (bit<48>)(meta.tk.lost_by - hdr.token.member);
                                } else {
                                    meta.tk.limit = (bit<48>)(meta.tk.lost_by + meta.tk.roster_size
                                                              - hdr.token.member);
                                }
                                if (meta.tk.distance >= meta.tk.limit) {
                                    meta.tk.accept = 0;
                                    drop_frame(TOKEN_DROP_LOST_TIE);
                                }
                            }
                        }
                    } else if (meta.tk.peer_state == TOKEN_MEMBER_STANDBY
                               && hdr.token.msg_type == TOKEN_MSG_REJOIN_REPLY) {
                        meta.tk.accept = 1;
                    } else {
                        drop_frame(TOKEN_DROP_NON_MEMBER);
                    }
                }
            }

            /* Effects of an accepted broadcast, own or received. */
            if (meta.tk.accept == 1 && hdr.token.msg_type >= TOKEN_MSG_FORM_START) {
                member_events.count(TOKEN_EV_FORWARDED);
                if ((hdr.token.msg_type == TOKEN_MSG_FORM_START || hdr.token.msg_type == TOKEN_MSG_ROSTER)
                        && meta.tk.init_mac == 0) {
                    init_mac.write(0, hdr.ethernet.src_addr);   /* first come: the initiator */
                }
                if (hdr.token.msg_type == TOKEN_MSG_ROSTER && hdr.token.member != 0
                        && hdr.token.member < TOKEN_MAX_MEMBERS) {
                    if (meta.tk.phase != TOKEN_PHASE_TRAINING) {
                        record_roster();
                        if (hdr.token.mac == meta.tk.my_mac) {
                            my_seq.write(0, hdr.token.member);
                        }
                        if ((hdr.token.flags & TOKEN_FLAG_LAST) != 0) {
                            roster_size.write(0, hdr.token.count);
                            phase.write(0, TOKEN_PHASE_FORMED);
                        }
                    }
                } else if (hdr.token.msg_type == TOKEN_MSG_TOKEN) {
                    member_events.count(TOKEN_EV_TOKEN);
                    phase.write(0, TOKEN_PHASE_TRAINING);
                    if (hdr.token.pass_no < meta.tk.pass_seen) {
                        /* a resend of a pass this NIC saw superseded (its sender missed
                         * the later one): not the token's state any more; the host
                         * ignores it too */
                        meta.tk.stale_pass = 1;
                    } else {
                        pass_seen.write(0, hdr.token.pass_no);
                        record_pass();
                        if ((hdr.token.flags & TOKEN_FLAG_RESEND) != 0) {
                            resend_state.write(0, 2);
                        } else {
                            resend_state.write(0, 0);
                            resend_count.write(0, 0);
                        }
                    }
                } else if (hdr.token.msg_type == TOKEN_MSG_NODE_LOST
                           && hdr.token.member < TOKEN_MAX_MEMBERS) {
                    member_events.count(TOKEN_EV_LOST_SEEN);
                    member_state.write((bit<32>)hdr.token.member, TOKEN_MEMBER_STANDBY);
                    active_map.write(0, meta.tk.active_map & ~((bit<32>)1 << hdr.token.member));
                    lost_member.write(0, hdr.token.member);
                    lost_by.write(0, hdr.token.sender);
                    record_pass();
                    resend_state.write(0, 0);
                    resend_count.write(0, 0);
                } else if (hdr.token.msg_type == TOKEN_MSG_REJOIN
                           && hdr.token.member < TOKEN_MAX_MEMBERS) {
                    member_events.count(TOKEN_EV_REJOIN);
                    member_state.write((bit<32>)hdr.token.member, TOKEN_MEMBER_ACTIVE);
                    active_map.write(0, meta.tk.active_map | ((bit<32>)1 << hdr.token.member));
                    lost_member.write(0, 0);   /* a later loss of it is a new declaration */
                }
                /* the silence the watchdog measures is the token's: the holder's frames
                 * and the token moving; others' repair chatter (NACKs, re-sent GRADs,
                 * read-out) must not hide a silent holder */
                if ((hdr.token.msg_type == TOKEN_MSG_TOKEN && meta.tk.stale_pass == 0)
                        || hdr.token.msg_type == TOKEN_MSG_NODE_LOST
                        || (hdr.token.sender == meta.tk.holder && hdr.token.msg_type != TOKEN_MSG_NACK
                            && (hdr.token.flags & TOKEN_FLAG_RESEND) == 0)) {
                    last_ts.write(0, standard_metadata.ingress_global_timestamp);
                }
            }
        }
    }
}

#endif  /* _GRADNET_TOKEN_MEMBERSHIP_P4_ */
