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
#if INA_VALUES > 64
    register<bit<32>>(NUM_AGGREGATORS) agg_value_64;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_65;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_66;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_67;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_68;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_69;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_70;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_71;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_72;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_73;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_74;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_75;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_76;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_77;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_78;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_79;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_80;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_81;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_82;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_83;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_84;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_85;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_86;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_87;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_88;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_89;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_90;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_91;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_92;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_93;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_94;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_95;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_96;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_97;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_98;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_99;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_100;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_101;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_102;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_103;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_104;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_105;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_106;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_107;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_108;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_109;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_110;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_111;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_112;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_113;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_114;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_115;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_116;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_117;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_118;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_119;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_120;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_121;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_122;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_123;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_124;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_125;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_126;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_127;
#endif
#if INA_VALUES > 128
    register<bit<32>>(NUM_AGGREGATORS) agg_value_128;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_129;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_130;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_131;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_132;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_133;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_134;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_135;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_136;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_137;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_138;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_139;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_140;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_141;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_142;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_143;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_144;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_145;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_146;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_147;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_148;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_149;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_150;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_151;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_152;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_153;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_154;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_155;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_156;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_157;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_158;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_159;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_160;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_161;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_162;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_163;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_164;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_165;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_166;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_167;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_168;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_169;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_170;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_171;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_172;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_173;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_174;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_175;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_176;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_177;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_178;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_179;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_180;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_181;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_182;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_183;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_184;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_185;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_186;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_187;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_188;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_189;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_190;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_191;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_192;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_193;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_194;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_195;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_196;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_197;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_198;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_199;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_200;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_201;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_202;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_203;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_204;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_205;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_206;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_207;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_208;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_209;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_210;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_211;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_212;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_213;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_214;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_215;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_216;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_217;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_218;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_219;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_220;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_221;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_222;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_223;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_224;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_225;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_226;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_227;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_228;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_229;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_230;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_231;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_232;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_233;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_234;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_235;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_236;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_237;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_238;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_239;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_240;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_241;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_242;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_243;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_244;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_245;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_246;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_247;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_248;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_249;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_250;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_251;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_252;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_253;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_254;
    register<bit<32>>(NUM_AGGREGATORS) agg_value_255;
