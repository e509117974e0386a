/* gradnet native backend: in-memory links between two switches of one process
 * (hand-written; nothing in this file comes from a BMv2 JSON).
 * One ring per direction of a link. The sending port writes a record (io.c's native send,
 * or the Python path through ml_push); the data-plane loop (loop.c) serves the ring as a
 * source of the receiving port and runs each frame once it is due. The sender emulates
 * the link: a frame of L bytes leaves at max(now, previous departure) + 8L / rate and is
 * due a delay later; frames not yet departed beyond the queue limit, frames shorter than
 * an Ethernet header or longer than maxlen, a full ring or a link marked down drop the frame (counted), and a loss
 * threshold drops a random share after the send (counted as sent, as netem's loss is).
 * Everything runs in the one data-plane thread of the process: no locks.
 * This file is compiled into loop.c's shared object (the rings, for Python and the loop)
 * and into every program's (the native send and np_rx_ml); the layout is the same. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ML_FD (-2)          /* txfd[] of a port whose link runs in memory */
#define ML_QMAX 4096        /* the largest queue limit (frames not yet departed) */
#define ML_PAD 0xFFFFFFFFu  /* a record that only skips to the ring's start */
enum { ML_SENT, ML_QUEUE, ML_FULL, ML_LOST, ML_BADLEN, ML_DOWN };
enum { MS_TXP, MS_TXB, MS_RXP, MS_RXB, MS_QUEUE, MS_FULL, MS_LOSS, MS_BADLEN, MS_DOWN, MS_WORDS };

typedef struct ml_ring {
  uint64_t bps;             /* bits per second, 0 = no rate */
  int64_t delay_ns;
  uint32_t qlimit, maxlen;  /* maxlen 0 = any length */
  uint32_t loss, up;        /* loss: drop when a 32-bit draw is below it */
  uint64_t rng;
  int64_t t_free;           /* when the sender's wire is free again */
  uint64_t seq, departed;   /* frames pushed, frames known to have left the queue */
  int64_t dep[ML_QMAX];     /* departure time of frame seq % ML_QMAX */
  uint64_t cap, head, tail; /* byte ring: records at head..tail (positions grow, mod cap) */
  uint8_t *buf;
  uint64_t st[MS_WORDS];
} ml_ring_t;

typedef struct { uint32_t len, pad; int64_t due; } ml_rec_t;  /* then len bytes, to 16 */

static inline int64_t ml_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

ml_ring_t *ml_new(uint64_t cap, uint64_t bps, int64_t delay_ns, uint32_t qlimit, uint32_t maxlen, uint32_t loss,
                  uint64_t seed) {
  ml_ring_t *r = calloc(1, sizeof *r);
  cap = (cap + 15) & ~(uint64_t)15;
  if (!r || cap < 4096 || !(r->buf = malloc(cap))) { free(r); return NULL; }
  r->cap = cap; r->bps = bps; r->delay_ns = delay_ns < 0 ? 0 : delay_ns;
  r->qlimit = qlimit == 0 || qlimit > ML_QMAX ? ML_QMAX : qlimit;
  r->maxlen = maxlen; r->loss = loss; r->rng = seed; r->up = 1;
  return r;
}
void ml_free(ml_ring_t *r) { if (r) { free(r->buf); free(r); } }
void ml_set_up(ml_ring_t *r, uint32_t up) { r->up = up; }
void ml_stats(const ml_ring_t *r, uint64_t *out) {  /* MS_WORDS counters, then the frames in the ring */
  memcpy(out, r->st, sizeof r->st);
  out[MS_WORDS] = r->st[MS_TXP] - r->st[MS_RXP];
}

