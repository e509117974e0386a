/* gradnet: register-based gradient aggregators (ina, docs/ina.md).
 *
 * A switch whose device id equals a GRAD packet's tag hashes (job, fragment,
 * origin) to an aggregator. A free aggregator, or one holding this fragment,
 * takes the packet's values unless its contributor is already in; when the
 * expected contributions (fanin) are in, the running sums leave as a PARTIAL
 * toward the PS, and the aggregator keeps them until the PS frees it (RESULT
 * on s_d, CLEAR elsewhere). A busy aggregator passes the packet on
 * unaggregated to s_d, the PS's ToR switch, which aggregates it under the
 * sender's origin; s_d itself passes such packets to the PS.
 *
 * The index: crc32(job, fragment, origin) mod NUM_AGGREGATORS by default, or, once
 * the controller fills ina_ring, consistent hashing: crc16 of the same fields gives
 * the fragment's point on a ring of INA_RING_POSITIONS positions, and the entry of
 * that position names the aggregator that owns it (the first aggregator point
 * clockwise, computed by the controller). Changing how many aggregators the ring uses
 * then moves only the positions the added or removed aggregator owns (about 1/N),
 * where modulo N moves almost every fragment. Either way an aggregator is used by a
 * fragment only if it is free or holds that very (origin, job, fragment) key.
 *
 * Loss recovery (docs/ina.md, "Loss recovery"): a NACK tagged with this switch
 * is the PS's flush: the aggregator holding the fragment answers with a PARTIAL
 * of what it has, complete or not (a lost PARTIAL is sent again; an incomplete
 * one tells the PS exactly whose GRAD is missing); a RESULT passing a switch it
 * is not tagged for frees that switch's aggregator of the fragment, so a lost
 * CLEAR costs nothing where the RESULT's tree passes.
 *
 * Aging: an aggregator whose last contribution is older than the timeout
 * (ina_aging, switch timestamps in microseconds) is taken over by the next GRAD
 * of another fragment that hashes to it, its old contents dropped: an abandoned
 * or forged fragment cannot hold it for good. A GRAD of the aggregator's own key
 * takes it over only past 4x the timeout (INA_SAME_KEY_AGING_SHIFT): within
 * that, it is a rank lagging its round, and adds to it. v1model has no timers, so the check is
 * lazy. Dropping a partial sum never loses a contribution: its workers get no
 * RESULT through it and resend to the PS, which counts each worker once.
 */
#ifndef _GRADNET_AGGREGATOR_P4_
#define _GRADNET_AGGREGATOR_P4_

#include "config.p4"
#include "headers.p4"

