/* The INA agents' batched datagram paths (docs/ina.md, "The agents' CPU"): many
 * datagrams per system call (sendmmsg, recvmmsg) and no Python per datagram. Built and
 * loaded by hosts/ina/native.py; wire/ina.py is the one definition of the header, which
 * this file reads and patches at the offsets below (tests/test_ina_native.py checks
 * both agree). Every length read from the network is checked before use. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define HL 52            /* INA_HEADER_LEN */
#define BATCH 64         /* datagrams per sendmmsg / recvmmsg */
#define SLOT 2048        /* receive slot: as the Python path's recvfrom(2048) */
#define BM_OFF 12        /* the 32-byte contributor bitmap */
#define BM_LEN 32

enum { T_GRAD = 1, T_PARTIAL = 2, T_RESULT = 3, T_NACK = 5 };
/* what the worker's receive made of each datagram (hosts/ina/native.py mirrors) */
enum { C_ACCEPT, C_DUPLICATE, C_STALE, C_IGNORED, C_REFUSED_SOURCE, C_REFUSED_STAMP, C_NACK };

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void wr16(uint8_t *p, uint32_t v) { p[0] = v >> 8; p[1] = v; }
static void wr32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

/* The fields of one parsed header (the hot ones). */
typedef struct {
    uint32_t frag;
    uint16_t wid, tag, origin, count;
    uint8_t mt, job, flags, max_exp;
} hdr_t;

static void parse(const uint8_t *d, hdr_t *h) {
    h->mt = d[0]; h->job = d[1]; h->wid = rd16(d + 2); h->frag = rd32(d + 4);
    h->tag = rd16(d + 8); h->origin = rd16(d + 10); h->count = rd16(d + 44);
    h->flags = d[48]; h->max_exp = d[51];
}

/* Test hook: the fields the C side reads from a header, for the codec check against
 * wire/ina.py: out = msg_type, job, worker_id, fragment, tag, origin, count, fanin,
 * flags, sd_fanin, max_exp (the bitmap is compared as bytes). -1 if n < HL. */
int ina_parse_header(const uint8_t *d, int n, int64_t *out) {
    hdr_t h;
    if (n < HL) return -1;
    parse(d, &h);
    out[0] = h.mt; out[1] = h.job; out[2] = h.wid; out[3] = h.frag; out[4] = h.tag;
    out[5] = h.origin; out[6] = h.count; out[7] = rd16(d + 46); out[8] = h.flags;
    out[9] = rd16(d + 49); out[10] = h.max_exp;
    return 0;
}

/* Patch the per-fragment fields into a GRAD header copied from the template. */
static void grad_header(uint8_t *h, const uint8_t *tmpl, uint32_t frag, const int32_t *m) {
    memcpy(h, tmpl, HL);
    wr32(h + 4, frag);
    wr16(h + 8, (uint32_t)m[0]);          /* tag */
    wr16(h + 46, (uint32_t)m[1]);         /* fanin */
    h[48] = (uint8_t)m[2];                /* flags */
    wr16(h + 49, (uint32_t)m[3]);         /* sd_fanin */
    h[51] = (uint8_t)m[4];                /* max_exp */
}

/* First sends of a worker: fragments f0, f0+1, ... up to maxn of them, while the
 * lookahead gate allows (look > 0: fragment f needs done[f - look]). Each datagram is
 * the template header patched with meta[f] = (tag, fanin, flags, sd_fanin, max_exp,
 * destination index) and the payload's vl bytes of fragment f (sent from the payload in
 * place: two iovecs). scratch: BATCH * HL bytes. The number sent; -errno when the
 * first sendmmsg sends nothing (-EAGAIN: the socket buffer is full). */
