/* The INA PS's fast case in C (hosts/ina/ps_io.py): compiled after dgram.c, in one
 * unit with it (hosts/ina/native.py joins them), whose helpers and constants it uses. */
/* One job of the PS, for its fast case (hosts/ina/ps_io.py fills and syncs it). */
typedef struct {
    int32_t packet_len, num_fragments, vpp, nsw, nwk;
    uint32_t stamp;
    int64_t offset, cycle, round_w;  /* cycle: up to 2^32 rounds */
    const uint8_t *full;      /* the 32-byte bitmap of every worker */
    const uint32_t *sw_ips;   /* the job's switches: any aggregate may come from them */
    const uint32_t *wk_ips;   /* worker addresses, ... */
    const uint8_t *wk_bits;   /* ... and the bits their own GRADs carry (32 bytes each) */
    uint8_t *have;            /* F x 32: summed so far (JobState.have, mirrored) */
    uint8_t *max_exp;         /* F (JobState.max_exp, mirrored) */
    int32_t *acc;             /* F x V: JobState.acc itself */
    int64_t *counters;        /* K_* below, added into JobStats by Python */
    int32_t *dirty;           /* fragments changed since Python last read them, ... */
    int32_t ndirty;
    uint8_t *mark;            /* ... each once */
} psjob_t;

enum { K_PACKETS, K_BYTES, K_GRAD, K_FORWARDED, K_MERGED, K_CONTRIB, K_ACCEPTED, K_MISMATCH };
enum { W_NONE, W_SLOW, W_COMPLETE };

static int subset(const uint8_t *a, const uint8_t *b) {  /* a is within b, and a != 0 */
    int any = 0;
    for (int i = 0; i < BM_LEN; i++) { if (a[i] & ~b[i]) return 0; any |= a[i]; }
    return any != 0;
}

static int source_ok(const psjob_t *J, uint32_t src, const uint8_t *bm) {
    for (int i = 0; i < J->nsw; i++) if (J->sw_ips[i] == src) return 1;
    for (int i = 0; i < J->nwk; i++)
        if (J->wk_ips[i] == src) return subset(bm, J->wk_bits + (int64_t)i * BM_LEN);
    return 0;
}

/* The fast case, decided as ParameterServer._handle decides it: a GRAD of the job's
 * size, of the current round, not RETX, a bitmap within the job's workers, the job's
 * stamp, from a switch of the job or from the worker whose bits it carries, for a
 * fragment not finished and disjoint from what it has: summed here. Anything else is
 * Python's (W_SLOW), and so is a fragment this completes (W_COMPLETE: summed, the
 * RESULT is Python's). */
static int ps_take(psjob_t *J, const uint8_t *d, int len, uint32_t src, int64_t f) {
    const uint8_t *bm = d + BM_OFF;
    if (d[0] != T_GRAD || len != J->packet_len || (d[48] & 1) || !subset(bm, J->full))
        return W_SLOW;
    if ((J->stamp && rd16(d + 2) != J->stamp) || !source_ok(J, src, bm)) return W_SLOW;
    uint8_t *have = J->have + f * BM_LEN;
    int n = 0, full = 1;
    for (int i = 0; i < BM_LEN; i++) if (have[i] & bm[i]) return W_SLOW;
    if (memcmp(have, J->full, BM_LEN) == 0) return W_SLOW;  /* finished: late */
    for (int i = 0; i < BM_LEN; i++) {
        have[i] |= bm[i];
        n += __builtin_popcount(bm[i]);
        full &= have[i] == J->full[i];
    }
    uint32_t *acc = (uint32_t *)(J->acc + f * J->vpp);  /* wraps mod 2^32, as numpy's int32 */
    for (int j = 0; j < J->vpp; j++) acc[j] += rd32(d + HL + 4 * j);
    if (d[51] > J->max_exp[f]) J->max_exp[f] = d[51];
    int64_t *c = J->counters;
    c[K_PACKETS]++; c[K_BYTES] += len; c[K_GRAD]++; c[K_CONTRIB] += n; c[K_ACCEPTED]++;
    if (rd16(d + 10)) c[K_FORWARDED]++;
    if (n > 1) c[K_MERGED]++;
    if (rd16(d + 44) != n) c[K_MISMATCH]++;
    if (!J->mark[f]) { J->mark[f] = 1; J->dirty[J->ndirty++] = (int32_t)f; }
    return full ? W_COMPLETE : W_NONE;
}

/* Datagrams start..k-1 of a batch (ina_recv_batch's): each fast one summed, up to the
 * first that needs Python; its index (k: none), res = (why, job, fragment index or -1:
 * which fragment's mirror Python may change). */
int ina_ps_fast(psjob_t *const *jobs, const uint8_t *slots, const int32_t *lens,
                const uint32_t *srcs, int start, int k, int32_t *res) {
    for (int i = start; i < k; i++) {
        const uint8_t *d = slots + (int64_t)i * SLOT;
        res[0] = W_SLOW; res[1] = res[2] = -1;
        if (lens[i] < HL) return i;
        psjob_t *J = jobs[d[1]];
        if (!J) return i;
        int64_t x = (int64_t)rd32(d + 4) - J->offset;
        if (x < 0 || x / J->num_fragments >= J->cycle) return i;
        int64_t f = x % J->num_fragments;
        res[1] = d[1]; res[2] = (int32_t)f;
        if (x / J->num_fragments != J->round_w) return i;
        int why = ps_take(J, d, lens[i], srcs[i], f);
        if (why != W_NONE) { res[0] = why; return i; }
    }
    res[0] = W_NONE;
    return k;
}