control Aggregator(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    register<bit<64>>(NUM_AGGREGATORS) agg_key;
    register<bit<256>>(NUM_AGGREGATORS) agg_bitmap;
    register<bit<16>>(NUM_AGGREGATORS) agg_count;
    register<bit<8>>(NUM_AGGREGATORS)  agg_exp;    /* max of the contributors' max_exp */
    register<bit<48>>(NUM_AGGREGATORS) agg_time;   /* last contribution, us */
#include "generated/ina_lanes_registers.p4"
    /* Every INA packet the switch consumes is counted by reason. */
    counter(INA_DROP_REASON_COUNT, CounterType.packets) ina_drops;
    /* Aggregation events: 0 added, 1 partial sent, 2 passed on (busy),
     * 3 cleared, 4 result multicast, 5 taken over (held past the timeout). */
    counter(8, CounterType.packets) ina_events;

    bit<32> v;

    action set_switch_identity(bit<16> switch_id, ipv4_addr_t switch_ip,
                               bit<16> sd_id, ipv4_addr_t sd_ip) {
        meta.ina.switch_id = switch_id;
        meta.ina.switch_ip = switch_ip;
        meta.ina.sd_id = sd_id;
        meta.ina.sd_ip = sd_ip;
    }

    action unconfigured() {
        meta.ina.switch_id = 0;
    }

    /* Keyless: the controller sets the default action. */
    table ina_switch {
        actions = { set_switch_identity; unconfigured; }
        default_action = unconfigured();
    }

    /* 0 = never take over. */
    action set_aggregator_timeout(bit<48> timeout_us) {
        meta.ina.aging_timeout = timeout_us;
    }

    /* Keyless: the controller may replace the default timeout. */
    table ina_aging {
        actions = { set_aggregator_timeout; }
        default_action = set_aggregator_timeout(INA_AGGREGATOR_TIMEOUT_US);
    }

    action set_job(ipv4_addr_t ps_ip, bit<16> result_group) {
        meta.ina.ps_ip = ps_ip;
        meta.ina.result_group = result_group;
    }

    action unknown_job() {
        meta.ina.ps_ip = 0;
    }

    table ina_jobs {
        key = { hdr.ina.job_id: exact; }
        actions = { set_job; unknown_job; }
        default_action = unknown_job();
        size = INA_JOBS_SIZE;
    }

    action consume(bit<32> reason) {
        mark_to_drop(standard_metadata);
        ina_drops.count(reason);
        meta.ina.handled = 1;
    }

    /* The modulo index and the ring position of (job, fragment, origin). */
    action hash_fragment(bit<16> origin) {
        hash(meta.ina.index, HashAlgorithm.crc32, (bit<32>)0,
             { hdr.ina.job_id, hdr.ina.fragment, origin }, (bit<32>)NUM_AGGREGATORS);
        hash(meta.ina.ring_pos, HashAlgorithm.crc16, (bit<32>)0,
             { hdr.ina.job_id, hdr.ina.fragment, origin }, (bit<32>)INA_RING_POSITIONS);
        meta.ina.key = (bit<64>)1 << 56 | (bit<64>)origin << 40
                     | (bit<64>)hdr.ina.job_id << 32 | (bit<64>)hdr.ina.fragment;
    }

    action ring_owner(bit<32> index) {
        meta.ina.index = index;
    }

    action ring_off() {
    }

    /* Consistent hashing (the controller's, Aggregator.ring_entries): ring position ->
     * the aggregator owning it. Empty (the default): the modulo index stands. */
    table ina_ring {
        key = { meta.ina.ring_pos: exact; }
        actions = { ring_owner; ring_off; }
        default_action = ring_off();
        size = INA_RING_POSITIONS;
    }

    action load_aggregator() {
        agg_key.read(meta.ina.stored_key, meta.ina.index);
        agg_bitmap.read(meta.ina.stored_bitmap, meta.ina.index);
        agg_count.read(meta.ina.stored_count, meta.ina.index);
        agg_exp.read(meta.ina.stored_exp, meta.ina.index);
        agg_time.read(meta.ina.stored_time, meta.ina.index);
    }

    /* INA_VALUES register read-add-writes; the packet leaves carrying the sums. */
    action add_values() {
#include "generated/ina_lanes_add.p4"
        meta.ina.stored_bitmap = meta.ina.stored_bitmap | hdr.ina.bitmap;
        meta.ina.stored_count = meta.ina.stored_count + hdr.ina.count;
        agg_key.write(meta.ina.index, meta.ina.key);
        agg_bitmap.write(meta.ina.index, meta.ina.stored_bitmap);
        agg_count.write(meta.ina.index, meta.ina.stored_count);
        agg_exp.write(meta.ina.index, hdr.ina.max_exp);
        agg_time.write(meta.ina.index, standard_metadata.ingress_global_timestamp);
        ina_events.count(0);
    }

    action read_values() {
        hdr.ina.max_exp = meta.ina.stored_exp;
#include "generated/ina_lanes_read.p4"
    }

    action zero_values() {
#include "generated/ina_lanes_zero.p4"
    }

    action clear_aggregator() {
        agg_key.write(meta.ina.index, 0);
        agg_bitmap.write(meta.ina.index, 0);
        agg_count.write(meta.ina.index, 0);
        agg_exp.write(meta.ina.index, 0);
        zero_values();
        ina_events.count(3);
    }

    /* Held past the timeout: empty it for the packet at hand (its key, bitmap
     * and count are written by add_values). */
    action take_over() {
        zero_values();
        meta.ina.stored_key = 0;
        meta.ina.stored_bitmap = 0;
        meta.ina.stored_count = 0;
        meta.ina.stored_exp = 0;
        ina_events.count(5);
    }

    /* The aggregate goes to the PS from this switch... */
    action send_partial() {
        hdr.ina.msg_type = INA_PARTIAL;
        hdr.ina.tag = meta.ina.switch_id;
        hdr.ina.bitmap = meta.ina.stored_bitmap;
        hdr.ina.count = meta.ina.stored_count;
        hdr.ipv4.src_addr = meta.ina.switch_ip;
        hdr.ipv4.dst_addr = meta.ina.ps_ip;
        hdr.udp.checksum = 0;
        ina_events.count(1);
    }

    /* ...or, when the routing policy says so (VIA_SD), to s_d, which merges it
     * with its other contributions like any multi-contributor GRAD. */
    action send_partial_to_sd() {
        hdr.ina.tag = meta.ina.sd_id;
        hdr.ina.fanin = hdr.ina.sd_fanin;
        hdr.ina.flags = hdr.ina.flags & ~INA_FLAG_VIA_SD;
        hdr.ina.bitmap = meta.ina.stored_bitmap;
        hdr.ina.count = meta.ina.stored_count;
        hdr.ipv4.src_addr = meta.ina.switch_ip;
        hdr.ipv4.dst_addr = meta.ina.sd_ip;
        hdr.udp.checksum = 0;
        ina_events.count(1);
    }

    /* Flush (a NACK from the PS): the header-only NACK becomes a PARTIAL that
     * carries the aggregator's values, bitmap and count (read_values, then
     * send_partial): the values header is added and both lengths grow by it. */
    action flush_partial() {
        hdr.ina_values.setValid();
        read_values();
        hdr.ipv4.total_len = hdr.ipv4.total_len + 4 * INA_VALUES;
        hdr.udp.length = hdr.udp.length + 4 * INA_VALUES;
        hdr.ina.flags = INA_FLAG_RETX;
    }

    /* Busy aggregator: on, unaggregated, to s_d (or from s_d to the PS). */
    action pass_to_ps() {
        ina_events.count(2);
        hdr.udp.checksum = 0;
        hdr.ina.tag = 0;
        hdr.ipv4.dst_addr = meta.ina.ps_ip;
    }

    action pass_to_sd() {
        ina_events.count(2);
        hdr.udp.checksum = 0;
        hdr.ina.origin = meta.ina.switch_id;
        hdr.ina.tag = meta.ina.sd_id;
        hdr.ipv4.dst_addr = meta.ina.sd_ip;
    }

    /* The RESULT goes down the job's multicast tree (ina_result_fanout.p4) under
     * the job's result address; replicas become unicasts at the leaves. */
    action multicast_result() {
        standard_metadata.mcast_grp = meta.ina.result_group;
        hdr.ipv4.dst_addr = INA_RESULT_ADDRESS_BASE | (bit<32>)hdr.ina.job_id;
        meta.ina.handled = 1;
        ina_events.count(4);
    }

    apply {
        if (hdr.ina.isValid()) {
            ina_switch.apply();
            ina_aging.apply();
        }
        if (hdr.ina.isValid() && meta.ina.switch_id != 0) {
            /* one lookup of ina_ring per packet (a table applies once): GRADs locate
             * under their origin, RESULT/CLEAR under 0, a CLEAR passing s_d under the
             * switch it names */
            bool at_tag = hdr.ina.tag == meta.ina.switch_id;
            meta.ina.locate_origin = 0;
            if (!at_tag && hdr.ina.msg_type != INA_RESULT) {
                meta.ina.locate_origin = hdr.ina.tag;
            } else if (at_tag && hdr.ina.msg_type == INA_GRAD) {
                meta.ina.locate_origin = hdr.ina.origin;
            }
            /* a RESULT passing by is located too (under 0): it frees what this switch
             * still holds for the fragment (ina_ring is applied at this one place) */
            if (at_tag || hdr.ina.msg_type == INA_RESULT
                    || (hdr.ina.msg_type == INA_CLEAR && meta.ina.switch_id == meta.ina.sd_id)) {
                hash_fragment(meta.ina.locate_origin);
                ina_ring.apply();
            }
            if (hdr.ina.tag == meta.ina.switch_id) {
                if (!ina_jobs.apply().hit) {
                    consume(INA_DROP_UNKNOWN_JOB);
                } else if (hdr.ina.msg_type == INA_GRAD && hdr.udp.length != INA_GRAD_UDP_LEN) {
                    /* not this program's values per packet: summing a prefix (or a
                     * header whose values failed to parse) would be wrong; its worker
                     * times out and resends to the PS, which sums it whole */
                    consume(INA_DROP_WRONG_SIZE);
                } else if (hdr.ina.msg_type == INA_GRAD) {
                    load_aggregator();
                    if (meta.ina.stored_key != 0 && meta.ina.aging_timeout != 0) {
                        /* another fragment's: past the timeout; the packet's own
                         * key: past 4x it (a lagging rank adds to its round) */
                        bit<48> idle = standard_metadata.ingress_global_timestamp
                                       - meta.ina.stored_time;
                        if (meta.ina.stored_key != meta.ina.key) {
                            if (idle > meta.ina.aging_timeout) {
                                take_over();
                            }
                        } else if (idle > meta.ina.aging_timeout << INA_SAME_KEY_AGING_SHIFT) {
                            take_over();
                        }
                    }
                    if (meta.ina.stored_key == 0 || meta.ina.stored_key == meta.ina.key) {
                        if (meta.ina.stored_bitmap & hdr.ina.bitmap == 0) {
                            /* block floating point: the running max of the
                             * contributors' exponent proposals (0 = none) */
                            if (meta.ina.stored_exp > hdr.ina.max_exp) {
                                hdr.ina.max_exp = meta.ina.stored_exp;
                            }
                            add_values();
                            if (meta.ina.stored_count >= hdr.ina.fanin) {
                                if (hdr.ina.flags & INA_FLAG_VIA_SD != 0
                                        && meta.ina.switch_id != meta.ina.sd_id) {
                                    send_partial_to_sd();
                                } else {
                                    send_partial();
                                }
                            } else {
                                consume(INA_DROP_ABSORBED);
                            }
                        } else if (meta.ina.stored_count >= hdr.ina.fanin) {
                            /* a resend to a complete aggregate: the PARTIAL
                             * may have been lost, send it again */
                            read_values();
                            if (hdr.ina.flags & INA_FLAG_VIA_SD != 0
                                    && meta.ina.switch_id != meta.ina.sd_id) {
                                send_partial_to_sd();
                            } else {
                                send_partial();
                            }
                        } else {
                            consume(INA_DROP_DUPLICATE);
                        }
                    } else if (meta.ina.switch_id == meta.ina.sd_id || hdr.ina.origin != 0) {
                        pass_to_ps();
                    } else {
                        pass_to_sd();
                    }
                } else if (hdr.ina.msg_type == INA_RESULT) {
                    load_aggregator();
                    if (meta.ina.stored_key == meta.ina.key) {
                        clear_aggregator();
                    }
                    multicast_result();
                } else if (hdr.ina.msg_type == INA_CLEAR) {
                    load_aggregator();
                    if (meta.ina.stored_key == meta.ina.key) {
                        clear_aggregator();
                    }
                    consume(INA_DROP_CLEARED);
                } else if (hdr.ina.msg_type == INA_NACK) {
                    load_aggregator();
                    /* an aggregate a GRAD of this key would take over (an earlier
                     * use of the number, left behind) is not this round's */
                    if (meta.ina.stored_key == meta.ina.key && meta.ina.stored_count != 0
                            && (meta.ina.aging_timeout == 0
                                || standard_metadata.ingress_global_timestamp
                                   - meta.ina.stored_time
                                   <= meta.ina.aging_timeout << INA_SAME_KEY_AGING_SHIFT)) {
                        flush_partial();
                        send_partial();
                    } else {
                        consume(INA_DROP_NACK_EMPTY);
                    }
                }
            } else if (hdr.ina.msg_type == INA_CLEAR
                       && meta.ina.switch_id == meta.ina.sd_id) {
                /* A CLEAR for another switch passing s_d: free what s_d holds
                 * for that switch's passed-on packets. */
                load_aggregator();
                if (meta.ina.stored_key == meta.ina.key) {
                    clear_aggregator();
                }
            } else if (hdr.ina.msg_type == INA_RESULT) {
                /* A RESULT passing on its way to the workers: the fragment is
                 * finished, so whatever this switch still holds for it goes
                 * (the CLEAR meant for it may have been lost). */
                load_aggregator();
                if (meta.ina.stored_key == meta.ina.key) {
                    clear_aggregator();
                }
            }
        }
    }
}

#endif  /* _GRADNET_AGGREGATOR_P4_ */