#endif
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
#if INA_VALUES > 64
        agg_value_64.read(v, meta.ina.index);
        hdr.ina_values.v64 = hdr.ina_values.v64 + v;
        agg_value_64.write(meta.ina.index, hdr.ina_values.v64);
        agg_value_65.read(v, meta.ina.index);
        hdr.ina_values.v65 = hdr.ina_values.v65 + v;
        agg_value_65.write(meta.ina.index, hdr.ina_values.v65);
        agg_value_66.read(v, meta.ina.index);
        hdr.ina_values.v66 = hdr.ina_values.v66 + v;
        agg_value_66.write(meta.ina.index, hdr.ina_values.v66);
        agg_value_67.read(v, meta.ina.index);
        hdr.ina_values.v67 = hdr.ina_values.v67 + v;
        agg_value_67.write(meta.ina.index, hdr.ina_values.v67);
        agg_value_68.read(v, meta.ina.index);
        hdr.ina_values.v68 = hdr.ina_values.v68 + v;
        agg_value_68.write(meta.ina.index, hdr.ina_values.v68);
        agg_value_69.read(v, meta.ina.index);
        hdr.ina_values.v69 = hdr.ina_values.v69 + v;
        agg_value_69.write(meta.ina.index, hdr.ina_values.v69);
        agg_value_70.read(v, meta.ina.index);
        hdr.ina_values.v70 = hdr.ina_values.v70 + v;
        agg_value_70.write(meta.ina.index, hdr.ina_values.v70);
        agg_value_71.read(v, meta.ina.index);
        hdr.ina_values.v71 = hdr.ina_values.v71 + v;
        agg_value_71.write(meta.ina.index, hdr.ina_values.v71);
        agg_value_72.read(v, meta.ina.index);
        hdr.ina_values.v72 = hdr.ina_values.v72 + v;
        agg_value_72.write(meta.ina.index, hdr.ina_values.v72);
        agg_value_73.read(v, meta.ina.index);
        hdr.ina_values.v73 = hdr.ina_values.v73 + v;
        agg_value_73.write(meta.ina.index, hdr.ina_values.v73);
        agg_value_74.read(v, meta.ina.index);
        hdr.ina_values.v74 = hdr.ina_values.v74 + v;
        agg_value_74.write(meta.ina.index, hdr.ina_values.v74);
        agg_value_75.read(v, meta.ina.index);
        hdr.ina_values.v75 = hdr.ina_values.v75 + v;
        agg_value_75.write(meta.ina.index, hdr.ina_values.v75);
        agg_value_76.read(v, meta.ina.index);
        hdr.ina_values.v76 = hdr.ina_values.v76 + v;
        agg_value_76.write(meta.ina.index, hdr.ina_values.v76);
        agg_value_77.read(v, meta.ina.index);
        hdr.ina_values.v77 = hdr.ina_values.v77 + v;
        agg_value_77.write(meta.ina.index, hdr.ina_values.v77);
        agg_value_78.read(v, meta.ina.index);
        hdr.ina_values.v78 = hdr.ina_values.v78 + v;
        agg_value_78.write(meta.ina.index, hdr.ina_values.v78);
        agg_value_79.read(v, meta.ina.index);
        hdr.ina_values.v79 = hdr.ina_values.v79 + v;
        agg_value_79.write(meta.ina.index, hdr.ina_values.v79);
        agg_value_80.read(v, meta.ina.index);
        hdr.ina_values.v80 = hdr.ina_values.v80 + v;
        agg_value_80.write(meta.ina.index, hdr.ina_values.v80);
        agg_value_81.read(v, meta.ina.index);
        hdr.ina_values.v81 = hdr.ina_values.v81 + v;
        agg_value_81.write(meta.ina.index, hdr.ina_values.v81);
        agg_value_82.read(v, meta.ina.index);
        hdr.ina_values.v82 = hdr.ina_values.v82 + v;
        agg_value_82.write(meta.ina.index, hdr.ina_values.v82);
        agg_value_83.read(v, meta.ina.index);
        hdr.ina_values.v83 = hdr.ina_values.v83 + v;
        agg_value_83.write(meta.ina.index, hdr.ina_values.v83);
        agg_value_84.read(v, meta.ina.index);
        hdr.ina_values.v84 = hdr.ina_values.v84 + v;
        agg_value_84.write(meta.ina.index, hdr.ina_values.v84);
        agg_value_85.read(v, meta.ina.index);
        hdr.ina_values.v85 = hdr.ina_values.v85 + v;
        agg_value_85.write(meta.ina.index, hdr.ina_values.v85);
        agg_value_86.read(v, meta.ina.index);
        hdr.ina_values.v86 = hdr.ina_values.v86 + v;
        agg_value_86.write(meta.ina.index, hdr.ina_values.v86);
        agg_value_87.read(v, meta.ina.index);
        hdr.ina_values.v87 = hdr.ina_values.v87 + v;
        agg_value_87.write(meta.ina.index, hdr.ina_values.v87);
        agg_value_88.read(v, meta.ina.index);
        hdr.ina_values.v88 = hdr.ina_values.v88 + v;
        agg_value_88.write(meta.ina.index, hdr.ina_values.v88);
        agg_value_89.read(v, meta.ina.index);
        hdr.ina_values.v89 = hdr.ina_values.v89 + v;
        agg_value_89.write(meta.ina.index, hdr.ina_values.v89);
        agg_value_90.read(v, meta.ina.index);
        hdr.ina_values.v90 = hdr.ina_values.v90 + v;
        agg_value_90.write(meta.ina.index, hdr.ina_values.v90);
        agg_value_91.read(v, meta.ina.index);
        hdr.ina_values.v91 = hdr.ina_values.v91 + v;
        agg_value_91.write(meta.ina.index, hdr.ina_values.v91);
        agg_value_92.read(v, meta.ina.index);
        hdr.ina_values.v92 = hdr.ina_values.v92 + v;
        agg_value_92.write(meta.ina.index, hdr.ina_values.v92);
        agg_value_93.read(v, meta.ina.index);
        hdr.ina_values.v93 = hdr.ina_values.v93 + v;
        agg_value_93.write(meta.ina.index, hdr.ina_values.v93);
        agg_value_94.read(v, meta.ina.index);
        hdr.ina_values.v94 = hdr.ina_values.v94 + v;
        agg_value_94.write(meta.ina.index, hdr.ina_values.v94);
        agg_value_95.read(v, meta.ina.index);
        hdr.ina_values.v95 = hdr.ina_values.v95 + v;
        agg_value_95.write(meta.ina.index, hdr.ina_values.v95);
        agg_value_96.read(v, meta.ina.index);
        hdr.ina_values.v96 = hdr.ina_values.v96 + v;
        agg_value_96.write(meta.ina.index, hdr.ina_values.v96);
        agg_value_97.read(v, meta.ina.index);
        hdr.ina_values.v97 = hdr.ina_values.v97 + v;
        agg_value_97.write(meta.ina.index, hdr.ina_values.v97);
        agg_value_98.read(v, meta.ina.index);
        hdr.ina_values.v98 = hdr.ina_values.v98 + v;
        agg_value_98.write(meta.ina.index, hdr.ina_values.v98);
        agg_value_99.read(v, meta.ina.index);
        hdr.ina_values.v99 = hdr.ina_values.v99 + v;
        agg_value_99.write(meta.ina.index, hdr.ina_values.v99);
        agg_value_100.read(v, meta.ina.index);
        hdr.ina_values.v100 = hdr.ina_values.v100 + v;
        agg_value_100.write(meta.ina.index, hdr.ina_values.v100);
        agg_value_101.read(v, meta.ina.index);
        hdr.ina_values.v101 = hdr.ina_values.v101 + v;
        agg_value_101.write(meta.ina.index, hdr.ina_values.v101);
        agg_value_102.read(v, meta.ina.index);
        hdr.ina_values.v102 = hdr.ina_values.v102 + v;
        agg_value_102.write(meta.ina.index, hdr.ina_values.v102);
        agg_value_103.read(v, meta.ina.index);
        hdr.ina_values.v103 = hdr.ina_values.v103 + v;
        agg_value_103.write(meta.ina.index, hdr.ina_values.v103);
        agg_value_104.read(v, meta.ina.index);
        hdr.ina_values.v104 = hdr.ina_values.v104 + v;
        agg_value_104.write(meta.ina.index, hdr.ina_values.v104);
        agg_value_105.read(v, meta.ina.index);
        hdr.ina_values.v105 = hdr.ina_values.v105 + v;
        agg_value_105.write(meta.ina.index, hdr.ina_values.v105);
        agg_value_106.read(v, meta.ina.index);
        hdr.ina_values.v106 = hdr.ina_values.v106 + v;
        agg_value_106.write(meta.ina.index, hdr.ina_values.v106);
        agg_value_107.read(v, meta.ina.index);
        hdr.ina_values.v107 = hdr.ina_values.v107 + v;
        agg_value_107.write(meta.ina.index, hdr.ina_values.v107);
        agg_value_108.read(v, meta.ina.index);
        hdr.ina_values.v108 = hdr.ina_values.v108 + v;
        agg_value_108.write(meta.ina.index, hdr.ina_values.v108);
        agg_value_109.read(v, meta.ina.index);
        hdr.ina_values.v109 = hdr.ina_values.v109 + v;
        agg_value_109.write(meta.ina.index, hdr.ina_values.v109);
        agg_value_110.read(v, meta.ina.index);
        hdr.ina_values.v110 = hdr.ina_values.v110 + v;
        agg_value_110.write(meta.ina.index, hdr.ina_values.v110);
        agg_value_111.read(v, meta.ina.index);
        hdr.ina_values.v111 = hdr.ina_values.v111 + v;
        agg_value_111.write(meta.ina.index, hdr.ina_values.v111);
        agg_value_112.read(v, meta.ina.index);
        hdr.ina_values.v112 = hdr.ina_values.v112 + v;
        agg_value_112.write(meta.ina.index, hdr.ina_values.v112);
        agg_value_113.read(v, meta.ina.index);
        hdr.ina_values.v113 = hdr.ina_values.v113 + v;
        agg_value_113.write(meta.ina.index, hdr.ina_values.v113);
        agg_value_114.read(v, meta.ina.index);
        hdr.ina_values.v114 = hdr.ina_values.v114 + v;
        agg_value_114.write(meta.ina.index, hdr.ina_values.v114);
        agg_value_115.read(v, meta.ina.index);
        hdr.ina_values.v115 = hdr.ina_values.v115 + v;
        agg_value_115.write(meta.ina.index, hdr.ina_values.v115);
        agg_value_116.read(v, meta.ina.index);
        hdr.ina_values.v116 = hdr.ina_values.v116 + v;
        agg_value_116.write(meta.ina.index, hdr.ina_values.v116);
        agg_value_117.read(v, meta.ina.index);
        hdr.ina_values.v117 = hdr.ina_values.v117 + v;
        agg_value_117.write(meta.ina.index, hdr.ina_values.v117);
        agg_value_118.read(v, meta.ina.index);
        hdr.ina_values.v118 = hdr.ina_values.v118 + v;
        agg_value_118.write(meta.ina.index, hdr.ina_values.v118);
        agg_value_119.read(v, meta.ina.index);
        hdr.ina_values.v119 = hdr.ina_values.v119 + v;
        agg_value_119.write(meta.ina.index, hdr.ina_values.v119);
        agg_value_120.read(v, meta.ina.index);
        hdr.ina_values.v120 = hdr.ina_values.v120 + v;
        agg_value_120.write(meta.ina.index, hdr.ina_values.v120);
        agg_value_121.read(v, meta.ina.index);
        hdr.ina_values.v121 = hdr.ina_values.v121 + v;
        agg_value_121.write(meta.ina.index, hdr.ina_values.v121);
        agg_value_122.read(v, meta.ina.index);
        hdr.ina_values.v122 = hdr.ina_values.v122 + v;
        agg_value_122.write(meta.ina.index, hdr.ina_values.v122);
        agg_value_123.read(v, meta.ina.index);
        hdr.ina_values.v123 = hdr.ina_values.v123 + v;
        agg_value_123.write(meta.ina.index, hdr.ina_values.v123);
        agg_value_124.read(v, meta.ina.index);
        hdr.ina_values.v124 = hdr.ina_values.v124 + v;
        agg_value_124.write(meta.ina.index, hdr.ina_values.v124);
        agg_value_125.read(v, meta.ina.index);
        hdr.ina_values.v125 = hdr.ina_values.v125 + v;
        agg_value_125.write(meta.ina.index, hdr.ina_values.v125);
        agg_value_126.read(v, meta.ina.index);
        hdr.ina_values.v126 = hdr.ina_values.v126 + v;
        agg_value_126.write(meta.ina.index, hdr.ina_values.v126);
        agg_value_127.read(v, meta.ina.index);
        hdr.ina_values.v127 = hdr.ina_values.v127 + v;
        agg_value_127.write(meta.ina.index, hdr.ina_values.v127);