int ina_send_grads(int fd, const uint8_t *tmpl, const uint8_t *payload, int vl,
                   const int32_t *meta, const struct sockaddr_in *dests, uint32_t offset,
                   int f0, int maxn, const uint8_t *done, int look, uint8_t *scratch) {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH][2];
    int sent = 0;
    while (sent < maxn) {
        int k = 0;
        for (; k < BATCH && sent + k < maxn; k++) {
            int f = f0 + sent + k;
            if (look > 0 && f >= look && !done[f - look]) break;
            const int32_t *m = meta + 6 * (int64_t)f;
            grad_header(scratch + k * HL, tmpl, offset + (uint32_t)f, m);
            iov[k][0].iov_base = scratch + k * HL; iov[k][0].iov_len = HL;
            iov[k][1].iov_base = (void *)(payload + (int64_t)f * vl); iov[k][1].iov_len = vl;
            memset(&msgs[k].msg_hdr, 0, sizeof msgs[k].msg_hdr);
            msgs[k].msg_hdr.msg_iov = iov[k]; msgs[k].msg_hdr.msg_iovlen = 2;
            msgs[k].msg_hdr.msg_name = (void *)&dests[m[5]];
            msgs[k].msg_hdr.msg_namelen = sizeof(struct sockaddr_in);
        }
        if (k == 0) break;
        int r = sendmmsg(fd, msgs, k, MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR) continue;
            return sent ? sent : -errno;
        }
        sent += r;
        if (r < k) break;  /* buffer full part-way */
    }
    return sent;
}

/* Receive up to maxn datagrams (recvmmsg, non-blocking) into slots (maxn * SLOT bytes);
 * lens[i] their lengths, srcs[i] their IPv4 source (network order), ports[i] (unless
 * NULL) its port. The count; 0 when none is waiting; -errno on an error other than a
 * stale ICMP (ECONNREFUSED, skipped). */
int ina_recv_batch(int fd, uint8_t *slots, int maxn, int32_t *lens, uint32_t *srcs,
                   uint16_t *ports) {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in from[BATCH];
    if (maxn > BATCH) maxn = BATCH;
    for (int i = 0; i < maxn; i++) {
        iov[i].iov_base = slots + (int64_t)i * SLOT; iov[i].iov_len = SLOT;
        memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
        msgs[i].msg_hdr.msg_iov = &iov[i]; msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &from[i]; msgs[i].msg_hdr.msg_namelen = sizeof from[i];
    }
    for (int tries = 0; tries < 64; tries++) {
        int r = recvmmsg(fd, msgs, maxn, MSG_DONTWAIT, NULL);
        if (r < 0) {
            if (errno == ECONNREFUSED) continue;  /* ICMP from an earlier send: harmless */
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
            return -errno;
        }
        for (int i = 0; i < r; i++) {
            lens[i] = (int32_t)msgs[i].msg_len;  /* truncated at SLOT, like recvfrom(2048) */
            srcs[i] = from[i].sin_family == AF_INET ? from[i].sin_addr.s_addr : 0;
            if (ports) ports[i] = ntohs(from[i].sin_port);
        }
        return r;
    }
    return 0;
}

/* The worker's job, for classifying RESULTs (hosts/ina/native.py fills it). */
typedef struct {
    const uint32_t *sources; int nsrc;  /* addresses a RESULT may come from */
    int pl, vl;                         /* packet and value bytes */
    uint32_t job, stamp;                /* stamp 0: unchecked */
    const uint8_t *full;                /* the 32-byte bitmap of every worker */
    int64_t offset; int n_f;
    uint8_t *done, *result;             /* per fragment; n_f * vl bytes */
} wjob_t;

static int classify(const wjob_t *w, const uint8_t *d, int len, uint32_t src, int next_f,
                    int32_t *o) {
    int ok = 0;
    for (int s = 0; s < w->nsrc; s++) ok |= w->sources[s] == src;
    if (!ok) return C_REFUSED_SOURCE;
    if (len != w->pl) return len == HL && d[0] == T_NACK ? C_NACK : C_IGNORED;
    hdr_t h;
    parse(d, &h);
    if (w->stamp && h.wid != w->stamp) return C_REFUSED_STAMP;
    int64_t f = (int64_t)h.frag - w->offset;
    o[1] = (int32_t)f; o[2] = h.flags; o[3] = h.max_exp;
    if (h.mt != T_RESULT || h.job != w->job || f < 0 || f >= w->n_f ||
        memcmp(d + BM_OFF, w->full, BM_LEN) != 0)
        return C_IGNORED;
    if (w->done[f]) return C_DUPLICATE;
    if (f >= next_f) return C_STALE;
    memcpy(w->result + f * w->vl, d + HL, w->vl);
    w->done[f] = 1;
    return C_ACCEPT;
}

