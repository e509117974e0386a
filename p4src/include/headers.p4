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

/* In-network aggregation (technique 1): docs/ina.md is the wire spec. */
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
    bit<32> v00;
    bit<32> v01;
    bit<32> v02;
    bit<32> v03;
    bit<32> v04;
    bit<32> v05;
    bit<32> v06;
    bit<32> v07;
    bit<32> v08;
    bit<32> v09;
    bit<32> v10;
    bit<32> v11;
    bit<32> v12;
    bit<32> v13;
    bit<32> v14;
    bit<32> v15;
    bit<32> v16;
    bit<32> v17;
    bit<32> v18;
    bit<32> v19;
    bit<32> v20;
    bit<32> v21;
    bit<32> v22;
    bit<32> v23;
    bit<32> v24;
    bit<32> v25;
    bit<32> v26;
    bit<32> v27;
    bit<32> v28;
    bit<32> v29;
    bit<32> v30;
    bit<32> v31;
    bit<32> v32;
    bit<32> v33;
    bit<32> v34;
    bit<32> v35;
    bit<32> v36;
    bit<32> v37;
    bit<32> v38;
    bit<32> v39;
    bit<32> v40;
    bit<32> v41;
    bit<32> v42;
    bit<32> v43;
    bit<32> v44;
    bit<32> v45;
    bit<32> v46;
    bit<32> v47;
    bit<32> v48;
    bit<32> v49;
    bit<32> v50;
    bit<32> v51;
    bit<32> v52;
    bit<32> v53;
    bit<32> v54;
    bit<32> v55;
    bit<32> v56;
    bit<32> v57;
    bit<32> v58;
    bit<32> v59;
    bit<32> v60;
    bit<32> v61;
    bit<32> v62;
    bit<32> v63;
#if INA_VALUES > 64
    bit<32> v64;
    bit<32> v65;
    bit<32> v66;
    bit<32> v67;
    bit<32> v68;
    bit<32> v69;
    bit<32> v70;
    bit<32> v71;
    bit<32> v72;
    bit<32> v73;
    bit<32> v74;
    bit<32> v75;
    bit<32> v76;
    bit<32> v77;
    bit<32> v78;
    bit<32> v79;
    bit<32> v80;
    bit<32> v81;
    bit<32> v82;
    bit<32> v83;
    bit<32> v84;
    bit<32> v85;
    bit<32> v86;
    bit<32> v87;
    bit<32> v88;
    bit<32> v89;
    bit<32> v90;
    bit<32> v91;
    bit<32> v92;
    bit<32> v93;
    bit<32> v94;
    bit<32> v95;
    bit<32> v96;
    bit<32> v97;
    bit<32> v98;
    bit<32> v99;
    bit<32> v100;
    bit<32> v101;
    bit<32> v102;
    bit<32> v103;
    bit<32> v104;
    bit<32> v105;
    bit<32> v106;
    bit<32> v107;
    bit<32> v108;
    bit<32> v109;
    bit<32> v110;
    bit<32> v111;
    bit<32> v112;
    bit<32> v113;
    bit<32> v114;
    bit<32> v115;
    bit<32> v116;
    bit<32> v117;
    bit<32> v118;
    bit<32> v119;
    bit<32> v120;
    bit<32> v121;
    bit<32> v122;
    bit<32> v123;
    bit<32> v124;
    bit<32> v125;
    bit<32> v126;
    bit<32> v127;
#endif
#if INA_VALUES > 128
    bit<32> v128;
    bit<32> v129;
    bit<32> v130;
    bit<32> v131;
    bit<32> v132;
    bit<32> v133;
    bit<32> v134;
    bit<32> v135;
    bit<32> v136;
    bit<32> v137;
    bit<32> v138;
    bit<32> v139;
    bit<32> v140;
    bit<32> v141;
    bit<32> v142;
    bit<32> v143;
    bit<32> v144;
    bit<32> v145;
    bit<32> v146;
    bit<32> v147;
    bit<32> v148;
    bit<32> v149;
    bit<32> v150;
    bit<32> v151;
    bit<32> v152;
    bit<32> v153;
    bit<32> v154;
    bit<32> v155;
    bit<32> v156;
    bit<32> v157;
    bit<32> v158;
    bit<32> v159;
    bit<32> v160;
    bit<32> v161;
    bit<32> v162;
    bit<32> v163;
    bit<32> v164;
    bit<32> v165;
    bit<32> v166;
    bit<32> v167;
    bit<32> v168;
    bit<32> v169;
    bit<32> v170;
    bit<32> v171;
    bit<32> v172;
    bit<32> v173;
    bit<32> v174;
    bit<32> v175;
    bit<32> v176;
    bit<32> v177;
    bit<32> v178;
    bit<32> v179;
    bit<32> v180;
    bit<32> v181;
    bit<32> v182;
    bit<32> v183;
    bit<32> v184;
    bit<32> v185;
    bit<32> v186;
    bit<32> v187;
    bit<32> v188;
    bit<32> v189;
    bit<32> v190;
    bit<32> v191;
    bit<32> v192;
    bit<32> v193;
    bit<32> v194;
    bit<32> v195;
    bit<32> v196;
    bit<32> v197;
    bit<32> v198;
    bit<32> v199;
    bit<32> v200;
    bit<32> v201;
    bit<32> v202;
    bit<32> v203;
    bit<32> v204;
    bit<32> v205;
    bit<32> v206;
    bit<32> v207;
    bit<32> v208;
    bit<32> v209;
    bit<32> v210;
    bit<32> v211;
    bit<32> v212;
    bit<32> v213;
    bit<32> v214;
    bit<32> v215;
    bit<32> v216;
    bit<32> v217;
    bit<32> v218;
    bit<32> v219;
    bit<32> v220;
    bit<32> v221;
    bit<32> v222;
    bit<32> v223;
    bit<32> v224;
    bit<32> v225;
    bit<32> v226;
    bit<32> v227;
    bit<32> v228;
    bit<32> v229;
    bit<32> v230;
    bit<32> v231;
    bit<32> v232;
    bit<32> v233;
    bit<32> v234;
    bit<32> v235;
    bit<32> v236;
    bit<32> v237;
    bit<32> v238;
    bit<32> v239;
    bit<32> v240;
    bit<32> v241;
    bit<32> v242;
    bit<32> v243;
    bit<32> v244;
    bit<32> v245;
    bit<32> v246;
    bit<32> v247;
    bit<32> v248;
    bit<32> v249;
    bit<32> v250;
    bit<32> v251;
    bit<32> v252;
    bit<32> v253;
    bit<32> v254;
    bit<32> v255;
#endif
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
    /* Link emulation (egress) */
    bit<32> loss_threshold;
    bit<32> loss_random;
    /* In-network aggregation (aggregator.p4) */
    ina_metadata_t ina;
}

#endif  /* _GRADNET_HEADERS_P4_ */