#endif
#if INA_VALUES > 128
        agg_value_128.read(v, meta.ina.index);
        hdr.ina_values.v128 = hdr.ina_values.v128 + v;
        agg_value_128.write(meta.ina.index, hdr.ina_values.v128);
        agg_value_129.read(v, meta.ina.index);
        hdr.ina_values.v129 = hdr.ina_values.v129 + v;
        agg_value_129.write(meta.ina.index, hdr.ina_values.v129);
        agg_value_130.read(v, meta.ina.index);
        hdr.ina_values.v130 = hdr.ina_values.v130 + v;
        agg_value_130.write(meta.ina.index, hdr.ina_values.v130);
        agg_value_131.read(v, meta.ina.index);
        hdr.ina_values.v131 = hdr.ina_values.v131 + v;
        agg_value_131.write(meta.ina.index, hdr.ina_values.v131);
        agg_value_132.read(v, meta.ina.index);
        hdr.ina_values.v132 = hdr.ina_values.v132 + v;
        agg_value_132.write(meta.ina.index, hdr.ina_values.v132);
        agg_value_133.read(v, meta.ina.index);
        hdr.ina_values.v133 = hdr.ina_values.v133 + v;
        agg_value_133.write(meta.ina.index, hdr.ina_values.v133);
        agg_value_134.read(v, meta.ina.index);
        hdr.ina_values.v134 = hdr.ina_values.v134 + v;
        agg_value_134.write(meta.ina.index, hdr.ina_values.v134);
        agg_value_135.read(v, meta.ina.index);
        hdr.ina_values.v135 = hdr.ina_values.v135 + v;
        agg_value_135.write(meta.ina.index, hdr.ina_values.v135);
        agg_value_136.read(v, meta.ina.index);
        hdr.ina_values.v136 = hdr.ina_values.v136 + v;
        agg_value_136.write(meta.ina.index, hdr.ina_values.v136);
        agg_value_137.read(v, meta.ina.index);
        hdr.ina_values.v137 = hdr.ina_values.v137 + v;
        agg_value_137.write(meta.ina.index, hdr.ina_values.v137);
        agg_value_138.read(v, meta.ina.index);
        hdr.ina_values.v138 = hdr.ina_values.v138 + v;
        agg_value_138.write(meta.ina.index, hdr.ina_values.v138);
        agg_value_139.read(v, meta.ina.index);
        hdr.ina_values.v139 = hdr.ina_values.v139 + v;
        agg_value_139.write(meta.ina.index, hdr.ina_values.v139);
        agg_value_140.read(v, meta.ina.index);
        hdr.ina_values.v140 = hdr.ina_values.v140 + v;
        agg_value_140.write(meta.ina.index, hdr.ina_values.v140);
        agg_value_141.read(v, meta.ina.index);
        hdr.ina_values.v141 = hdr.ina_values.v141 + v;
        agg_value_141.write(meta.ina.index, hdr.ina_values.v141);
        agg_value_142.read(v, meta.ina.index);
        hdr.ina_values.v142 = hdr.ina_values.v142 + v;
        agg_value_142.write(meta.ina.index, hdr.ina_values.v142);
        agg_value_143.read(v, meta.ina.index);
        hdr.ina_values.v143 = hdr.ina_values.v143 + v;
        agg_value_143.write(meta.ina.index, hdr.ina_values.v143);
        agg_value_144.read(v, meta.ina.index);
        hdr.ina_values.v144 = hdr.ina_values.v144 + v;
        agg_value_144.write(meta.ina.index, hdr.ina_values.v144);
        agg_value_145.read(v, meta.ina.index);
        hdr.ina_values.v145 = hdr.ina_values.v145 + v;
        agg_value_145.write(meta.ina.index, hdr.ina_values.v145);
        agg_value_146.read(v, meta.ina.index);
        hdr.ina_values.v146 = hdr.ina_values.v146 + v;
        agg_value_146.write(meta.ina.index, hdr.ina_values.v146);
        agg_value_147.read(v, meta.ina.index);
        hdr.ina_values.v147 = hdr.ina_values.v147 + v;
        agg_value_147.write(meta.ina.index, hdr.ina_values.v147);
        agg_value_148.read(v, meta.ina.index);
        hdr.ina_values.v148 = hdr.ina_values.v148 + v;
        agg_value_148.write(meta.ina.index, hdr.ina_values.v148);
        agg_value_149.read(v, meta.ina.index);
        hdr.ina_values.v149 = hdr.ina_values.v149 + v;
        agg_value_149.write(meta.ina.index, hdr.ina_values.v149);
        agg_value_150.read(v, meta.ina.index);
        hdr.ina_values.v150 = hdr.ina_values.v150 + v;
        agg_value_150.write(meta.ina.index, hdr.ina_values.v150);
        agg_value_151.read(v, meta.ina.index);
        hdr.ina_values.v151 = hdr.ina_values.v151 + v;
        agg_value_151.write(meta.ina.index, hdr.ina_values.v151);
        agg_value_152.read(v, meta.ina.index);
        hdr.ina_values.v152 = hdr.ina_values.v152 + v;
        agg_value_152.write(meta.ina.index, hdr.ina_values.v152);
        agg_value_153.read(v, meta.ina.index);
        hdr.ina_values.v153 = hdr.ina_values.v153 + v;
        agg_value_153.write(meta.ina.index, hdr.ina_values.v153);
        agg_value_154.read(v, meta.ina.index);
        hdr.ina_values.v154 = hdr.ina_values.v154 + v;
        agg_value_154.write(meta.ina.index, hdr.ina_values.v154);
        agg_value_155.read(v, meta.ina.index);
        hdr.ina_values.v155 = hdr.ina_values.v155 + v;
        agg_value_155.write(meta.ina.index, hdr.ina_values.v155);
        agg_value_156.read(v, meta.ina.index);
        hdr.ina_values.v156 = hdr.ina_values.v156 + v;
        agg_value_156.write(meta.ina.index, hdr.ina_values.v156);
        agg_value_157.read(v, meta.ina.index);
        hdr.ina_values.v157 = hdr.ina_values.v157 + v;
        agg_value_157.write(meta.ina.index, hdr.ina_values.v157);
        agg_value_158.read(v, meta.ina.index);
        hdr.ina_values.v158 = hdr.ina_values.v158 + v;
        agg_value_158.write(meta.ina.index, hdr.ina_values.v158);
        agg_value_159.read(v, meta.ina.index);
        hdr.ina_values.v159 = hdr.ina_values.v159 + v;
        agg_value_159.write(meta.ina.index, hdr.ina_values.v159);
        agg_value_160.read(v, meta.ina.index);
        hdr.ina_values.v160 = hdr.ina_values.v160 + v;
        agg_value_160.write(meta.ina.index, hdr.ina_values.v160);
        agg_value_161.read(v, meta.ina.index);
        hdr.ina_values.v161 = hdr.ina_values.v161 + v;
        agg_value_161.write(meta.ina.index, hdr.ina_values.v161);
        agg_value_162.read(v, meta.ina.index);
        hdr.ina_values.v162 = hdr.ina_values.v162 + v;
        agg_value_162.write(meta.ina.index, hdr.ina_values.v162);
        agg_value_163.read(v, meta.ina.index);
        hdr.ina_values.v163 = hdr.ina_values.v163 + v;
        agg_value_163.write(meta.ina.index, hdr.ina_values.v163);
        agg_value_164.read(v, meta.ina.index);
        hdr.ina_values.v164 = hdr.ina_values.v164 + v;
        agg_value_164.write(meta.ina.index, hdr.ina_values.v164);
        agg_value_165.read(v, meta.ina.index);
        hdr.ina_values.v165 = hdr.ina_values.v165 + v;
        agg_value_165.write(meta.ina.index, hdr.ina_values.v165);
        agg_value_166.read(v, meta.ina.index);
        hdr.ina_values.v166 = hdr.ina_values.v166 + v;
        agg_value_166.write(meta.ina.index, hdr.ina_values.v166);
        agg_value_167.read(v, meta.ina.index);
        hdr.ina_values.v167 = hdr.ina_values.v167 + v;
        agg_value_167.write(meta.ina.index, hdr.ina_values.v167);
        agg_value_168.read(v, meta.ina.index);
        hdr.ina_values.v168 = hdr.ina_values.v168 + v;
        agg_value_168.write(meta.ina.index, hdr.ina_values.v168);
        agg_value_169.read(v, meta.ina.index);
        hdr.ina_values.v169 = hdr.ina_values.v169 + v;
        agg_value_169.write(meta.ina.index, hdr.ina_values.v169);
        agg_value_170.read(v, meta.ina.index);
        hdr.ina_values.v170 = hdr.ina_values.v170 + v;
        agg_value_170.write(meta.ina.index, hdr.ina_values.v170);
        agg_value_171.read(v, meta.ina.index);
        hdr.ina_values.v171 = hdr.ina_values.v171 + v;
        agg_value_171.write(meta.ina.index, hdr.ina_values.v171);
        agg_value_172.read(v, meta.ina.index);
        hdr.ina_values.v172 = hdr.ina_values.v172 + v;
        agg_value_172.write(meta.ina.index, hdr.ina_values.v172);
        agg_value_173.read(v, meta.ina.index);
        hdr.ina_values.v173 = hdr.ina_values.v173 + v;
        agg_value_173.write(meta.ina.index, hdr.ina_values.v173);
        agg_value_174.read(v, meta.ina.index);
        hdr.ina_values.v174 = hdr.ina_values.v174 + v;
        agg_value_174.write(meta.ina.index, hdr.ina_values.v174);
        agg_value_175.read(v, meta.ina.index);
        hdr.ina_values.v175 = hdr.ina_values.v175 + v;
        agg_value_175.write(meta.ina.index, hdr.ina_values.v175);
        agg_value_176.read(v, meta.ina.index);
        hdr.ina_values.v176 = hdr.ina_values.v176 + v;
        agg_value_176.write(meta.ina.index, hdr.ina_values.v176);
        agg_value_177.read(v, meta.ina.index);
        hdr.ina_values.v177 = hdr.ina_values.v177 + v;
        agg_value_177.write(meta.ina.index, hdr.ina_values.v177);
        agg_value_178.read(v, meta.ina.index);
        hdr.ina_values.v178 = hdr.ina_values.v178 + v;
        agg_value_178.write(meta.ina.index, hdr.ina_values.v178);
        agg_value_179.read(v, meta.ina.index);
        hdr.ina_values.v179 = hdr.ina_values.v179 + v;
        agg_value_179.write(meta.ina.index, hdr.ina_values.v179);
        agg_value_180.read(v, meta.ina.index);
        hdr.ina_values.v180 = hdr.ina_values.v180 + v;
        agg_value_180.write(meta.ina.index, hdr.ina_values.v180);
        agg_value_181.read(v, meta.ina.index);
        hdr.ina_values.v181 = hdr.ina_values.v181 + v;
        agg_value_181.write(meta.ina.index, hdr.ina_values.v181);
        agg_value_182.read(v, meta.ina.index);
        hdr.ina_values.v182 = hdr.ina_values.v182 + v;
        agg_value_182.write(meta.ina.index, hdr.ina_values.v182);
        agg_value_183.read(v, meta.ina.index);
        hdr.ina_values.v183 = hdr.ina_values.v183 + v;
        agg_value_183.write(meta.ina.index, hdr.ina_values.v183);
        agg_value_184.read(v, meta.ina.index);
        hdr.ina_values.v184 = hdr.ina_values.v184 + v;
        agg_value_184.write(meta.ina.index, hdr.ina_values.v184);
        agg_value_185.read(v, meta.ina.index);
        hdr.ina_values.v185 = hdr.ina_values.v185 + v;
        agg_value_185.write(meta.ina.index, hdr.ina_values.v185);
        agg_value_186.read(v, meta.ina.index);
        hdr.ina_values.v186 = hdr.ina_values.v186 + v;
        agg_value_186.write(meta.ina.index, hdr.ina_values.v186);
        agg_value_187.read(v, meta.ina.index);
        hdr.ina_values.v187 = hdr.ina_values.v187 + v;
        agg_value_187.write(meta.ina.index, hdr.ina_values.v187);
        agg_value_188.read(v, meta.ina.index);
        hdr.ina_values.v188 = hdr.ina_values.v188 + v;
        agg_value_188.write(meta.ina.index, hdr.ina_values.v188);
        agg_value_189.read(v, meta.ina.index);
        hdr.ina_values.v189 = hdr.ina_values.v189 + v;
        agg_value_189.write(meta.ina.index, hdr.ina_values.v189);
        agg_value_190.read(v, meta.ina.index);
        hdr.ina_values.v190 = hdr.ina_values.v190 + v;
        agg_value_190.write(meta.ina.index, hdr.ina_values.v190);
        agg_value_191.read(v, meta.ina.index);
        hdr.ina_values.v191 = hdr.ina_values.v191 + v;
        agg_value_191.write(meta.ina.index, hdr.ina_values.v191);
        agg_value_192.read(v, meta.ina.index);
        hdr.ina_values.v192 = hdr.ina_values.v192 + v;
        agg_value_192.write(meta.ina.index, hdr.ina_values.v192);
        agg_value_193.read(v, meta.ina.index);
        hdr.ina_values.v193 = hdr.ina_values.v193 + v;
        agg_value_193.write(meta.ina.index, hdr.ina_values.v193);
        agg_value_194.read(v, meta.ina.index);
        hdr.ina_values.v194 = hdr.ina_values.v194 + v;
        agg_value_194.write(meta.ina.index, hdr.ina_values.v194);
        agg_value_195.read(v, meta.ina.index);
        hdr.ina_values.v195 = hdr.ina_values.v195 + v;
        agg_value_195.write(meta.ina.index, hdr.ina_values.v195);
        agg_value_196.read(v, meta.ina.index);
        hdr.ina_values.v196 = hdr.ina_values.v196 + v;
        agg_value_196.write(meta.ina.index, hdr.ina_values.v196);
        agg_value_197.read(v, meta.ina.index);
        hdr.ina_values.v197 = hdr.ina_values.v197 + v;
        agg_value_197.write(meta.ina.index, hdr.ina_values.v197);
        agg_value_198.read(v, meta.ina.index);
        hdr.ina_values.v198 = hdr.ina_values.v198 + v;
        agg_value_198.write(meta.ina.index, hdr.ina_values.v198);
        agg_value_199.read(v, meta.ina.index);
        hdr.ina_values.v199 = hdr.ina_values.v199 + v;
        agg_value_199.write(meta.ina.index, hdr.ina_values.v199);
        agg_value_200.read(v, meta.ina.index);
        hdr.ina_values.v200 = hdr.ina_values.v200 + v;
        agg_value_200.write(meta.ina.index, hdr.ina_values.v200);
        agg_value_201.read(v, meta.ina.index);
        hdr.ina_values.v201 = hdr.ina_values.v201 + v;
        agg_value_201.write(meta.ina.index, hdr.ina_values.v201);
        agg_value_202.read(v, meta.ina.index);
        hdr.ina_values.v202 = hdr.ina_values.v202 + v;
        agg_value_202.write(meta.ina.index, hdr.ina_values.v202);
        agg_value_203.read(v, meta.ina.index);
        hdr.ina_values.v203 = hdr.ina_values.v203 + v;
        agg_value_203.write(meta.ina.index, hdr.ina_values.v203);
        agg_value_204.read(v, meta.ina.index);
        hdr.ina_values.v204 = hdr.ina_values.v204 + v;
        agg_value_204.write(meta.ina.index, hdr.ina_values.v204);
        agg_value_205.read(v, meta.ina.index);
        hdr.ina_values.v205 = hdr.ina_values.v205 + v;
        agg_value_205.write(meta.ina.index, hdr.ina_values.v205);
        agg_value_206.read(v, meta.ina.index);
        hdr.ina_values.v206 = hdr.ina_values.v206 + v;
        agg_value_206.write(meta.ina.index, hdr.ina_values.v206);
        agg_value_207.read(v, meta.ina.index);
        hdr.ina_values.v207 = hdr.ina_values.v207 + v;
        agg_value_207.write(meta.ina.index, hdr.ina_values.v207);
        agg_value_208.read(v, meta.ina.index);
        hdr.ina_values.v208 = hdr.ina_values.v208 + v;
        agg_value_208.write(meta.ina.index, hdr.ina_values.v208);
        agg_value_209.read(v, meta.ina.index);
        hdr.ina_values.v209 = hdr.ina_values.v209 + v;
        agg_value_209.write(meta.ina.index, hdr.ina_values.v209);
        agg_value_210.read(v, meta.ina.index);
        hdr.ina_values.v210 = hdr.ina_values.v210 + v;
        agg_value_210.write(meta.ina.index, hdr.ina_values.v210);
        agg_value_211.read(v, meta.ina.index);
        hdr.ina_values.v211 = hdr.ina_values.v211 + v;
        agg_value_211.write(meta.ina.index, hdr.ina_values.v211);
        agg_value_212.read(v, meta.ina.index);
        hdr.ina_values.v212 = hdr.ina_values.v212 + v;
        agg_value_212.write(meta.ina.index, hdr.ina_values.v212);
        agg_value_213.read(v, meta.ina.index);
        hdr.ina_values.v213 = hdr.ina_values.v213 + v;
        agg_value_213.write(meta.ina.index, hdr.ina_values.v213);
        agg_value_214.read(v, meta.ina.index);
        hdr.ina_values.v214 = hdr.ina_values.v214 + v;
        agg_value_214.write(meta.ina.index, hdr.ina_values.v214);
        agg_value_215.read(v, meta.ina.index);
        hdr.ina_values.v215 = hdr.ina_values.v215 + v;
        agg_value_215.write(meta.ina.index, hdr.ina_values.v215);
        agg_value_216.read(v, meta.ina.index);
        hdr.ina_values.v216 = hdr.ina_values.v216 + v;
        agg_value_216.write(meta.ina.index, hdr.ina_values.v216);
        agg_value_217.read(v, meta.ina.index);
        hdr.ina_values.v217 = hdr.ina_values.v217 + v;
        agg_value_217.write(meta.ina.index, hdr.ina_values.v217);
        agg_value_218.read(v, meta.ina.index);
        hdr.ina_values.v218 = hdr.ina_values.v218 + v;
        agg_value_218.write(meta.ina.index, hdr.ina_values.v218);
        agg_value_219.read(v, meta.ina.index);
        hdr.ina_values.v219 = hdr.ina_values.v219 + v;
        agg_value_219.write(meta.ina.index, hdr.ina_values.v219);
        agg_value_220.read(v, meta.ina.index);
        hdr.ina_values.v220 = hdr.ina_values.v220 + v;
        agg_value_220.write(meta.ina.index, hdr.ina_values.v220);
        agg_value_221.read(v, meta.ina.index);
        hdr.ina_values.v221 = hdr.ina_values.v221 + v;
        agg_value_221.write(meta.ina.index, hdr.ina_values.v221);
        agg_value_222.read(v, meta.ina.index);
        hdr.ina_values.v222 = hdr.ina_values.v222 + v;
        agg_value_222.write(meta.ina.index, hdr.ina_values.v222);
        agg_value_223.read(v, meta.ina.index);
        hdr.ina_values.v223 = hdr.ina_values.v223 + v;
        agg_value_223.write(meta.ina.index, hdr.ina_values.v223);
        agg_value_224.read(v, meta.ina.index);
        hdr.ina_values.v224 = hdr.ina_values.v224 + v;
        agg_value_224.write(meta.ina.index, hdr.ina_values.v224);
        agg_value_225.read(v, meta.ina.index);
        hdr.ina_values.v225 = hdr.ina_values.v225 + v;
        agg_value_225.write(meta.ina.index, hdr.ina_values.v225);
        agg_value_226.read(v, meta.ina.index);
        hdr.ina_values.v226 = hdr.ina_values.v226 + v;
        agg_value_226.write(meta.ina.index, hdr.ina_values.v226);
        agg_value_227.read(v, meta.ina.index);
        hdr.ina_values.v227 = hdr.ina_values.v227 + v;
        agg_value_227.write(meta.ina.index, hdr.ina_values.v227);
        agg_value_228.read(v, meta.ina.index);
        hdr.ina_values.v228 = hdr.ina_values.v228 + v;
        agg_value_228.write(meta.ina.index, hdr.ina_values.v228);
        agg_value_229.read(v, meta.ina.index);
        hdr.ina_values.v229 = hdr.ina_values.v229 + v;
        agg_value_229.write(meta.ina.index, hdr.ina_values.v229);
        agg_value_230.read(v, meta.ina.index);
        hdr.ina_values.v230 = hdr.ina_values.v230 + v;
        agg_value_230.write(meta.ina.index, hdr.ina_values.v230);
        agg_value_231.read(v, meta.ina.index);
        hdr.ina_values.v231 = hdr.ina_values.v231 + v;
        agg_value_231.write(meta.ina.index, hdr.ina_values.v231);
        agg_value_232.read(v, meta.ina.index);
        hdr.ina_values.v232 = hdr.ina_values.v232 + v;
        agg_value_232.write(meta.ina.index, hdr.ina_values.v232);
        agg_value_233.read(v, meta.ina.index);
        hdr.ina_values.v233 = hdr.ina_values.v233 + v;
        agg_value_233.write(meta.ina.index, hdr.ina_values.v233);
        agg_value_234.read(v, meta.ina.index);
        hdr.ina_values.v234 = hdr.ina_values.v234 + v;
        agg_value_234.write(meta.ina.index, hdr.ina_values.v234);
        agg_value_235.read(v, meta.ina.index);
        hdr.ina_values.v235 = hdr.ina_values.v235 + v;
        agg_value_235.write(meta.ina.index, hdr.ina_values.v235);
        agg_value_236.read(v, meta.ina.index);
        hdr.ina_values.v236 = hdr.ina_values.v236 + v;
        agg_value_236.write(meta.ina.index, hdr.ina_values.v236);
        agg_value_237.read(v, meta.ina.index);
        hdr.ina_values.v237 = hdr.ina_values.v237 + v;
        agg_value_237.write(meta.ina.index, hdr.ina_values.v237);
        agg_value_238.read(v, meta.ina.index);
        hdr.ina_values.v238 = hdr.ina_values.v238 + v;
        agg_value_238.write(meta.ina.index, hdr.ina_values.v238);
        agg_value_239.read(v, meta.ina.index);
        hdr.ina_values.v239 = hdr.ina_values.v239 + v;
        agg_value_239.write(meta.ina.index, hdr.ina_values.v239);
        agg_value_240.read(v, meta.ina.index);
        hdr.ina_values.v240 = hdr.ina_values.v240 + v;
        agg_value_240.write(meta.ina.index, hdr.ina_values.v240);
        agg_value_241.read(v, meta.ina.index);
        hdr.ina_values.v241 = hdr.ina_values.v241 + v;
        agg_value_241.write(meta.ina.index, hdr.ina_values.v241);
        agg_value_242.read(v, meta.ina.index);
        hdr.ina_values.v242 = hdr.ina_values.v242 + v;
        agg_value_242.write(meta.ina.index, hdr.ina_values.v242);
        agg_value_243.read(v, meta.ina.index);
        hdr.ina_values.v243 = hdr.ina_values.v243 + v;
        agg_value_243.write(meta.ina.index, hdr.ina_values.v243);
        agg_value_244.read(v, meta.ina.index);
        hdr.ina_values.v244 = hdr.ina_values.v244 + v;
        agg_value_244.write(meta.ina.index, hdr.ina_values.v244);
        agg_value_245.read(v, meta.ina.index);
        hdr.ina_values.v245 = hdr.ina_values.v245 + v;
        agg_value_245.write(meta.ina.index, hdr.ina_values.v245);
        agg_value_246.read(v, meta.ina.index);
        hdr.ina_values.v246 = hdr.ina_values.v246 + v;
        agg_value_246.write(meta.ina.index, hdr.ina_values.v246);
        agg_value_247.read(v, meta.ina.index);
        hdr.ina_values.v247 = hdr.ina_values.v247 + v;
        agg_value_247.write(meta.ina.index, hdr.ina_values.v247);
        agg_value_248.read(v, meta.ina.index);
        hdr.ina_values.v248 = hdr.ina_values.v248 + v;
        agg_value_248.write(meta.ina.index, hdr.ina_values.v248);
        agg_value_249.read(v, meta.ina.index);
        hdr.ina_values.v249 = hdr.ina_values.v249 + v;
        agg_value_249.write(meta.ina.index, hdr.ina_values.v249);
        agg_value_250.read(v, meta.ina.index);
        hdr.ina_values.v250 = hdr.ina_values.v250 + v;
        agg_value_250.write(meta.ina.index, hdr.ina_values.v250);
        agg_value_251.read(v, meta.ina.index);
        hdr.ina_values.v251 = hdr.ina_values.v251 + v;
        agg_value_251.write(meta.ina.index, hdr.ina_values.v251);
        agg_value_252.read(v, meta.ina.index);
        hdr.ina_values.v252 = hdr.ina_values.v252 + v;
        agg_value_252.write(meta.ina.index, hdr.ina_values.v252);
        agg_value_253.read(v, meta.ina.index);
        hdr.ina_values.v253 = hdr.ina_values.v253 + v;
        agg_value_253.write(meta.ina.index, hdr.ina_values.v253);
        agg_value_254.read(v, meta.ina.index);
        hdr.ina_values.v254 = hdr.ina_values.v254 + v;
        agg_value_254.write(meta.ina.index, hdr.ina_values.v254);
        agg_value_255.read(v, meta.ina.index);
        hdr.ina_values.v255 = hdr.ina_values.v255 + v;
        agg_value_255.write(meta.ina.index, hdr.ina_values.v255);
