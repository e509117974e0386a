/* gradnet: the smart NIC's gradient accumulator (technique 5, docs/token.md;
 * seed 004 s137, s160).
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
 * members cannot exceed int32 (hosts/fixedpoint.py refuses otherwise).
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
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v000;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v001;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v002;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v003;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v004;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v005;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v006;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v007;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v008;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v009;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v010;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v011;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v012;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v013;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v014;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v015;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v016;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v017;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v018;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v019;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v020;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v021;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v022;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v023;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v024;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v025;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v026;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v027;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v028;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v029;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v030;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v031;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v032;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v033;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v034;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v035;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v036;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v037;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v038;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v039;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v040;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v041;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v042;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v043;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v044;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v045;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v046;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v047;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v048;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v049;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v050;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v051;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v052;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v053;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v054;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v055;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v056;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v057;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v058;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v059;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v060;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v061;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v062;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v063;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v064;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v065;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v066;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v067;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v068;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v069;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v070;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v071;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v072;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v073;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v074;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v075;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v076;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v077;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v078;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v079;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v080;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v081;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v082;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v083;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v084;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v085;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v086;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v087;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v088;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v089;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v090;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v091;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v092;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v093;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v094;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v095;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v096;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v097;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v098;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v099;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v100;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v101;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v102;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v103;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v104;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v105;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v106;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v107;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v108;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v109;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v110;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v111;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v112;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v113;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v114;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v115;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v116;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v117;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v118;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v119;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v120;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v121;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v122;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v123;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v124;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v125;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v126;
    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v127;
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
        acc_v000.write(meta.tk.slot, hdr.values.v000);
        acc_v001.write(meta.tk.slot, hdr.values.v001);
        acc_v002.write(meta.tk.slot, hdr.values.v002);
        acc_v003.write(meta.tk.slot, hdr.values.v003);
        acc_v004.write(meta.tk.slot, hdr.values.v004);
        acc_v005.write(meta.tk.slot, hdr.values.v005);
        acc_v006.write(meta.tk.slot, hdr.values.v006);
        acc_v007.write(meta.tk.slot, hdr.values.v007);
        acc_v008.write(meta.tk.slot, hdr.values.v008);
        acc_v009.write(meta.tk.slot, hdr.values.v009);
        acc_v010.write(meta.tk.slot, hdr.values.v010);
        acc_v011.write(meta.tk.slot, hdr.values.v011);
        acc_v012.write(meta.tk.slot, hdr.values.v012);
        acc_v013.write(meta.tk.slot, hdr.values.v013);
        acc_v014.write(meta.tk.slot, hdr.values.v014);
        acc_v015.write(meta.tk.slot, hdr.values.v015);
        acc_v016.write(meta.tk.slot, hdr.values.v016);
        acc_v017.write(meta.tk.slot, hdr.values.v017);
        acc_v018.write(meta.tk.slot, hdr.values.v018);
        acc_v019.write(meta.tk.slot, hdr.values.v019);
        acc_v020.write(meta.tk.slot, hdr.values.v020);
        acc_v021.write(meta.tk.slot, hdr.values.v021);
        acc_v022.write(meta.tk.slot, hdr.values.v022);
        acc_v023.write(meta.tk.slot, hdr.values.v023);
        acc_v024.write(meta.tk.slot, hdr.values.v024);
        acc_v025.write(meta.tk.slot, hdr.values.v025);
        acc_v026.write(meta.tk.slot, hdr.values.v026);
        acc_v027.write(meta.tk.slot, hdr.values.v027);
        acc_v028.write(meta.tk.slot, hdr.values.v028);
        acc_v029.write(meta.tk.slot, hdr.values.v029);
        acc_v030.write(meta.tk.slot, hdr.values.v030);
        acc_v031.write(meta.tk.slot, hdr.values.v031);
        acc_v032.write(meta.tk.slot, hdr.values.v032);
        acc_v033.write(meta.tk.slot, hdr.values.v033);
        acc_v034.write(meta.tk.slot, hdr.values.v034);
        acc_v035.write(meta.tk.slot, hdr.values.v035);
        acc_v036.write(meta.tk.slot, hdr.values.v036);
        acc_v037.write(meta.tk.slot, hdr.values.v037);
        acc_v038.write(meta.tk.slot, hdr.values.v038);
        acc_v039.write(meta.tk.slot, hdr.values.v039);
        acc_v040.write(meta.tk.slot, hdr.values.v040);
        acc_v041.write(meta.tk.slot, hdr.values.v041);
        acc_v042.write(meta.tk.slot, hdr.values.v042);
        acc_v043.write(meta.tk.slot, hdr.values.v043);
        acc_v044.write(meta.tk.slot, hdr.values.v044);
        acc_v045.write(meta.tk.slot, hdr.values.v045);
        acc_v046.write(meta.tk.slot, hdr.values.v046);
        acc_v047.write(meta.tk.slot, hdr.values.v047);
        acc_v048.write(meta.tk.slot, hdr.values.v048);
        acc_v049.write(meta.tk.slot, hdr.values.v049);
        acc_v050.write(meta.tk.slot, hdr.values.v050);
        acc_v051.write(meta.tk.slot, hdr.values.v051);
        acc_v052.write(meta.tk.slot, hdr.values.v052);
        acc_v053.write(meta.tk.slot, hdr.values.v053);
        acc_v054.write(meta.tk.slot, hdr.values.v054);
        acc_v055.write(meta.tk.slot, hdr.values.v055);
        acc_v056.write(meta.tk.slot, hdr.values.v056);
        acc_v057.write(meta.tk.slot, hdr.values.v057);
        acc_v058.write(meta.tk.slot, hdr.values.v058);
        acc_v059.write(meta.tk.slot, hdr.values.v059);
        acc_v060.write(meta.tk.slot, hdr.values.v060);
        acc_v061.write(meta.tk.slot, hdr.values.v061);
        acc_v062.write(meta.tk.slot, hdr.values.v062);
        acc_v063.write(meta.tk.slot, hdr.values.v063);
        acc_v064.write(meta.tk.slot, hdr.values.v064);
        acc_v065.write(meta.tk.slot, hdr.values.v065);
        acc_v066.write(meta.tk.slot, hdr.values.v066);
        acc_v067.write(meta.tk.slot, hdr.values.v067);
        acc_v068.write(meta.tk.slot, hdr.values.v068);
        acc_v069.write(meta.tk.slot, hdr.values.v069);
        acc_v070.write(meta.tk.slot, hdr.values.v070);
        acc_v071.write(meta.tk.slot, hdr.values.v071);
        acc_v072.write(meta.tk.slot, hdr.values.v072);
        acc_v073.write(meta.tk.slot, hdr.values.v073);
        acc_v074.write(meta.tk.slot, hdr.values.v074);
        acc_v075.write(meta.tk.slot, hdr.values.v075);
        acc_v076.write(meta.tk.slot, hdr.values.v076);
        acc_v077.write(meta.tk.slot, hdr.values.v077);
        acc_v078.write(meta.tk.slot, hdr.values.v078);
        acc_v079.write(meta.tk.slot, hdr.values.v079);
        acc_v080.write(meta.tk.slot, hdr.values.v080);
        acc_v081.write(meta.tk.slot, hdr.values.v081);
        acc_v082.write(meta.tk.slot, hdr.values.v082);
        acc_v083.write(meta.tk.slot, hdr.values.v083);
        acc_v084.write(meta.tk.slot, hdr.values.v084);
        acc_v085.write(meta.tk.slot, hdr.values.v085);
        acc_v086.write(meta.tk.slot, hdr.values.v086);
        acc_v087.write(meta.tk.slot, hdr.values.v087);
        acc_v088.write(meta.tk.slot, hdr.values.v088);
        acc_v089.write(meta.tk.slot, hdr.values.v089);
        acc_v090.write(meta.tk.slot, hdr.values.v090);
        acc_v091.write(meta.tk.slot, hdr.values.v091);
        acc_v092.write(meta.tk.slot, hdr.values.v092);
        acc_v093.write(meta.tk.slot, hdr.values.v093);
        acc_v094.write(meta.tk.slot, hdr.values.v094);
        acc_v095.write(meta.tk.slot, hdr.values.v095);
        acc_v096.write(meta.tk.slot, hdr.values.v096);
        acc_v097.write(meta.tk.slot, hdr.values.v097);
        acc_v098.write(meta.tk.slot, hdr.values.v098);
        acc_v099.write(meta.tk.slot, hdr.values.v099);
        acc_v100.write(meta.tk.slot, hdr.values.v100);
        acc_v101.write(meta.tk.slot, hdr.values.v101);
        acc_v102.write(meta.tk.slot, hdr.values.v102);
        acc_v103.write(meta.tk.slot, hdr.values.v103);
        acc_v104.write(meta.tk.slot, hdr.values.v104);
        acc_v105.write(meta.tk.slot, hdr.values.v105);
        acc_v106.write(meta.tk.slot, hdr.values.v106);
        acc_v107.write(meta.tk.slot, hdr.values.v107);
        acc_v108.write(meta.tk.slot, hdr.values.v108);
        acc_v109.write(meta.tk.slot, hdr.values.v109);
        acc_v110.write(meta.tk.slot, hdr.values.v110);
        acc_v111.write(meta.tk.slot, hdr.values.v111);
        acc_v112.write(meta.tk.slot, hdr.values.v112);
        acc_v113.write(meta.tk.slot, hdr.values.v113);
        acc_v114.write(meta.tk.slot, hdr.values.v114);
        acc_v115.write(meta.tk.slot, hdr.values.v115);
        acc_v116.write(meta.tk.slot, hdr.values.v116);
        acc_v117.write(meta.tk.slot, hdr.values.v117);
        acc_v118.write(meta.tk.slot, hdr.values.v118);
        acc_v119.write(meta.tk.slot, hdr.values.v119);
        acc_v120.write(meta.tk.slot, hdr.values.v120);
        acc_v121.write(meta.tk.slot, hdr.values.v121);
        acc_v122.write(meta.tk.slot, hdr.values.v122);
        acc_v123.write(meta.tk.slot, hdr.values.v123);
        acc_v124.write(meta.tk.slot, hdr.values.v124);
        acc_v125.write(meta.tk.slot, hdr.values.v125);
        acc_v126.write(meta.tk.slot, hdr.values.v126);
        acc_v127.write(meta.tk.slot, hdr.values.v127);
        acc_batch.write(meta.tk.slot, hdr.token.batch);
        acc_bitmap.write(meta.tk.slot, meta.tk.sender_bit);
        acc_events.count(TOKEN_ACC_EV_STARTED);
        acc_events.count(TOKEN_ACC_EV_ADDED);
    }

    /* Add the frame's values; the frame itself keeps its own values. */
    action add_to_slot() {
        acc_v000.read(v, meta.tk.slot);
        acc_v000.write(meta.tk.slot, v + hdr.values.v000);
        acc_v001.read(v, meta.tk.slot);
        acc_v001.write(meta.tk.slot, v + hdr.values.v001);
        acc_v002.read(v, meta.tk.slot);
        acc_v002.write(meta.tk.slot, v + hdr.values.v002);
        acc_v003.read(v, meta.tk.slot);
        acc_v003.write(meta.tk.slot, v + hdr.values.v003);
        acc_v004.read(v, meta.tk.slot);
        acc_v004.write(meta.tk.slot, v + hdr.values.v004);
        acc_v005.read(v, meta.tk.slot);
        acc_v005.write(meta.tk.slot, v + hdr.values.v005);
        acc_v006.read(v, meta.tk.slot);
        acc_v006.write(meta.tk.slot, v + hdr.values.v006);
        acc_v007.read(v, meta.tk.slot);
        acc_v007.write(meta.tk.slot, v + hdr.values.v007);
        acc_v008.read(v, meta.tk.slot);
        acc_v008.write(meta.tk.slot, v + hdr.values.v008);
        acc_v009.read(v, meta.tk.slot);
        acc_v009.write(meta.tk.slot, v + hdr.values.v009);
        acc_v010.read(v, meta.tk.slot);
        acc_v010.write(meta.tk.slot, v + hdr.values.v010);
        acc_v011.read(v, meta.tk.slot);
        acc_v011.write(meta.tk.slot, v + hdr.values.v011);
        acc_v012.read(v, meta.tk.slot);
        acc_v012.write(meta.tk.slot, v + hdr.values.v012);
        acc_v013.read(v, meta.tk.slot);
        acc_v013.write(meta.tk.slot, v + hdr.values.v013);
        acc_v014.read(v, meta.tk.slot);
        acc_v014.write(meta.tk.slot, v + hdr.values.v014);
        acc_v015.read(v, meta.tk.slot);
        acc_v015.write(meta.tk.slot, v + hdr.values.v015);
        acc_v016.read(v, meta.tk.slot);
        acc_v016.write(meta.tk.slot, v + hdr.values.v016);
        acc_v017.read(v, meta.tk.slot);
        acc_v017.write(meta.tk.slot, v + hdr.values.v017);
        acc_v018.read(v, meta.tk.slot);
        acc_v018.write(meta.tk.slot, v + hdr.values.v018);
        acc_v019.read(v, meta.tk.slot);
        acc_v019.write(meta.tk.slot, v + hdr.values.v019);
        acc_v020.read(v, meta.tk.slot);
        acc_v020.write(meta.tk.slot, v + hdr.values.v020);
        acc_v021.read(v, meta.tk.slot);
        acc_v021.write(meta.tk.slot, v + hdr.values.v021);
        acc_v022.read(v, meta.tk.slot);
        acc_v022.write(meta.tk.slot, v + hdr.values.v022);
        acc_v023.read(v, meta.tk.slot);
        acc_v023.write(meta.tk.slot, v + hdr.values.v023);
        acc_v024.read(v, meta.tk.slot);
        acc_v024.write(meta.tk.slot, v + hdr.values.v024);
        acc_v025.read(v, meta.tk.slot);
        acc_v025.write(meta.tk.slot, v + hdr.values.v025);
        acc_v026.read(v, meta.tk.slot);
        acc_v026.write(meta.tk.slot, v + hdr.values.v026);
        acc_v027.read(v, meta.tk.slot);
        acc_v027.write(meta.tk.slot, v + hdr.values.v027);
        acc_v028.read(v, meta.tk.slot);
        acc_v028.write(meta.tk.slot, v + hdr.values.v028);
        acc_v029.read(v, meta.tk.slot);
        acc_v029.write(meta.tk.slot, v + hdr.values.v029);
        acc_v030.read(v, meta.tk.slot);
        acc_v030.write(meta.tk.slot, v + hdr.values.v030);
        acc_v031.read(v, meta.tk.slot);
        acc_v031.write(meta.tk.slot, v + hdr.values.v031);
        acc_v032.read(v, meta.tk.slot);
        acc_v032.write(meta.tk.slot, v + hdr.values.v032);
        acc_v033.read(v, meta.tk.slot);
        acc_v033.write(meta.tk.slot, v + hdr.values.v033);
        acc_v034.read(v, meta.tk.slot);
        acc_v034.write(meta.tk.slot, v + hdr.values.v034);
        acc_v035.read(v, meta.tk.slot);
        acc_v035.write(meta.tk.slot, v + hdr.values.v035);
        acc_v036.read(v, meta.tk.slot);
        acc_v036.write(meta.tk.slot, v + hdr.values.v036);
        acc_v037.read(v, meta.tk.slot);
        acc_v037.write(meta.tk.slot, v + hdr.values.v037);
        acc_v038.read(v, meta.tk.slot);
        acc_v038.write(meta.tk.slot, v + hdr.values.v038);
        acc_v039.read(v, meta.tk.slot);
        acc_v039.write(meta.tk.slot, v + hdr.values.v039);
        acc_v040.read(v, meta.tk.slot);
        acc_v040.write(meta.tk.slot, v + hdr.values.v040);
        acc_v041.read(v, meta.tk.slot);
        acc_v041.write(meta.tk.slot, v + hdr.values.v041);
        acc_v042.read(v, meta.tk.slot);
        acc_v042.write(meta.tk.slot, v + hdr.values.v042);
        acc_v043.read(v, meta.tk.slot);
        acc_v043.write(meta.tk.slot, v + hdr.values.v043);
        acc_v044.read(v, meta.tk.slot);
        acc_v044.write(meta.tk.slot, v + hdr.values.v044);
        acc_v045.read(v, meta.tk.slot);
        acc_v045.write(meta.tk.slot, v + hdr.values.v045);
        acc_v046.read(v, meta.tk.slot);
        acc_v046.write(meta.tk.slot, v + hdr.values.v046);
        acc_v047.read(v, meta.tk.slot);
        acc_v047.write(meta.tk.slot, v + hdr.values.v047);
        acc_v048.read(v, meta.tk.slot);
        acc_v048.write(meta.tk.slot, v + hdr.values.v048);
        acc_v049.read(v, meta.tk.slot);
        acc_v049.write(meta.tk.slot, v + hdr.values.v049);
        acc_v050.read(v, meta.tk.slot);
        acc_v050.write(meta.tk.slot, v + hdr.values.v050);
        acc_v051.read(v, meta.tk.slot);
        acc_v051.write(meta.tk.slot, v + hdr.values.v051);
        acc_v052.read(v, meta.tk.slot);
        acc_v052.write(meta.tk.slot, v + hdr.values.v052);
        acc_v053.read(v, meta.tk.slot);
        acc_v053.write(meta.tk.slot, v + hdr.values.v053);
        acc_v054.read(v, meta.tk.slot);
        acc_v054.write(meta.tk.slot, v + hdr.values.v054);
        acc_v055.read(v, meta.tk.slot);
        acc_v055.write(meta.tk.slot, v + hdr.values.v055);
        acc_v056.read(v, meta.tk.slot);
        acc_v056.write(meta.tk.slot, v + hdr.values.v056);
        acc_v057.read(v, meta.tk.slot);
        acc_v057.write(meta.tk.slot, v + hdr.values.v057);
        acc_v058.read(v, meta.tk.slot);
        acc_v058.write(meta.tk.slot, v + hdr.values.v058);
        acc_v059.read(v, meta.tk.slot);
        acc_v059.write(meta.tk.slot, v + hdr.values.v059);
        acc_v060.read(v, meta.tk.slot);
        acc_v060.write(meta.tk.slot, v + hdr.values.v060);
        acc_v061.read(v, meta.tk.slot);
        acc_v061.write(meta.tk.slot, v + hdr.values.v061);
        acc_v062.read(v, meta.tk.slot);
        acc_v062.write(meta.tk.slot, v + hdr.values.v062);
        acc_v063.read(v, meta.tk.slot);
        acc_v063.write(meta.tk.slot, v + hdr.values.v063);
        acc_v064.read(v, meta.tk.slot);
        acc_v064.write(meta.tk.slot, v + hdr.values.v064);
        acc_v065.read(v, meta.tk.slot);
        acc_v065.write(meta.tk.slot, v + hdr.values.v065);
        acc_v066.read(v, meta.tk.slot);
        acc_v066.write(meta.tk.slot, v + hdr.values.v066);
        acc_v067.read(v, meta.tk.slot);
        acc_v067.write(meta.tk.slot, v + hdr.values.v067);
        acc_v068.read(v, meta.tk.slot);
        acc_v068.write(meta.tk.slot, v + hdr.values.v068);
        acc_v069.read(v, meta.tk.slot);
        acc_v069.write(meta.tk.slot, v + hdr.values.v069);
        acc_v070.read(v, meta.tk.slot);
        acc_v070.write(meta.tk.slot, v + hdr.values.v070);
        acc_v071.read(v, meta.tk.slot);
        acc_v071.write(meta.tk.slot, v + hdr.values.v071);
        acc_v072.read(v, meta.tk.slot);
        acc_v072.write(meta.tk.slot, v + hdr.values.v072);
        acc_v073.read(v, meta.tk.slot);
        acc_v073.write(meta.tk.slot, v + hdr.values.v073);
        acc_v074.read(v, meta.tk.slot);
        acc_v074.write(meta.tk.slot, v + hdr.values.v074);
        acc_v075.read(v, meta.tk.slot);
        acc_v075.write(meta.tk.slot, v + hdr.values.v075);
        acc_v076.read(v, meta.tk.slot);
        acc_v076.write(meta.tk.slot, v + hdr.values.v076);
        acc_v077.read(v, meta.tk.slot);
        acc_v077.write(meta.tk.slot, v + hdr.values.v077);
        acc_v078.read(v, meta.tk.slot);
        acc_v078.write(meta.tk.slot, v + hdr.values.v078);
        acc_v079.read(v, meta.tk.slot);
        acc_v079.write(meta.tk.slot, v + hdr.values.v079);
        acc_v080.read(v, meta.tk.slot);
        acc_v080.write(meta.tk.slot, v + hdr.values.v080);
        acc_v081.read(v, meta.tk.slot);
        acc_v081.write(meta.tk.slot, v + hdr.values.v081);
        acc_v082.read(v, meta.tk.slot);
        acc_v082.write(meta.tk.slot, v + hdr.values.v082);
        acc_v083.read(v, meta.tk.slot);
        acc_v083.write(meta.tk.slot, v + hdr.values.v083);
        acc_v084.read(v, meta.tk.slot);
        acc_v084.write(meta.tk.slot, v + hdr.values.v084);
        acc_v085.read(v, meta.tk.slot);
        acc_v085.write(meta.tk.slot, v + hdr.values.v085);
        acc_v086.read(v, meta.tk.slot);
        acc_v086.write(meta.tk.slot, v + hdr.values.v086);
        acc_v087.read(v, meta.tk.slot);
        acc_v087.write(meta.tk.slot, v + hdr.values.v087);
        acc_v088.read(v, meta.tk.slot);
        acc_v088.write(meta.tk.slot, v + hdr.values.v088);
        acc_v089.read(v, meta.tk.slot);
        acc_v089.write(meta.tk.slot, v + hdr.values.v089);
        acc_v090.read(v, meta.tk.slot);
        acc_v090.write(meta.tk.slot, v + hdr.values.v090);
        acc_v091.read(v, meta.tk.slot);
        acc_v091.write(meta.tk.slot, v + hdr.values.v091);
        acc_v092.read(v, meta.tk.slot);
        acc_v092.write(meta.tk.slot, v + hdr.values.v092);
        acc_v093.read(v, meta.tk.slot);
        acc_v093.write(meta.tk.slot, v + hdr.values.v093);
        acc_v094.read(v, meta.tk.slot);
        acc_v094.write(meta.tk.slot, v + hdr.values.v094);
        acc_v095.read(v, meta.tk.slot);
        acc_v095.write(meta.tk.slot, v + hdr.values.v095);
        acc_v096.read(v, meta.tk.slot);
        acc_v096.write(meta.tk.slot, v + hdr.values.v096);
        acc_v097.read(v, meta.tk.slot);
        acc_v097.write(meta.tk.slot, v + hdr.values.v097);
        acc_v098.read(v, meta.tk.slot);
        acc_v098.write(meta.tk.slot, v + hdr.values.v098);
        acc_v099.read(v, meta.tk.slot);
        acc_v099.write(meta.tk.slot, v + hdr.values.v099);
        acc_v100.read(v, meta.tk.slot);
        acc_v100.write(meta.tk.slot, v + hdr.values.v100);
        acc_v101.read(v, meta.tk.slot);
        acc_v101.write(meta.tk.slot, v + hdr.values.v101);
        acc_v102.read(v, meta.tk.slot);
        acc_v102.write(meta.tk.slot, v + hdr.values.v102);
        acc_v103.read(v, meta.tk.slot);
        acc_v103.write(meta.tk.slot, v + hdr.values.v103);
        acc_v104.read(v, meta.tk.slot);
        acc_v104.write(meta.tk.slot, v + hdr.values.v104);
        acc_v105.read(v, meta.tk.slot);
        acc_v105.write(meta.tk.slot, v + hdr.values.v105);
        acc_v106.read(v, meta.tk.slot);
        acc_v106.write(meta.tk.slot, v + hdr.values.v106);
        acc_v107.read(v, meta.tk.slot);
        acc_v107.write(meta.tk.slot, v + hdr.values.v107);
        acc_v108.read(v, meta.tk.slot);
        acc_v108.write(meta.tk.slot, v + hdr.values.v108);
        acc_v109.read(v, meta.tk.slot);
        acc_v109.write(meta.tk.slot, v + hdr.values.v109);
        acc_v110.read(v, meta.tk.slot);
        acc_v110.write(meta.tk.slot, v + hdr.values.v110);
        acc_v111.read(v, meta.tk.slot);
        acc_v111.write(meta.tk.slot, v + hdr.values.v111);
        acc_v112.read(v, meta.tk.slot);
        acc_v112.write(meta.tk.slot, v + hdr.values.v112);
        acc_v113.read(v, meta.tk.slot);
        acc_v113.write(meta.tk.slot, v + hdr.values.v113);
        acc_v114.read(v, meta.tk.slot);
        acc_v114.write(meta.tk.slot, v + hdr.values.v114);
        acc_v115.read(v, meta.tk.slot);
        acc_v115.write(meta.tk.slot, v + hdr.values.v115);
        acc_v116.read(v, meta.tk.slot);
        acc_v116.write(meta.tk.slot, v + hdr.values.v116);
        acc_v117.read(v, meta.tk.slot);
        acc_v117.write(meta.tk.slot, v + hdr.values.v117);
        acc_v118.read(v, meta.tk.slot);
        acc_v118.write(meta.tk.slot, v + hdr.values.v118);
        acc_v119.read(v, meta.tk.slot);
        acc_v119.write(meta.tk.slot, v + hdr.values.v119);
        acc_v120.read(v, meta.tk.slot);
        acc_v120.write(meta.tk.slot, v + hdr.values.v120);
        acc_v121.read(v, meta.tk.slot);
        acc_v121.write(meta.tk.slot, v + hdr.values.v121);
        acc_v122.read(v, meta.tk.slot);
        acc_v122.write(meta.tk.slot, v + hdr.values.v122);
        acc_v123.read(v, meta.tk.slot);
        acc_v123.write(meta.tk.slot, v + hdr.values.v123);
        acc_v124.read(v, meta.tk.slot);
        acc_v124.write(meta.tk.slot, v + hdr.values.v124);
        acc_v125.read(v, meta.tk.slot);
        acc_v125.write(meta.tk.slot, v + hdr.values.v125);
        acc_v126.read(v, meta.tk.slot);
        acc_v126.write(meta.tk.slot, v + hdr.values.v126);
        acc_v127.read(v, meta.tk.slot);
        acc_v127.write(meta.tk.slot, v + hdr.values.v127);
        acc_bitmap.write(meta.tk.slot, meta.tk.slot_bitmap | meta.tk.sender_bit);
        acc_events.count(TOKEN_ACC_EV_ADDED);
    }

    action read_slot() {
        acc_v000.read(hdr.values.v000, meta.tk.slot);
        acc_v001.read(hdr.values.v001, meta.tk.slot);
        acc_v002.read(hdr.values.v002, meta.tk.slot);
        acc_v003.read(hdr.values.v003, meta.tk.slot);
        acc_v004.read(hdr.values.v004, meta.tk.slot);
        acc_v005.read(hdr.values.v005, meta.tk.slot);
        acc_v006.read(hdr.values.v006, meta.tk.slot);
        acc_v007.read(hdr.values.v007, meta.tk.slot);
        acc_v008.read(hdr.values.v008, meta.tk.slot);
        acc_v009.read(hdr.values.v009, meta.tk.slot);
        acc_v010.read(hdr.values.v010, meta.tk.slot);
        acc_v011.read(hdr.values.v011, meta.tk.slot);
        acc_v012.read(hdr.values.v012, meta.tk.slot);
        acc_v013.read(hdr.values.v013, meta.tk.slot);
        acc_v014.read(hdr.values.v014, meta.tk.slot);
        acc_v015.read(hdr.values.v015, meta.tk.slot);
        acc_v016.read(hdr.values.v016, meta.tk.slot);
        acc_v017.read(hdr.values.v017, meta.tk.slot);
        acc_v018.read(hdr.values.v018, meta.tk.slot);
        acc_v019.read(hdr.values.v019, meta.tk.slot);
        acc_v020.read(hdr.values.v020, meta.tk.slot);
        acc_v021.read(hdr.values.v021, meta.tk.slot);
        acc_v022.read(hdr.values.v022, meta.tk.slot);
        acc_v023.read(hdr.values.v023, meta.tk.slot);
        acc_v024.read(hdr.values.v024, meta.tk.slot);
        acc_v025.read(hdr.values.v025, meta.tk.slot);
        acc_v026.read(hdr.values.v026, meta.tk.slot);
        acc_v027.read(hdr.values.v027, meta.tk.slot);
        acc_v028.read(hdr.values.v028, meta.tk.slot);
        acc_v029.read(hdr.values.v029, meta.tk.slot);
        acc_v030.read(hdr.values.v030, meta.tk.slot);
        acc_v031.read(hdr.values.v031, meta.tk.slot);
        acc_v032.read(hdr.values.v032, meta.tk.slot);
        acc_v033.read(hdr.values.v033, meta.tk.slot);
        acc_v034.read(hdr.values.v034, meta.tk.slot);
        acc_v035.read(hdr.values.v035, meta.tk.slot);
        acc_v036.read(hdr.values.v036, meta.tk.slot);
        acc_v037.read(hdr.values.v037, meta.tk.slot);
        acc_v038.read(hdr.values.v038, meta.tk.slot);
        acc_v039.read(hdr.values.v039, meta.tk.slot);
        acc_v040.read(hdr.values.v040, meta.tk.slot);
        acc_v041.read(hdr.values.v041, meta.tk.slot);
        acc_v042.read(hdr.values.v042, meta.tk.slot);
        acc_v043.read(hdr.values.v043, meta.tk.slot);
        acc_v044.read(hdr.values.v044, meta.tk.slot);
        acc_v045.read(hdr.values.v045, meta.tk.slot);
        acc_v046.read(hdr.values.v046, meta.tk.slot);
        acc_v047.read(hdr.values.v047, meta.tk.slot);
        acc_v048.read(hdr.values.v048, meta.tk.slot);
        acc_v049.read(hdr.values.v049, meta.tk.slot);
        acc_v050.read(hdr.values.v050, meta.tk.slot);
        acc_v051.read(hdr.values.v051, meta.tk.slot);
        acc_v052.read(hdr.values.v052, meta.tk.slot);
        acc_v053.read(hdr.values.v053, meta.tk.slot);
        acc_v054.read(hdr.values.v054, meta.tk.slot);
        acc_v055.read(hdr.values.v055, meta.tk.slot);
        acc_v056.read(hdr.values.v056, meta.tk.slot);
        acc_v057.read(hdr.values.v057, meta.tk.slot);
        acc_v058.read(hdr.values.v058, meta.tk.slot);
        acc_v059.read(hdr.values.v059, meta.tk.slot);
        acc_v060.read(hdr.values.v060, meta.tk.slot);
        acc_v061.read(hdr.values.v061, meta.tk.slot);
        acc_v062.read(hdr.values.v062, meta.tk.slot);
        acc_v063.read(hdr.values.v063, meta.tk.slot);
        acc_v064.read(hdr.values.v064, meta.tk.slot);
        acc_v065.read(hdr.values.v065, meta.tk.slot);
        acc_v066.read(hdr.values.v066, meta.tk.slot);
        acc_v067.read(hdr.values.v067, meta.tk.slot);
        acc_v068.read(hdr.values.v068, meta.tk.slot);
        acc_v069.read(hdr.values.v069, meta.tk.slot);
        acc_v070.read(hdr.values.v070, meta.tk.slot);
        acc_v071.read(hdr.values.v071, meta.tk.slot);
        acc_v072.read(hdr.values.v072, meta.tk.slot);
        acc_v073.read(hdr.values.v073, meta.tk.slot);
        acc_v074.read(hdr.values.v074, meta.tk.slot);
        acc_v075.read(hdr.values.v075, meta.tk.slot);
        acc_v076.read(hdr.values.v076, meta.tk.slot);
        acc_v077.read(hdr.values.v077, meta.tk.slot);
        acc_v078.read(hdr.values.v078, meta.tk.slot);
        acc_v079.read(hdr.values.v079, meta.tk.slot);
        acc_v080.read(hdr.values.v080, meta.tk.slot);
        acc_v081.read(hdr.values.v081, meta.tk.slot);
        acc_v082.read(hdr.values.v082, meta.tk.slot);
        acc_v083.read(hdr.values.v083, meta.tk.slot);
        acc_v084.read(hdr.values.v084, meta.tk.slot);
        acc_v085.read(hdr.values.v085, meta.tk.slot);
        acc_v086.read(hdr.values.v086, meta.tk.slot);
        acc_v087.read(hdr.values.v087, meta.tk.slot);
        acc_v088.read(hdr.values.v088, meta.tk.slot);
        acc_v089.read(hdr.values.v089, meta.tk.slot);
        acc_v090.read(hdr.values.v090, meta.tk.slot);
        acc_v091.read(hdr.values.v091, meta.tk.slot);
        acc_v092.read(hdr.values.v092, meta.tk.slot);
        acc_v093.read(hdr.values.v093, meta.tk.slot);
        acc_v094.read(hdr.values.v094, meta.tk.slot);
        acc_v095.read(hdr.values.v095, meta.tk.slot);
        acc_v096.read(hdr.values.v096, meta.tk.slot);
        acc_v097.read(hdr.values.v097, meta.tk.slot);
        acc_v098.read(hdr.values.v098, meta.tk.slot);
        acc_v099.read(hdr.values.v099, meta.tk.slot);
        acc_v100.read(hdr.values.v100, meta.tk.slot);
        acc_v101.read(hdr.values.v101, meta.tk.slot);
        acc_v102.read(hdr.values.v102, meta.tk.slot);
        acc_v103.read(hdr.values.v103, meta.tk.slot);
        acc_v104.read(hdr.values.v104, meta.tk.slot);
        acc_v105.read(hdr.values.v105, meta.tk.slot);
        acc_v106.read(hdr.values.v106, meta.tk.slot);
        acc_v107.read(hdr.values.v107, meta.tk.slot);
        acc_v108.read(hdr.values.v108, meta.tk.slot);
        acc_v109.read(hdr.values.v109, meta.tk.slot);
        acc_v110.read(hdr.values.v110, meta.tk.slot);
        acc_v111.read(hdr.values.v111, meta.tk.slot);
        acc_v112.read(hdr.values.v112, meta.tk.slot);
        acc_v113.read(hdr.values.v113, meta.tk.slot);
        acc_v114.read(hdr.values.v114, meta.tk.slot);
        acc_v115.read(hdr.values.v115, meta.tk.slot);
        acc_v116.read(hdr.values.v116, meta.tk.slot);
        acc_v117.read(hdr.values.v117, meta.tk.slot);
        acc_v118.read(hdr.values.v118, meta.tk.slot);
        acc_v119.read(hdr.values.v119, meta.tk.slot);
        acc_v120.read(hdr.values.v120, meta.tk.slot);
        acc_v121.read(hdr.values.v121, meta.tk.slot);
        acc_v122.read(hdr.values.v122, meta.tk.slot);
        acc_v123.read(hdr.values.v123, meta.tk.slot);
        acc_v124.read(hdr.values.v124, meta.tk.slot);
        acc_v125.read(hdr.values.v125, meta.tk.slot);
        acc_v126.read(hdr.values.v126, meta.tk.slot);
        acc_v127.read(hdr.values.v127, meta.tk.slot);
        hdr.token.bitmap = meta.tk.slot_bitmap;
    }

    action empty_reply() {
        hdr.values.v000 = 0;
        hdr.values.v001 = 0;
        hdr.values.v002 = 0;
        hdr.values.v003 = 0;
        hdr.values.v004 = 0;
        hdr.values.v005 = 0;
        hdr.values.v006 = 0;
        hdr.values.v007 = 0;
        hdr.values.v008 = 0;
        hdr.values.v009 = 0;
        hdr.values.v010 = 0;
        hdr.values.v011 = 0;
        hdr.values.v012 = 0;
        hdr.values.v013 = 0;
        hdr.values.v014 = 0;
        hdr.values.v015 = 0;
        hdr.values.v016 = 0;
        hdr.values.v017 = 0;
        hdr.values.v018 = 0;
        hdr.values.v019 = 0;
        hdr.values.v020 = 0;
        hdr.values.v021 = 0;
        hdr.values.v022 = 0;
        hdr.values.v023 = 0;
        hdr.values.v024 = 0;
        hdr.values.v025 = 0;
        hdr.values.v026 = 0;
        hdr.values.v027 = 0;
        hdr.values.v028 = 0;
        hdr.values.v029 = 0;
        hdr.values.v030 = 0;
        hdr.values.v031 = 0;
        hdr.values.v032 = 0;
        hdr.values.v033 = 0;
        hdr.values.v034 = 0;
        hdr.values.v035 = 0;
        hdr.values.v036 = 0;
        hdr.values.v037 = 0;
        hdr.values.v038 = 0;
        hdr.values.v039 = 0;
        hdr.values.v040 = 0;
        hdr.values.v041 = 0;
        hdr.values.v042 = 0;
        hdr.values.v043 = 0;
        hdr.values.v044 = 0;
        hdr.values.v045 = 0;
        hdr.values.v046 = 0;
        hdr.values.v047 = 0;
        hdr.values.v048 = 0;
        hdr.values.v049 = 0;
        hdr.values.v050 = 0;
        hdr.values.v051 = 0;
        hdr.values.v052 = 0;
        hdr.values.v053 = 0;
        hdr.values.v054 = 0;
        hdr.values.v055 = 0;
        hdr.values.v056 = 0;
        hdr.values.v057 = 0;
        hdr.values.v058 = 0;
        hdr.values.v059 = 0;
        hdr.values.v060 = 0;
        hdr.values.v061 = 0;
        hdr.values.v062 = 0;
        hdr.values.v063 = 0;
        hdr.values.v064 = 0;
        hdr.values.v065 = 0;
        hdr.values.v066 = 0;
        hdr.values.v067 = 0;
        hdr.values.v068 = 0;
        hdr.values.v069 = 0;
        hdr.values.v070 = 0;
        hdr.values.v071 = 0;
        hdr.values.v072 = 0;
        hdr.values.v073 = 0;
        hdr.values.v074 = 0;
        hdr.values.v075 = 0;
        hdr.values.v076 = 0;
        hdr.values.v077 = 0;
        hdr.values.v078 = 0;
        hdr.values.v079 = 0;
        hdr.values.v080 = 0;
        hdr.values.v081 = 0;
        hdr.values.v082 = 0;
        hdr.values.v083 = 0;
        hdr.values.v084 = 0;
        hdr.values.v085 = 0;
        hdr.values.v086 = 0;
        hdr.values.v087 = 0;
        hdr.values.v088 = 0;
        hdr.values.v089 = 0;
        hdr.values.v090 = 0;
        hdr.values.v091 = 0;
        hdr.values.v092 = 0;
        hdr.values.v093 = 0;
        hdr.values.v094 = 0;
        hdr.values.v095 = 0;
        hdr.values.v096 = 0;
        hdr.values.v097 = 0;
        hdr.values.v098 = 0;
        hdr.values.v099 = 0;
        hdr.values.v100 = 0;
        hdr.values.v101 = 0;
        hdr.values.v102 = 0;
        hdr.values.v103 = 0;
        hdr.values.v104 = 0;
        hdr.values.v105 = 0;
        hdr.values.v106 = 0;
        hdr.values.v107 = 0;
        hdr.values.v108 = 0;
        hdr.values.v109 = 0;
        hdr.values.v110 = 0;
        hdr.values.v111 = 0;
        hdr.values.v112 = 0;
        hdr.values.v113 = 0;
        hdr.values.v114 = 0;
        hdr.values.v115 = 0;
        hdr.values.v116 = 0;
        hdr.values.v117 = 0;
        hdr.values.v118 = 0;
        hdr.values.v119 = 0;
        hdr.values.v120 = 0;
        hdr.values.v121 = 0;
        hdr.values.v122 = 0;
        hdr.values.v123 = 0;
        hdr.values.v124 = 0;
        hdr.values.v125 = 0;
        hdr.values.v126 = 0;
        hdr.values.v127 = 0;
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
                    /* s134: only the token holder broadcasts */
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