/* A worker's receive step: what Python passes in and reads back (hosts/ina/batched.py). */
typedef struct {
    int next_f, hi, holes;   /* in: first fragment not sent; highest with a RESULT; holes open */
    const uint8_t *asked;    /* in: per fragment, a request went out (no RTT sample) */
    int accepted, last;      /* out: RESULTs taken; the last one's fragment */
    int in_order;            /* out: they were hi+1, hi+2, ... in arrival order, no hole open */
    int rtt_f;               /* out: newest taken that answers one send (not asked, not RETX), or -1 */
    int others;              /* out: datagrams not taken (their codes in out[]) */
} wstep_t;

/* One batch of a worker's receive: up to maxn datagrams, each classified as the Python
 * path does (source, size, stamp, then type, job, range and bitmap; then duplicate,
 * stale or accepted: values copied into the result, done set). out[4i..4i+3] = code,
 * fragment, flags, max_exp; the batch's summary in s. The count (0: none waiting), or
 * -errno. */
int ina_worker_recv(int fd, const wjob_t *w, wstep_t *s, uint8_t *slots, int maxn,
                    int32_t *lens, uint32_t *srcs, int32_t *out) {
    int r = ina_recv_batch(fd, slots, maxn, lens, srcs, NULL);
    int hi = s->hi;
    s->accepted = s->others = 0; s->last = s->rtt_f = -1; s->in_order = !s->holes;
    for (int i = 0; i < r; i++) {
        int32_t *o = out + 4 * i;
        o[1] = o[2] = o[3] = 0;
        o[0] = classify(w, slots + (int64_t)i * SLOT, lens[i], srcs[i], s->next_f, o);
        if (o[0] != C_ACCEPT) { s->others++; continue; }
        int f = o[1];
        s->accepted++; s->last = f;
        if (f != hi + 1) s->in_order = 0;
        hi = f;
        if (!s->asked[f] && !(o[2] & 1)) s->rtt_f = f;  /* RETX = 0x01 */
    }
    return r;
}

/* A worker's whole loop in C while nothing needs Python (fixed window, fixed point, no
 * loss): what Python passes in and reads back (hosts/ina/batched.py, ``pump``). Times
 * are CLOCK_MONOTONIC nanoseconds, time.monotonic()'s clock. */
typedef struct {
    int64_t wake_ns;         /* in: return by then (a timer of Python's is due) */
    int64_t pto_ns;          /* in: the probe timeout the timer restarts with */
    int64_t timer_ns;        /* in/out: the retransmission timer (-1: idle) */
    int64_t coalesce_ns;     /* in: sleep this long before waiting, ... */
    int coalesce_min;        /* ... with this many outstanding (0 ns: off) */
    int window;              /* in: most fragments outstanding */
    int next_f, n_done, outstanding, sent;  /* in/out: the transfer's counters */
    int blocked;             /* in/out: the socket buffer was full */
    int send_blocked;        /* out: times it was found full */
    int progressed;          /* out: a RESULT came (the timer's backoff ends) */
    int rtt_f;               /* out: newest RESULT that answers one send, or -1 */
    double rtt_s;            /* out: ... its round trip, seconds */
    int k;                   /* out: with reason 1, the batch Python must take */
} wpump_t;

enum { P_WAKE, P_BATCH, P_DONE, P_TAIL };

typedef struct {  /* a worker's send context (hosts/ina/batched.py fills it) */
    const uint8_t *tmpl, *payload; int vl; const int32_t *meta;
    const struct sockaddr_in *dests; uint32_t offset; uint8_t *scratch;
    double *sent_at; int n_f;
} wsend_t;

static int64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int pump_send(int fd, const wjob_t *w, const wsend_t *x, wpump_t *p, int64_t now) {
    int room = p->window - p->outstanding;
    if (room > x->n_f - p->next_f) room = x->n_f - p->next_f;
    if (room <= 0 || p->blocked) return 0;
    int r = ina_send_grads(fd, x->tmpl, x->payload, x->vl, x->meta, x->dests, x->offset,
                           p->next_f, room, w->done, 0, x->scratch);
    if (r == -EAGAIN || r == -EWOULDBLOCK) r = 0;
    if (r < 0) return r;
    if (r < room) { p->blocked = 1; p->send_blocked++; }
    for (int f = p->next_f; f < p->next_f + r; f++) x->sent_at[f] = now * 1e-9;
    p->next_f += r; p->outstanding += r; p->sent += r;
    if (r > 0 && p->timer_ns < 0) p->timer_ns = now + p->pto_ns;
    return 0;
}