#endif
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
#if INA_VALUES > 64
        agg_value_64.read(hdr.ina_values.v64, meta.ina.index);
        agg_value_65.read(hdr.ina_values.v65, meta.ina.index);
        agg_value_66.read(hdr.ina_values.v66, meta.ina.index);
        agg_value_67.read(hdr.ina_values.v67, meta.ina.index);
        agg_value_68.read(hdr.ina_values.v68, meta.ina.index);
        agg_value_69.read(hdr.ina_values.v69, meta.ina.index);
        agg_value_70.read(hdr.ina_values.v70, meta.ina.index);
        agg_value_71.read(hdr.ina_values.v71, meta.ina.index);
        agg_value_72.read(hdr.ina_values.v72, meta.ina.index);
        agg_value_73.read(hdr.ina_values.v73, meta.ina.index);
        agg_value_74.read(hdr.ina_values.v74, meta.ina.index);
        agg_value_75.read(hdr.ina_values.v75, meta.ina.index);
        agg_value_76.read(hdr.ina_values.v76, meta.ina.index);
        agg_value_77.read(hdr.ina_values.v77, meta.ina.index);
        agg_value_78.read(hdr.ina_values.v78, meta.ina.index);
        agg_value_79.read(hdr.ina_values.v79, meta.ina.index);
        agg_value_80.read(hdr.ina_values.v80, meta.ina.index);
        agg_value_81.read(hdr.ina_values.v81, meta.ina.index);
        agg_value_82.read(hdr.ina_values.v82, meta.ina.index);
        agg_value_83.read(hdr.ina_values.v83, meta.ina.index);
        agg_value_84.read(hdr.ina_values.v84, meta.ina.index);
        agg_value_85.read(hdr.ina_values.v85, meta.ina.index);
        agg_value_86.read(hdr.ina_values.v86, meta.ina.index);
        agg_value_87.read(hdr.ina_values.v87, meta.ina.index);
        agg_value_88.read(hdr.ina_values.v88, meta.ina.index);
        agg_value_89.read(hdr.ina_values.v89, meta.ina.index);
        agg_value_90.read(hdr.ina_values.v90, meta.ina.index);
        agg_value_91.read(hdr.ina_values.v91, meta.ina.index);
        agg_value_92.read(hdr.ina_values.v92, meta.ina.index);
        agg_value_93.read(hdr.ina_values.v93, meta.ina.index);
        agg_value_94.read(hdr.ina_values.v94, meta.ina.index);
        agg_value_95.read(hdr.ina_values.v95, meta.ina.index);
        agg_value_96.read(hdr.ina_values.v96, meta.ina.index);
        agg_value_97.read(hdr.ina_values.v97, meta.ina.index);
        agg_value_98.read(hdr.ina_values.v98, meta.ina.index);
        agg_value_99.read(hdr.ina_values.v99, meta.ina.index);
        agg_value_100.read(hdr.ina_values.v100, meta.ina.index);
        agg_value_101.read(hdr.ina_values.v101, meta.ina.index);
        agg_value_102.read(hdr.ina_values.v102, meta.ina.index);
        agg_value_103.read(hdr.ina_values.v103, meta.ina.index);
        agg_value_104.read(hdr.ina_values.v104, meta.ina.index);
        agg_value_105.read(hdr.ina_values.v105, meta.ina.index);
        agg_value_106.read(hdr.ina_values.v106, meta.ina.index);
        agg_value_107.read(hdr.ina_values.v107, meta.ina.index);
        agg_value_108.read(hdr.ina_values.v108, meta.ina.index);
        agg_value_109.read(hdr.ina_values.v109, meta.ina.index);
        agg_value_110.read(hdr.ina_values.v110, meta.ina.index);
        agg_value_111.read(hdr.ina_values.v111, meta.ina.index);
        agg_value_112.read(hdr.ina_values.v112, meta.ina.index);
        agg_value_113.read(hdr.ina_values.v113, meta.ina.index);
        agg_value_114.read(hdr.ina_values.v114, meta.ina.index);
        agg_value_115.read(hdr.ina_values.v115, meta.ina.index);
        agg_value_116.read(hdr.ina_values.v116, meta.ina.index);
        agg_value_117.read(hdr.ina_values.v117, meta.ina.index);
        agg_value_118.read(hdr.ina_values.v118, meta.ina.index);
        agg_value_119.read(hdr.ina_values.v119, meta.ina.index);
        agg_value_120.read(hdr.ina_values.v120, meta.ina.index);
        agg_value_121.read(hdr.ina_values.v121, meta.ina.index);
        agg_value_122.read(hdr.ina_values.v122, meta.ina.index);
        agg_value_123.read(hdr.ina_values.v123, meta.ina.index);
        agg_value_124.read(hdr.ina_values.v124, meta.ina.index);
        agg_value_125.read(hdr.ina_values.v125, meta.ina.index);
        agg_value_126.read(hdr.ina_values.v126, meta.ina.index);
        agg_value_127.read(hdr.ina_values.v127, meta.ina.index);