static inline uint64_t ml_draw(ml_ring_t *r) {  /* splitmix64 */
  uint64_t z = (r->rng += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u; z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

/* One frame into the ring at time now (ns); ML_SENT or why it was dropped (counted). */
int ml_push(ml_ring_t *r, const uint8_t *f, uint32_t len, int64_t now) {
  if (!r->up) { r->st[MS_DOWN]++; return ML_DOWN; }
  if (len < 14 || (r->maxlen && len > r->maxlen)) { r->st[MS_BADLEN]++; return ML_BADLEN; }  /* as a veth refuses it */
  while (r->departed < r->seq && r->dep[r->departed % ML_QMAX] <= now) r->departed++;
  if (r->seq - r->departed >= r->qlimit) { r->st[MS_QUEUE]++; return ML_QUEUE; }
  uint64_t need = (sizeof(ml_rec_t) + len + 15) & ~(uint64_t)15;
  uint64_t at = r->tail % r->cap, room = r->cap - at;  /* contiguous bytes before the end */
  uint64_t skip = room < need ? room : 0;               /* a record never wraps: pad to the start */
  if (r->tail + skip + need - r->head > r->cap) { r->st[MS_FULL]++; return ML_FULL; }
  if (r->loss && (uint32_t)ml_draw(r) < r->loss) { r->st[MS_LOSS]++; return ML_LOST; }  /* before the rate, as netem */
  r->st[MS_TXP]++; r->st[MS_TXB] += len;  /* what entered the link, as a veth's tx counters */
  int64_t start = now > r->t_free ? now : r->t_free;
  int64_t dep = r->bps ? start + (int64_t)((uint64_t)len * 8 * 1000000000u / r->bps) : now;
  r->t_free = dep;
  r->dep[r->seq % ML_QMAX] = dep;
  r->seq++;
  if (skip) { ((ml_rec_t *)(r->buf + at))->len = ML_PAD; r->tail += skip; at = 0; }
  ml_rec_t *h = (ml_rec_t *)(r->buf + at);
  h->len = len; h->due = dep + r->delay_ns;
  memcpy(h + 1, f, len);
  r->tail += need;
  return ML_SENT;
}

static inline ml_rec_t *ml_head(ml_ring_t *r) {  /* the oldest record, pads skipped (NULL: empty) */
  while (r->head < r->tail) {
    ml_rec_t *h = (ml_rec_t *)(r->buf + r->head % r->cap);
    if (h->len != ML_PAD) return h;
    r->head += r->cap - r->head % r->cap;
  }
  return NULL;
}

/* 1 when a frame is due at now; else 0 and *due = the next due time (INT64_MAX: empty). */
int ml_next(ml_ring_t *r, int64_t now, int64_t *due) {
  ml_rec_t *h = ml_head(r);
  *due = h ? h->due : INT64_MAX;
  return h && h->due <= now;
}

/* The oldest frame due at now into out (at most cap bytes); its length, 0 when none. */
uint32_t ml_pop(ml_ring_t *r, int64_t now, uint8_t *out, uint32_t cap) {
  ml_rec_t *h = ml_head(r);
  if (!h || h->due > now) return 0;
  uint32_t len = h->len, n = len < cap ? len : cap;
  memcpy(out, h + 1, n);
  r->head += (sizeof(ml_rec_t) + len + 15) & ~(uint64_t)15;
  r->st[MS_RXP]++; r->st[MS_RXB] += len;
  return n;
}

#ifdef HDRMAX  /* in a program's shared object: the native send and receive */
#define ML_LINK(txfd, port) (((ml_ring_t *const *)((txfd) + 512))[port])  /* after txfd[512] */

/* io.c's send to a port whose link is in memory: counted as a socket send would be. */
static inline void ml_send(const int32_t *txfd, uint32_t port, const uint8_t *f, uint32_t len, uint64_t *cnt,
                           uint32_t cnt_tx, uint32_t cnt_drop) {
  int rc = ml_push(ML_LINK(txfd, port), f, len, ml_now());
  cnt[(rc == ML_SENT || rc == ML_LOST ? cnt_tx : cnt_drop) + port]++;
}

/* rx_fill's source when the loop serves a ring (fd < 0): up to maxn due frames. */
static int ml_fill(ml_ring_t *r, uint8_t *buf, size_t stride, uint32_t maxlen, uint32_t *lens, int maxn) {
  int n = 0;
  int64_t now = ml_now();
  while (n < maxn && (lens[n] = ml_pop(r, now, buf + (size_t)n * stride, maxlen)) != 0) n++;
  return n;
}

int np_rx(void *p, int fd, uint32_t port, uint64_t now_us, uint32_t nbq, const uint8_t *fast,
          const int32_t *txfd, uint64_t *cnt, uint32_t maxpk, uint8_t *slow, uint32_t *slowlen,
          uint32_t *slowinfo);

/* np_rx over the frames due on ring r (the loop calls it for a ring source). */
int np_rx_ml(void *p, ml_ring_t *r, uint32_t port, uint64_t now_us, uint32_t nbq, const uint8_t *fast,
             const int32_t *txfd, uint64_t *cnt, uint32_t maxpk, uint8_t *slow, uint32_t *slowlen,
             uint32_t *slowinfo) {
  ctx_t *c = p;
  c->rxring = r;
  int k = np_rx(p, -1, port, now_us, nbq, fast, txfd, cnt, maxpk, slow, slowlen, slowinfo);
  c->rxring = NULL;
  return k;
}
#endif
