/* gradnet: register-based gradient aggregators (technique 1, docs/ina.md).
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
 * Aging: an aggregator whose last contribution is older than the timeout
 * (ina_aging, switch timestamps in microseconds) is taken over by the next GRAD
 * that hashes to it, its old contents dropped: an abandoned or forged
 * fragment cannot hold it for good. v1model has no timers, so the check is
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
    register<bit<32>>(NUM_AGGREGATORS) agg_value_00;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_01;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_02;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_03;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_04;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_05;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_06;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_07;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_08;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_09;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_10;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_11;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_12;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_13;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_14;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_15;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_16;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_17;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_18;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_19;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_20;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_21;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_22;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_23;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_24;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_25;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_26;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_27;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_28;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_29;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_30;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_31;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_32;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_33;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_34;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_35;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_36;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_37;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_38;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_39;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_40;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_41;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_42;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_43;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_44;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_45;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_46;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_47;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_48;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_49;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_50;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_51;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_52;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_53;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_54;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_55;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_56;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_57;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_58;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_59;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_60;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_61;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_62;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_63;
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

    action locate(bit<16> origin) {
        hash(meta.ina.index, HashAlgorithm.crc32, (bit<32>)0,
             { hdr.ina.job_id, hdr.ina.fragment, origin }, (bit<32>)NUM_AGGREGATORS);
        meta.ina.key = (bit<64>)1 << 56 | (bit<64>)origin << 40
                     | (bit<64>)hdr.ina.job_id << 32 | (bit<64>)hdr.ina.fragment;
        agg_key.read(meta.ina.stored_key, meta.ina.index);
        agg_bitmap.read(meta.ina.stored_bitmap, meta.ina.index);
        agg_count.read(meta.ina.stored_count, meta.ina.index);
        agg_exp.read(meta.ina.stored_exp, meta.ina.index);
        agg_time.read(meta.ina.stored_time, meta.ina.index);
    }

    /* INA_VALUES register read-add-writes; the packet leaves carrying the sums. */
    action add_values() {
        agg_value_00.read(v, meta.ina.index);
        hdr.ina_values.v00 = hdr.ina_values.v00 + v;
        agg_value_00.write(meta.ina.index, hdr.ina_values.v00);
        agg_value_01.read(v, meta.ina.index);
        hdr.ina_values.v01 = hdr.ina_values.v01 + v;
        agg_value_01.write(meta.ina.index, hdr.ina_values.v01);
        agg_value_02.read(v, meta.ina.index);
        hdr.ina_values.v02 = hdr.ina_values.v02 + v;
        agg_value_02.write(meta.ina.index, hdr.ina_values.v02);
        agg_value_03.read(v, meta.ina.index);
        hdr.ina_values.v03 = hdr.ina_values.v03 + v;
        agg_value_03.write(meta.ina.index, hdr.ina_values.v03);
        agg_value_04.read(v, meta.ina.index);
        hdr.ina_values.v04 = hdr.ina_values.v04 + v;
        agg_value_04.write(meta.ina.index, hdr.ina_values.v04);
        agg_value_05.read(v, meta.ina.index);
        hdr.ina_values.v05 = hdr.ina_values.v05 + v;
        agg_value_05.write(meta.ina.index, hdr.ina_values.v05);
        agg_value_06.read(v, meta.ina.index);
        hdr.ina_values.v06 = hdr.ina_values.v06 + v;
        agg_value_06.write(meta.ina.index, hdr.ina_values.v06);
        agg_value_07.read(v, meta.ina.index);
        hdr.ina_values.v07 = hdr.ina_values.v07 + v;
        agg_value_07.write(meta.ina.index, hdr.ina_values.v07);
        agg_value_08.read(v, meta.ina.index);
        hdr.ina_values.v08 = hdr.ina_values.v08 + v;
        agg_value_08.write(meta.ina.index, hdr.ina_values.v08);
        agg_value_09.read(v, meta.ina.index);
        hdr.ina_values.v09 = hdr.ina_values.v09 + v;
        agg_value_09.write(meta.ina.index, hdr.ina_values.v09);
        agg_value_10.read(v, meta.ina.index);
        hdr.ina_values.v10 = hdr.ina_values.v10 + v;
        agg_value_10.write(meta.ina.index, hdr.ina_values.v10);
        agg_value_11.read(v, meta.ina.index);
        hdr.ina_values.v11 = hdr.ina_values.v11 + v;
        agg_value_11.write(meta.ina.index, hdr.ina_values.v11);
        agg_value_12.read(v, meta.ina.index);
        hdr.ina_values.v12 = hdr.ina_values.v12 + v;
        agg_value_12.write(meta.ina.index, hdr.ina_values.v12);
        agg_value_13.read(v, meta.ina.index);
        hdr.ina_values.v13 = hdr.ina_values.v13 + v;
        agg_value_13.write(meta.ina.index, hdr.ina_values.v13);
        agg_value_14.read(v, meta.ina.index);
        hdr.ina_values.v14 = hdr.ina_values.v14 + v;
        agg_value_14.write(meta.ina.index, hdr.ina_values.v14);
        agg_value_15.read(v, meta.ina.index);
        hdr.ina_values.v15 = hdr.ina_values.v15 + v;
        agg_value_15.write(meta.ina.index, hdr.ina_values.v15);
        agg_value_16.read(v, meta.ina.index);
        hdr.ina_values.v16 = hdr.ina_values.v16 + v;
        agg_value_16.write(meta.ina.index, hdr.ina_values.v16);
        agg_value_17.read(v, meta.ina.index);
        hdr.ina_values.v17 = hdr.ina_values.v17 + v;
        agg_value_17.write(meta.ina.index, hdr.ina_values.v17);
        agg_value_18.read(v, meta.ina.index);
        hdr.ina_values.v18 = hdr.ina_values.v18 + v;
        agg_value_18.write(meta.ina.index, hdr.ina_values.v18);
        agg_value_19.read(v, meta.ina.index);
        hdr.ina_values.v19 = hdr.ina_values.v19 + v;
        agg_value_19.write(meta.ina.index, hdr.ina_values.v19);
        agg_value_20.read(v, meta.ina.index);
        hdr.ina_values.v20 = hdr.ina_values.v20 + v;
        agg_value_20.write(meta.ina.index, hdr.ina_values.v20);
        agg_value_21.read(v, meta.ina.index);
        hdr.ina_values.v21 = hdr.ina_values.v21 + v;
        agg_value_21.write(meta.ina.index, hdr.ina_values.v21);
        agg_value_22.read(v, meta.ina.index);
        hdr.ina_values.v22 = hdr.ina_values.v22 + v;
        agg_value_22.write(meta.ina.index, hdr.ina_values.v22);
        agg_value_23.read(v, meta.ina.index);
        hdr.ina_values.v23 = hdr.ina_values.v23 + v;
        agg_value_23.write(meta.ina.index, hdr.ina_values.v23);
        agg_value_24.read(v, meta.ina.index);
        hdr.ina_values.v24 = hdr.ina_values.v24 + v;
        agg_value_24.write(meta.ina.index, hdr.ina_values.v24);
        agg_value_25.read(v, meta.ina.index);
        hdr.ina_values.v25 = hdr.ina_values.v25 + v;
        agg_value_25.write(meta.ina.index, hdr.ina_values.v25);
        agg_value_26.read(v, meta.ina.index);
        hdr.ina_values.v26 = hdr.ina_values.v26 + v;
        agg_value_26.write(meta.ina.index, hdr.ina_values.v26);
        agg_value_27.read(v, meta.ina.index);
        hdr.ina_values.v27 = hdr.ina_values.v27 + v;
        agg_value_27.write(meta.ina.index, hdr.ina_values.v27);
        agg_value_28.read(v, meta.ina.index);
        hdr.ina_values.v28 = hdr.ina_values.v28 + v;
        agg_value_28.write(meta.ina.index, hdr.ina_values.v28);
        agg_value_29.read(v, meta.ina.index);
        hdr.ina_values.v29 = hdr.ina_values.v29 + v;
        agg_value_29.write(meta.ina.index, hdr.ina_values.v29);
        agg_value_30.read(v, meta.ina.index);
        hdr.ina_values.v30 = hdr.ina_values.v30 + v;
        agg_value_30.write(meta.ina.index, hdr.ina_values.v30);
        agg_value_31.read(v, meta.ina.index);
        hdr.ina_values.v31 = hdr.ina_values.v31 + v;
        agg_value_31.write(meta.ina.index, hdr.ina_values.v31);
        agg_value_32.read(v, meta.ina.index);
        hdr.ina_values.v32 = hdr.ina_values.v32 + v;
        agg_value_32.write(meta.ina.index, hdr.ina_values.v32);
        agg_value_33.read(v, meta.ina.index);
        hdr.ina_values.v33 = hdr.ina_values.v33 + v;
        agg_value_33.write(meta.ina.index, hdr.ina_values.v33);
        agg_value_34.read(v, meta.ina.index);
        hdr.ina_values.v34 = hdr.ina_values.v34 + v;
        agg_value_34.write(meta.ina.index, hdr.ina_values.v34);
        agg_value_35.read(v, meta.ina.index);
        hdr.ina_values.v35 = hdr.ina_values.v35 + v;
        agg_value_35.write(meta.ina.index, hdr.ina_values.v35);
        agg_value_36.read(v, meta.ina.index);
        hdr.ina_values.v36 = hdr.ina_values.v36 + v;
        agg_value_36.write(meta.ina.index, hdr.ina_values.v36);
        agg_value_37.read(v, meta.ina.index);
        hdr.ina_values.v37 = hdr.ina_values.v37 + v;
        agg_value_37.write(meta.ina.index, hdr.ina_values.v37);
        agg_value_38.read(v, meta.ina.index);
        hdr.ina_values.v38 = hdr.ina_values.v38 + v;
        agg_value_38.write(meta.ina.index, hdr.ina_values.v38);
        agg_value_39.read(v, meta.ina.index);
        hdr.ina_values.v39 = hdr.ina_values.v39 + v;
        agg_value_39.write(meta.ina.index, hdr.ina_values.v39);
        agg_value_40.read(v, meta.ina.index);
        hdr.ina_values.v40 = hdr.ina_values.v40 + v;
        agg_value_40.write(meta.ina.index, hdr.ina_values.v40);
        agg_value_41.read(v, meta.ina.index);
        hdr.ina_values.v41 = hdr.ina_values.v41 + v;
        agg_value_41.write(meta.ina.index, hdr.ina_values.v41);
        agg_value_42.read(v, meta.ina.index);
        hdr.ina_values.v42 = hdr.ina_values.v42 + v;
        agg_value_42.write(meta.ina.index, hdr.ina_values.v42);
        agg_value_43.read(v, meta.ina.index);
        hdr.ina_values.v43 = hdr.ina_values.v43 + v;
        agg_value_43.write(meta.ina.index, hdr.ina_values.v43);
        agg_value_44.read(v, meta.ina.index);
        hdr.ina_values.v44 = hdr.ina_values.v44 + v;
        agg_value_44.write(meta.ina.index, hdr.ina_values.v44);
        agg_value_45.read(v, meta.ina.index);
        hdr.ina_values.v45 = hdr.ina_values.v45 + v;
        agg_value_45.write(meta.ina.index, hdr.ina_values.v45);
        agg_value_46.read(v, meta.ina.index);
        hdr.ina_values.v46 = hdr.ina_values.v46 + v;
        agg_value_46.write(meta.ina.index, hdr.ina_values.v46);
        agg_value_47.read(v, meta.ina.index);
        hdr.ina_values.v47 = hdr.ina_values.v47 + v;
        agg_value_47.write(meta.ina.index, hdr.ina_values.v47);
        agg_value_48.read(v, meta.ina.index);
        hdr.ina_values.v48 = hdr.ina_values.v48 + v;
        agg_value_48.write(meta.ina.index, hdr.ina_values.v48);
        agg_value_49.read(v, meta.ina.index);
        hdr.ina_values.v49 = hdr.ina_values.v49 + v;
        agg_value_49.write(meta.ina.index, hdr.ina_values.v49);
        agg_value_50.read(v, meta.ina.index);
        hdr.ina_values.v50 = hdr.ina_values.v50 + v;
        agg_value_50.write(meta.ina.index, hdr.ina_values.v50);
        agg_value_51.read(v, meta.ina.index);
        hdr.ina_values.v51 = hdr.ina_values.v51 + v;
        agg_value_51.write(meta.ina.index, hdr.ina_values.v51);
        agg_value_52.read(v, meta.ina.index);
        hdr.ina_values.v52 = hdr.ina_values.v52 + v;
        agg_value_52.write(meta.ina.index, hdr.ina_values.v52);
        agg_value_53.read(v, meta.ina.index);
        hdr.ina_values.v53 = hdr.ina_values.v53 + v;
        agg_value_53.write(meta.ina.index, hdr.ina_values.v53);
        agg_value_54.read(v, meta.ina.index);
        hdr.ina_values.v54 = hdr.ina_values.v54 + v;
        agg_value_54.write(meta.ina.index, hdr.ina_values.v54);
        agg_value_55.read(v, meta.ina.index);
        hdr.ina_values.v55 = hdr.ina_values.v55 + v;
        agg_value_55.write(meta.ina.index, hdr.ina_values.v55);
        agg_value_56.read(v, meta.ina.index);
        hdr.ina_values.v56 = hdr.ina_values.v56 + v;
        agg_value_56.write(meta.ina.index, hdr.ina_values.v56);
        agg_value_57.read(v, meta.ina.index);
        hdr.ina_values.v57 = hdr.ina_values.v57 + v;
        agg_value_57.write(meta.ina.index, hdr.ina_values.v57);
        agg_value_58.read(v, meta.ina.index);
        hdr.ina_values.v58 = hdr.ina_values.v58 + v;
        agg_value_58.write(meta.ina.index, hdr.ina_values.v58);
        agg_value_59.read(v, meta.ina.index);
        hdr.ina_values.v59 = hdr.ina_values.v59 + v;
        agg_value_59.write(meta.ina.index, hdr.ina_values.v59);
        agg_value_60.read(v, meta.ina.index);
        hdr.ina_values.v60 = hdr.ina_values.v60 + v;
        agg_value_60.write(meta.ina.index, hdr.ina_values.v60);
        agg_value_61.read(v, meta.ina.index);
        hdr.ina_values.v61 = hdr.ina_values.v61 + v;
        agg_value_61.write(meta.ina.index, hdr.ina_values.v61);
        agg_value_62.read(v, meta.ina.index);
        hdr.ina_values.v62 = hdr.ina_values.v62 + v;
        agg_value_62.write(meta.ina.index, hdr.ina_values.v62);
        agg_value_63.read(v, meta.ina.index);
        hdr.ina_values.v63 = hdr.ina_values.v63 + v;
        agg_value_63.write(meta.ina.index, hdr.ina_values.v63);
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
        agg_value_00.read(hdr.ina_values.v00, meta.ina.index);
        agg_value_01.read(hdr.ina_values.v01, meta.ina.index);
        agg_value_02.read(hdr.ina_values.v02, meta.ina.index);
        agg_value_03.read(hdr.ina_values.v03, meta.ina.index);
        agg_value_04.read(hdr.ina_values.v04, meta.ina.index);
        agg_value_05.read(hdr.ina_values.v05, meta.ina.index);
        agg_value_06.read(hdr.ina_values.v06, meta.ina.index);
        agg_value_07.read(hdr.ina_values.v07, meta.ina.index);
        agg_value_08.read(hdr.ina_values.v08, meta.ina.index);
        agg_value_09.read(hdr.ina_values.v09, meta.ina.index);
        agg_value_10.read(hdr.ina_values.v10, meta.ina.index);
        agg_value_11.read(hdr.ina_values.v11, meta.ina.index);
        agg_value_12.read(hdr.ina_values.v12, meta.ina.index);
        agg_value_13.read(hdr.ina_values.v13, meta.ina.index);
        agg_value_14.read(hdr.ina_values.v14, meta.ina.index);
        agg_value_15.read(hdr.ina_values.v15, meta.ina.index);
        agg_value_16.read(hdr.ina_values.v16, meta.ina.index);
        agg_value_17.read(hdr.ina_values.v17, meta.ina.index);
        agg_value_18.read(hdr.ina_values.v18, meta.ina.index);
        agg_value_19.read(hdr.ina_values.v19, meta.ina.index);
        agg_value_20.read(hdr.ina_values.v20, meta.ina.index);
        agg_value_21.read(hdr.ina_values.v21, meta.ina.index);
        agg_value_22.read(hdr.ina_values.v22, meta.ina.index);
        agg_value_23.read(hdr.ina_values.v23, meta.ina.index);
        agg_value_24.read(hdr.ina_values.v24, meta.ina.index);
        agg_value_25.read(hdr.ina_values.v25, meta.ina.index);
        agg_value_26.read(hdr.ina_values.v26, meta.ina.index);
        agg_value_27.read(hdr.ina_values.v27, meta.ina.index);
        agg_value_28.read(hdr.ina_values.v28, meta.ina.index);
        agg_value_29.read(hdr.ina_values.v29, meta.ina.index);
        agg_value_30.read(hdr.ina_values.v30, meta.ina.index);
        agg_value_31.read(hdr.ina_values.v31, meta.ina.index);
        agg_value_32.read(hdr.ina_values.v32, meta.ina.index);
        agg_value_33.read(hdr.ina_values.v33, meta.ina.index);
        agg_value_34.read(hdr.ina_values.v34, meta.ina.index);
        agg_value_35.read(hdr.ina_values.v35, meta.ina.index);
        agg_value_36.read(hdr.ina_values.v36, meta.ina.index);
        agg_value_37.read(hdr.ina_values.v37, meta.ina.index);
        agg_value_38.read(hdr.ina_values.v38, meta.ina.index);
        agg_value_39.read(hdr.ina_values.v39, meta.ina.index);
        agg_value_40.read(hdr.ina_values.v40, meta.ina.index);
        agg_value_41.read(hdr.ina_values.v41, meta.ina.index);
        agg_value_42.read(hdr.ina_values.v42, meta.ina.index);
        agg_value_43.read(hdr.ina_values.v43, meta.ina.index);
        agg_value_44.read(hdr.ina_values.v44, meta.ina.index);
        agg_value_45.read(hdr.ina_values.v45, meta.ina.index);
        agg_value_46.read(hdr.ina_values.v46, meta.ina.index);
        agg_value_47.read(hdr.ina_values.v47, meta.ina.index);
        agg_value_48.read(hdr.ina_values.v48, meta.ina.index);
        agg_value_49.read(hdr.ina_values.v49, meta.ina.index);
        agg_value_50.read(hdr.ina_values.v50, meta.ina.index);
        agg_value_51.read(hdr.ina_values.v51, meta.ina.index);
        agg_value_52.read(hdr.ina_values.v52, meta.ina.index);
        agg_value_53.read(hdr.ina_values.v53, meta.ina.index);
        agg_value_54.read(hdr.ina_values.v54, meta.ina.index);
        agg_value_55.read(hdr.ina_values.v55, meta.ina.index);
        agg_value_56.read(hdr.ina_values.v56, meta.ina.index);
        agg_value_57.read(hdr.ina_values.v57, meta.ina.index);
        agg_value_58.read(hdr.ina_values.v58, meta.ina.index);
        agg_value_59.read(hdr.ina_values.v59, meta.ina.index);
        agg_value_60.read(hdr.ina_values.v60, meta.ina.index);
        agg_value_61.read(hdr.ina_values.v61, meta.ina.index);
        agg_value_62.read(hdr.ina_values.v62, meta.ina.index);
        agg_value_63.read(hdr.ina_values.v63, meta.ina.index);
    }

    action zero_values() {
        agg_value_00.write(meta.ina.index, 0);
        agg_value_01.write(meta.ina.index, 0);
        agg_value_02.write(meta.ina.index, 0);
        agg_value_03.write(meta.ina.index, 0);
        agg_value_04.write(meta.ina.index, 0);
        agg_value_05.write(meta.ina.index, 0);
        agg_value_06.write(meta.ina.index, 0);
        agg_value_07.write(meta.ina.index, 0);
        agg_value_08.write(meta.ina.index, 0);
        agg_value_09.write(meta.ina.index, 0);
        agg_value_10.write(meta.ina.index, 0);
        agg_value_11.write(meta.ina.index, 0);
        agg_value_12.write(meta.ina.index, 0);
        agg_value_13.write(meta.ina.index, 0);
        agg_value_14.write(meta.ina.index, 0);
        agg_value_15.write(meta.ina.index, 0);
        agg_value_16.write(meta.ina.index, 0);
        agg_value_17.write(meta.ina.index, 0);
        agg_value_18.write(meta.ina.index, 0);
        agg_value_19.write(meta.ina.index, 0);
        agg_value_20.write(meta.ina.index, 0);
        agg_value_21.write(meta.ina.index, 0);
        agg_value_22.write(meta.ina.index, 0);
        agg_value_23.write(meta.ina.index, 0);
        agg_value_24.write(meta.ina.index, 0);
        agg_value_25.write(meta.ina.index, 0);
        agg_value_26.write(meta.ina.index, 0);
        agg_value_27.write(meta.ina.index, 0);
        agg_value_28.write(meta.ina.index, 0);
        agg_value_29.write(meta.ina.index, 0);
        agg_value_30.write(meta.ina.index, 0);
        agg_value_31.write(meta.ina.index, 0);
        agg_value_32.write(meta.ina.index, 0);
        agg_value_33.write(meta.ina.index, 0);
        agg_value_34.write(meta.ina.index, 0);
        agg_value_35.write(meta.ina.index, 0);
        agg_value_36.write(meta.ina.index, 0);
        agg_value_37.write(meta.ina.index, 0);
        agg_value_38.write(meta.ina.index, 0);
        agg_value_39.write(meta.ina.index, 0);
        agg_value_40.write(meta.ina.index, 0);
        agg_value_41.write(meta.ina.index, 0);
        agg_value_42.write(meta.ina.index, 0);
        agg_value_43.write(meta.ina.index, 0);
        agg_value_44.write(meta.ina.index, 0);
        agg_value_45.write(meta.ina.index, 0);
        agg_value_46.write(meta.ina.index, 0);
        agg_value_47.write(meta.ina.index, 0);
        agg_value_48.write(meta.ina.index, 0);
        agg_value_49.write(meta.ina.index, 0);
        agg_value_50.write(meta.ina.index, 0);
        agg_value_51.write(meta.ina.index, 0);
        agg_value_52.write(meta.ina.index, 0);
        agg_value_53.write(meta.ina.index, 0);
        agg_value_54.write(meta.ina.index, 0);
        agg_value_55.write(meta.ina.index, 0);
        agg_value_56.write(meta.ina.index, 0);
        agg_value_57.write(meta.ina.index, 0);
        agg_value_58.write(meta.ina.index, 0);
        agg_value_59.write(meta.ina.index, 0);
        agg_value_60.write(meta.ina.index, 0);
        agg_value_61.write(meta.ina.index, 0);
        agg_value_62.write(meta.ina.index, 0);
        agg_value_63.write(meta.ina.index, 0);
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

    /* The RESULT goes down the job's multicast tree (result_fanout.p4) under
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
            if (hdr.ina.tag == meta.ina.switch_id) {
                if (!ina_jobs.apply().hit) {
                    consume(INA_DROP_UNKNOWN_JOB);
                } else if (hdr.ina.msg_type == INA_GRAD) {
                    locate(hdr.ina.origin);
                    if (meta.ina.stored_key != 0 && meta.ina.aging_timeout != 0
                            && standard_metadata.ingress_global_timestamp - meta.ina.stored_time
                               > meta.ina.aging_timeout) {
                        take_over();
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
                    locate(0);
                    if (meta.ina.stored_key == meta.ina.key) {
                        clear_aggregator();
                    }
                    multicast_result();
                } else if (hdr.ina.msg_type == INA_CLEAR) {
                    locate(0);
                    if (meta.ina.stored_key == meta.ina.key) {
                        clear_aggregator();
                    }
                    consume(INA_DROP_CLEARED);
                }
            } else if (hdr.ina.msg_type == INA_CLEAR
                       && meta.ina.switch_id == meta.ina.sd_id) {
                /* A CLEAR for another switch passing s_d: free what s_d holds
                 * for that switch's passed-on packets. */
                locate(hdr.ina.tag);
                if (meta.ina.stored_key == meta.ina.key) {
                    clear_aggregator();
                }
            }
        }
    }
}

#endif  /* _GRADNET_AGGREGATOR_P4_ */