#endif
#if INA_VALUES > 128
        agg_value_128.read(hdr.ina_values.v128, meta.ina.index);
        agg_value_129.read(hdr.ina_values.v129, meta.ina.index);
        agg_value_130.read(hdr.ina_values.v130, meta.ina.index);
        agg_value_131.read(hdr.ina_values.v131, meta.ina.index);
        agg_value_132.read(hdr.ina_values.v132, meta.ina.index);
        agg_value_133.read(hdr.ina_values.v133, meta.ina.index);
        agg_value_134.read(hdr.ina_values.v134, meta.ina.index);
        agg_value_135.read(hdr.ina_values.v135, meta.ina.index);
        agg_value_136.read(hdr.ina_values.v136, meta.ina.index);
        agg_value_137.read(hdr.ina_values.v137, meta.ina.index);
        agg_value_138.read(hdr.ina_values.v138, meta.ina.index);
        agg_value_139.read(hdr.ina_values.v139, meta.ina.index);
        agg_value_140.read(hdr.ina_values.v140, meta.ina.index);
        agg_value_141.read(hdr.ina_values.v141, meta.ina.index);
        agg_value_142.read(hdr.ina_values.v142, meta.ina.index);
        agg_value_143.read(hdr.ina_values.v143, meta.ina.index);
        agg_value_144.read(hdr.ina_values.v144, meta.ina.index);
        agg_value_145.read(hdr.ina_values.v145, meta.ina.index);
        agg_value_146.read(hdr.ina_values.v146, meta.ina.index);
        agg_value_147.read(hdr.ina_values.v147, meta.ina.index);
        agg_value_148.read(hdr.ina_values.v148, meta.ina.index);
        agg_value_149.read(hdr.ina_values.v149, meta.ina.index);
        agg_value_150.read(hdr.ina_values.v150, meta.ina.index);
        agg_value_151.read(hdr.ina_values.v151, meta.ina.index);
        agg_value_152.read(hdr.ina_values.v152, meta.ina.index);
        agg_value_153.read(hdr.ina_values.v153, meta.ina.index);
        agg_value_154.read(hdr.ina_values.v154, meta.ina.index);
        agg_value_155.read(hdr.ina_values.v155, meta.ina.index);
        agg_value_156.read(hdr.ina_values.v156, meta.ina.index);
        agg_value_157.read(hdr.ina_values.v157, meta.ina.index);
        agg_value_158.read(hdr.ina_values.v158, meta.ina.index);
        agg_value_159.read(hdr.ina_values.v159, meta.ina.index);
        agg_value_160.read(hdr.ina_values.v160, meta.ina.index);
        agg_value_161.read(hdr.ina_values.v161, meta.ina.index);
        agg_value_162.read(hdr.ina_values.v162, meta.ina.index);
        agg_value_163.read(hdr.ina_values.v163, meta.ina.index);
        agg_value_164.read(hdr.ina_values.v164, meta.ina.index);
        agg_value_165.read(hdr.ina_values.v165, meta.ina.index);
        agg_value_166.read(hdr.ina_values.v166, meta.ina.index);
        agg_value_167.read(hdr.ina_values.v167, meta.ina.index);
        agg_value_168.read(hdr.ina_values.v168, meta.ina.index);
        agg_value_169.read(hdr.ina_values.v169, meta.ina.index);
        agg_value_170.read(hdr.ina_values.v170, meta.ina.index);
        agg_value_171.read(hdr.ina_values.v171, meta.ina.index);
        agg_value_172.read(hdr.ina_values.v172, meta.ina.index);
        agg_value_173.read(hdr.ina_values.v173, meta.ina.index);
        agg_value_174.read(hdr.ina_values.v174, meta.ina.index);
        agg_value_175.read(hdr.ina_values.v175, meta.ina.index);
        agg_value_176.read(hdr.ina_values.v176, meta.ina.index);
        agg_value_177.read(hdr.ina_values.v177, meta.ina.index);
        agg_value_178.read(hdr.ina_values.v178, meta.ina.index);
        agg_value_179.read(hdr.ina_values.v179, meta.ina.index);
        agg_value_180.read(hdr.ina_values.v180, meta.ina.index);
        agg_value_181.read(hdr.ina_values.v181, meta.ina.index);
        agg_value_182.read(hdr.ina_values.v182, meta.ina.index);
        agg_value_183.read(hdr.ina_values.v183, meta.ina.index);
        agg_value_184.read(hdr.ina_values.v184, meta.ina.index);
        agg_value_185.read(hdr.ina_values.v185, meta.ina.index);
        agg_value_186.read(hdr.ina_values.v186, meta.ina.index);
        agg_value_187.read(hdr.ina_values.v187, meta.ina.index);
        agg_value_188.read(hdr.ina_values.v188, meta.ina.index);
        agg_value_189.read(hdr.ina_values.v189, meta.ina.index);
        agg_value_190.read(hdr.ina_values.v190, meta.ina.index);
        agg_value_191.read(hdr.ina_values.v191, meta.ina.index);
        agg_value_192.read(hdr.ina_values.v192, meta.ina.index);
        agg_value_193.read(hdr.ina_values.v193, meta.ina.index);
        agg_value_194.read(hdr.ina_values.v194, meta.ina.index);
        agg_value_195.read(hdr.ina_values.v195, meta.ina.index);
        agg_value_196.read(hdr.ina_values.v196, meta.ina.index);
        agg_value_197.read(hdr.ina_values.v197, meta.ina.index);
        agg_value_198.read(hdr.ina_values.v198, meta.ina.index);
        agg_value_199.read(hdr.ina_values.v199, meta.ina.index);
        agg_value_200.read(hdr.ina_values.v200, meta.ina.index);
        agg_value_201.read(hdr.ina_values.v201, meta.ina.index);
        agg_value_202.read(hdr.ina_values.v202, meta.ina.index);
        agg_value_203.read(hdr.ina_values.v203, meta.ina.index);
        agg_value_204.read(hdr.ina_values.v204, meta.ina.index);
        agg_value_205.read(hdr.ina_values.v205, meta.ina.index);
        agg_value_206.read(hdr.ina_values.v206, meta.ina.index);
        agg_value_207.read(hdr.ina_values.v207, meta.ina.index);
        agg_value_208.read(hdr.ina_values.v208, meta.ina.index);
        agg_value_209.read(hdr.ina_values.v209, meta.ina.index);
        agg_value_210.read(hdr.ina_values.v210, meta.ina.index);
        agg_value_211.read(hdr.ina_values.v211, meta.ina.index);
        agg_value_212.read(hdr.ina_values.v212, meta.ina.index);
        agg_value_213.read(hdr.ina_values.v213, meta.ina.index);
        agg_value_214.read(hdr.ina_values.v214, meta.ina.index);
        agg_value_215.read(hdr.ina_values.v215, meta.ina.index);
        agg_value_216.read(hdr.ina_values.v216, meta.ina.index);
        agg_value_217.read(hdr.ina_values.v217, meta.ina.index);
        agg_value_218.read(hdr.ina_values.v218, meta.ina.index);
        agg_value_219.read(hdr.ina_values.v219, meta.ina.index);
        agg_value_220.read(hdr.ina_values.v220, meta.ina.index);
        agg_value_221.read(hdr.ina_values.v221, meta.ina.index);
        agg_value_222.read(hdr.ina_values.v222, meta.ina.index);
        agg_value_223.read(hdr.ina_values.v223, meta.ina.index);
        agg_value_224.read(hdr.ina_values.v224, meta.ina.index);
        agg_value_225.read(hdr.ina_values.v225, meta.ina.index);
        agg_value_226.read(hdr.ina_values.v226, meta.ina.index);
        agg_value_227.read(hdr.ina_values.v227, meta.ina.index);
        agg_value_228.read(hdr.ina_values.v228, meta.ina.index);
        agg_value_229.read(hdr.ina_values.v229, meta.ina.index);
        agg_value_230.read(hdr.ina_values.v230, meta.ina.index);
        agg_value_231.read(hdr.ina_values.v231, meta.ina.index);
        agg_value_232.read(hdr.ina_values.v232, meta.ina.index);
        agg_value_233.read(hdr.ina_values.v233, meta.ina.index);
        agg_value_234.read(hdr.ina_values.v234, meta.ina.index);
        agg_value_235.read(hdr.ina_values.v235, meta.ina.index);
        agg_value_236.read(hdr.ina_values.v236, meta.ina.index);
        agg_value_237.read(hdr.ina_values.v237, meta.ina.index);
        agg_value_238.read(hdr.ina_values.v238, meta.ina.index);
        agg_value_239.read(hdr.ina_values.v239, meta.ina.index);
        agg_value_240.read(hdr.ina_values.v240, meta.ina.index);
        agg_value_241.read(hdr.ina_values.v241, meta.ina.index);
        agg_value_242.read(hdr.ina_values.v242, meta.ina.index);
        agg_value_243.read(hdr.ina_values.v243, meta.ina.index);
        agg_value_244.read(hdr.ina_values.v244, meta.ina.index);
        agg_value_245.read(hdr.ina_values.v245, meta.ina.index);
        agg_value_246.read(hdr.ina_values.v246, meta.ina.index);
        agg_value_247.read(hdr.ina_values.v247, meta.ina.index);
        agg_value_248.read(hdr.ina_values.v248, meta.ina.index);
        agg_value_249.read(hdr.ina_values.v249, meta.ina.index);
        agg_value_250.read(hdr.ina_values.v250, meta.ina.index);
        agg_value_251.read(hdr.ina_values.v251, meta.ina.index);
        agg_value_252.read(hdr.ina_values.v252, meta.ina.index);
        agg_value_253.read(hdr.ina_values.v253, meta.ina.index);
        agg_value_254.read(hdr.ina_values.v254, meta.ina.index);
        agg_value_255.read(hdr.ina_values.v255, meta.ina.index);