static void pump_wait(int fd, wpump_t *p, int64_t now, int64_t until) {
    if (p->coalesce_ns > 0 && p->outstanding >= p->coalesce_min && !p->blocked) {
        int64_t d = p->coalesce_ns < until - now ? p->coalesce_ns : until - now;
        struct timespec t = {d / 1000000000LL, d % 1000000000LL};
        nanosleep(&t, NULL);
        return;
    }
    struct pollfd pf = {fd, POLLIN | (p->blocked ? POLLOUT : 0), 0};
    int64_t d = until - now;
    struct timespec t = {d / 1000000000LL, d % 1000000000LL};
    if (ppoll(&pf, 1, &t, NULL) > 0 && (pf.revents & POLLOUT)) p->blocked = 0;
}

/* Send the window, take in-order RESULTs, wait, again; return when Python is needed:
 * P_BATCH (a batch with anything but in-order RESULTs: Python takes it as
 * ina_worker_recv's), P_DONE, P_TAIL (every fragment sent and a RESULT came: the tail
 * probe's clock is Python's), P_WAKE (wake_ns or the timer); -errno on an error. */
int ina_worker_pump(int fd, const wjob_t *w, wstep_t *s, const wsend_t *x, wpump_t *p,
                    uint8_t *slots, int32_t *lens, uint32_t *srcs, int32_t *out) {
    p->progressed = p->send_blocked = p->k = 0; p->rtt_f = -1;
    for (;;) {
        int64_t now = mono_ns();
        int e = pump_send(fd, w, x, p, now);
        if (e < 0) return e;
        s->next_f = p->next_f;
        int k = ina_worker_recv(fd, w, s, slots, BATCH, lens, srcs, out);
        if (k < 0) return k;
        if (k > 0) {
            if (s->others || !s->in_order) { p->k = k; return P_BATCH; }
            now = mono_ns();
            p->n_done += s->accepted; p->outstanding -= s->accepted; s->hi = s->last;
            p->progressed = 1;
            if (s->rtt_f >= 0) { p->rtt_f = s->rtt_f; p->rtt_s = now * 1e-9 - x->sent_at[s->rtt_f]; }
            p->timer_ns = p->outstanding ? now + p->pto_ns : -1;
            if (p->n_done >= x->n_f) return P_DONE;
            if (p->next_f >= x->n_f) return P_TAIL;
            continue;
        }
        int64_t until = p->wake_ns;
        if (p->timer_ns >= 0 && p->timer_ns < until) until = p->timer_ns;
        if (now >= until) return P_WAKE;
        pump_wait(fd, p, now, until);
    }
}

/* Send n prebuilt datagrams: data[i] of lens[i] bytes at offs[i] of buf, to
 * dests[idx[i]]. The number sent; -errno when none was. */
int ina_send_batch(int fd, const uint8_t *buf, const int64_t *offs, const int32_t *lens,
                   const struct sockaddr_in *dests, const int32_t *idx, int n) {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    int sent = 0;
    while (sent < n) {
        int k = n - sent < BATCH ? n - sent : BATCH;
        for (int j = 0; j < k; j++) {
            int i = sent + j;
            iov[j].iov_base = (void *)(buf + offs[i]); iov[j].iov_len = lens[i];
            memset(&msgs[j].msg_hdr, 0, sizeof msgs[j].msg_hdr);
            msgs[j].msg_hdr.msg_iov = &iov[j]; msgs[j].msg_hdr.msg_iovlen = 1;
            msgs[j].msg_hdr.msg_name = (void *)&dests[idx[i]];
            msgs[j].msg_hdr.msg_namelen = sizeof(struct sockaddr_in);
        }
        int r = sendmmsg(fd, msgs, k, MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR) continue;
            return sent ? sent : -errno;
        }
        sent += r;
        if (r < k) break;
    }
    return sent;
}