#endif
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
#if INA_VALUES > 64
        agg_value_64.write(meta.ina.index, 0);
        agg_value_65.write(meta.ina.index, 0);
        agg_value_66.write(meta.ina.index, 0);
        agg_value_67.write(meta.ina.index, 0);
        agg_value_68.write(meta.ina.index, 0);
        agg_value_69.write(meta.ina.index, 0);
        agg_value_70.write(meta.ina.index, 0);
        agg_value_71.write(meta.ina.index, 0);
        agg_value_72.write(meta.ina.index, 0);
        agg_value_73.write(meta.ina.index, 0);
        agg_value_74.write(meta.ina.index, 0);
        agg_value_75.write(meta.ina.index, 0);
        agg_value_76.write(meta.ina.index, 0);
        agg_value_77.write(meta.ina.index, 0);
        agg_value_78.write(meta.ina.index, 0);
        agg_value_79.write(meta.ina.index, 0);
        agg_value_80.write(meta.ina.index, 0);
        agg_value_81.write(meta.ina.index, 0);
        agg_value_82.write(meta.ina.index, 0);
        agg_value_83.write(meta.ina.index, 0);
        agg_value_84.write(meta.ina.index, 0);
        agg_value_85.write(meta.ina.index, 0);
        agg_value_86.write(meta.ina.index, 0);
        agg_value_87.write(meta.ina.index, 0);
        agg_value_88.write(meta.ina.index, 0);
        agg_value_89.write(meta.ina.index, 0);
        agg_value_90.write(meta.ina.index, 0);
        agg_value_91.write(meta.ina.index, 0);
        agg_value_92.write(meta.ina.index, 0);
        agg_value_93.write(meta.ina.index, 0);
        agg_value_94.write(meta.ina.index, 0);
        agg_value_95.write(meta.ina.index, 0);
        agg_value_96.write(meta.ina.index, 0);
        agg_value_97.write(meta.ina.index, 0);
        agg_value_98.write(meta.ina.index, 0);
        agg_value_99.write(meta.ina.index, 0);
        agg_value_100.write(meta.ina.index, 0);
        agg_value_101.write(meta.ina.index, 0);
        agg_value_102.write(meta.ina.index, 0);
        agg_value_103.write(meta.ina.index, 0);
        agg_value_104.write(meta.ina.index, 0);
        agg_value_105.write(meta.ina.index, 0);
        agg_value_106.write(meta.ina.index, 0);
        agg_value_107.write(meta.ina.index, 0);
        agg_value_108.write(meta.ina.index, 0);
        agg_value_109.write(meta.ina.index, 0);
        agg_value_110.write(meta.ina.index, 0);
        agg_value_111.write(meta.ina.index, 0);
        agg_value_112.write(meta.ina.index, 0);
        agg_value_113.write(meta.ina.index, 0);
        agg_value_114.write(meta.ina.index, 0);
        agg_value_115.write(meta.ina.index, 0);
        agg_value_116.write(meta.ina.index, 0);
        agg_value_117.write(meta.ina.index, 0);
        agg_value_118.write(meta.ina.index, 0);
        agg_value_119.write(meta.ina.index, 0);
        agg_value_120.write(meta.ina.index, 0);
        agg_value_121.write(meta.ina.index, 0);
        agg_value_122.write(meta.ina.index, 0);
        agg_value_123.write(meta.ina.index, 0);
        agg_value_124.write(meta.ina.index, 0);
        agg_value_125.write(meta.ina.index, 0);
        agg_value_126.write(meta.ina.index, 0);
        agg_value_127.write(meta.ina.index, 0);
#endif
#if INA_VALUES > 128
        agg_value_128.write(meta.ina.index, 0);
        agg_value_129.write(meta.ina.index, 0);
        agg_value_130.write(meta.ina.index, 0);
        agg_value_131.write(meta.ina.index, 0);
        agg_value_132.write(meta.ina.index, 0);
        agg_value_133.write(meta.ina.index, 0);
        agg_value_134.write(meta.ina.index, 0);
        agg_value_135.write(meta.ina.index, 0);
        agg_value_136.write(meta.ina.index, 0);
        agg_value_137.write(meta.ina.index, 0);
        agg_value_138.write(meta.ina.index, 0);
        agg_value_139.write(meta.ina.index, 0);
        agg_value_140.write(meta.ina.index, 0);
        agg_value_141.write(meta.ina.index, 0);
        agg_value_142.write(meta.ina.index, 0);
        agg_value_143.write(meta.ina.index, 0);
        agg_value_144.write(meta.ina.index, 0);
        agg_value_145.write(meta.ina.index, 0);
        agg_value_146.write(meta.ina.index, 0);
        agg_value_147.write(meta.ina.index, 0);
        agg_value_148.write(meta.ina.index, 0);
        agg_value_149.write(meta.ina.index, 0);
        agg_value_150.write(meta.ina.index, 0);
        agg_value_151.write(meta.ina.index, 0);
        agg_value_152.write(meta.ina.index, 0);
        agg_value_153.write(meta.ina.index, 0);
        agg_value_154.write(meta.ina.index, 0);
        agg_value_155.write(meta.ina.index, 0);
        agg_value_156.write(meta.ina.index, 0);
        agg_value_157.write(meta.ina.index, 0);
        agg_value_158.write(meta.ina.index, 0);
        agg_value_159.write(meta.ina.index, 0);
        agg_value_160.write(meta.ina.index, 0);
        agg_value_161.write(meta.ina.index, 0);
        agg_value_162.write(meta.ina.index, 0);
        agg_value_163.write(meta.ina.index, 0);
        agg_value_164.write(meta.ina.index, 0);
        agg_value_165.write(meta.ina.index, 0);
        agg_value_166.write(meta.ina.index, 0);
        agg_value_167.write(meta.ina.index, 0);
        agg_value_168.write(meta.ina.index, 0);
        agg_value_169.write(meta.ina.index, 0);
        agg_value_170.write(meta.ina.index, 0);
        agg_value_171.write(meta.ina.index, 0);
        agg_value_172.write(meta.ina.index, 0);
        agg_value_173.write(meta.ina.index, 0);
        agg_value_174.write(meta.ina.index, 0);
        agg_value_175.write(meta.ina.index, 0);
        agg_value_176.write(meta.ina.index, 0);
        agg_value_177.write(meta.ina.index, 0);
        agg_value_178.write(meta.ina.index, 0);
        agg_value_179.write(meta.ina.index, 0);
        agg_value_180.write(meta.ina.index, 0);
        agg_value_181.write(meta.ina.index, 0);
        agg_value_182.write(meta.ina.index, 0);
        agg_value_183.write(meta.ina.index, 0);
        agg_value_184.write(meta.ina.index, 0);
        agg_value_185.write(meta.ina.index, 0);
        agg_value_186.write(meta.ina.index, 0);
        agg_value_187.write(meta.ina.index, 0);
        agg_value_188.write(meta.ina.index, 0);
        agg_value_189.write(meta.ina.index, 0);
        agg_value_190.write(meta.ina.index, 0);
        agg_value_191.write(meta.ina.index, 0);
        agg_value_192.write(meta.ina.index, 0);
        agg_value_193.write(meta.ina.index, 0);
        agg_value_194.write(meta.ina.index, 0);
        agg_value_195.write(meta.ina.index, 0);
        agg_value_196.write(meta.ina.index, 0);
        agg_value_197.write(meta.ina.index, 0);
        agg_value_198.write(meta.ina.index, 0);
        agg_value_199.write(meta.ina.index, 0);
        agg_value_200.write(meta.ina.index, 0);
        agg_value_201.write(meta.ina.index, 0);
        agg_value_202.write(meta.ina.index, 0);
        agg_value_203.write(meta.ina.index, 0);
        agg_value_204.write(meta.ina.index, 0);
        agg_value_205.write(meta.ina.index, 0);
        agg_value_206.write(meta.ina.index, 0);
        agg_value_207.write(meta.ina.index, 0);
        agg_value_208.write(meta.ina.index, 0);
        agg_value_209.write(meta.ina.index, 0);
        agg_value_210.write(meta.ina.index, 0);
        agg_value_211.write(meta.ina.index, 0);
        agg_value_212.write(meta.ina.index, 0);
        agg_value_213.write(meta.ina.index, 0);
        agg_value_214.write(meta.ina.index, 0);
        agg_value_215.write(meta.ina.index, 0);
        agg_value_216.write(meta.ina.index, 0);
        agg_value_217.write(meta.ina.index, 0);
        agg_value_218.write(meta.ina.index, 0);
        agg_value_219.write(meta.ina.index, 0);
        agg_value_220.write(meta.ina.index, 0);
        agg_value_221.write(meta.ina.index, 0);
        agg_value_222.write(meta.ina.index, 0);
        agg_value_223.write(meta.ina.index, 0);
        agg_value_224.write(meta.ina.index, 0);
        agg_value_225.write(meta.ina.index, 0);
        agg_value_226.write(meta.ina.index, 0);
        agg_value_227.write(meta.ina.index, 0);
        agg_value_228.write(meta.ina.index, 0);
        agg_value_229.write(meta.ina.index, 0);
        agg_value_230.write(meta.ina.index, 0);
        agg_value_231.write(meta.ina.index, 0);
        agg_value_232.write(meta.ina.index, 0);
        agg_value_233.write(meta.ina.index, 0);
        agg_value_234.write(meta.ina.index, 0);
        agg_value_235.write(meta.ina.index, 0);
        agg_value_236.write(meta.ina.index, 0);
        agg_value_237.write(meta.ina.index, 0);
        agg_value_238.write(meta.ina.index, 0);
        agg_value_239.write(meta.ina.index, 0);
        agg_value_240.write(meta.ina.index, 0);
        agg_value_241.write(meta.ina.index, 0);
        agg_value_242.write(meta.ina.index, 0);
        agg_value_243.write(meta.ina.index, 0);
        agg_value_244.write(meta.ina.index, 0);
        agg_value_245.write(meta.ina.index, 0);
        agg_value_246.write(meta.ina.index, 0);
        agg_value_247.write(meta.ina.index, 0);
        agg_value_248.write(meta.ina.index, 0);
        agg_value_249.write(meta.ina.index, 0);
        agg_value_250.write(meta.ina.index, 0);
        agg_value_251.write(meta.ina.index, 0);
        agg_value_252.write(meta.ina.index, 0);
        agg_value_253.write(meta.ina.index, 0);
        agg_value_254.write(meta.ina.index, 0);
        agg_value_255.write(meta.ina.index, 0);
#endif
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
                } else if (hdr.ina.msg_type == INA_GRAD && hdr.udp.length != INA_GRAD_UDP_LEN) {
                    /* not this program's values per packet: summing a prefix (or a
                     * header whose values failed to parse) would be wrong; its worker
                     * times out and resends to the PS, which sums it whole */
                    consume(INA_DROP_WRONG_SIZE);
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
