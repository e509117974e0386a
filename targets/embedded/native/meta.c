/* gradnet native backend: what the packet path records beside the frame (hand-written;
 * nothing in this file comes from a BMv2 JSON): the traffic manager's clocks and queue
 * depths in standard metadata, and the events queue (digests, packet-ins) for the Python
 * side. */

/* 1. The traffic manager's clocks and queue depths in standard metadata: what switch.py's
 * _enqueue and _egress write, on the same clock: microseconds since the switch's
 * origin (Switch._now_us; np_clock_origin gives it), enq_timestamp and deq_timedelta
 * cut to 32 bits. A packet that goes straight from ingress to egress (a port without a
 * rate) is enqueued and dequeued at once, at the time np_process was given, with depth
 * 0 (c->deq < 0); one dequeued from a shaped queue (tm.c) has its enqueue time and depth
 * from tm_put and its dequeue depth in c->deq (what its port still holds). The slots
 * (TM_*: -1 when the program does not read the field) come from cgen.py, checked
 * against NS there. */
#define TM_TS32 UINT64_C(0xFFFFFFFF)

/* Microseconds since the origin at time t (seconds, CLOCK_MONOTONIC's scale). */
static inline uint64_t clock_us(const ctx_t *c, double t) {
  double d = (t - c->t0) * 1e6;
  return d > 0 ? (uint64_t)d : 0;  /* as int(): toward zero */
}

/* The enqueue fields of the PHV F, at c->now_us with depth packets ahead of it. */
static inline void clock_enq(const ctx_t *c, uint64_t *F, uint64_t depth) {
  if (TM_ENQ_DEPTH >= 0) F[TM_ENQ_DEPTH] = depth;
  if (TM_ENQ_TS >= 0) F[TM_ENQ_TS] = c->now_us & TM_TS32;
}

/* Before egress (pre.c's egress_run): the dequeue fields, and the enqueue ones of a
 * packet that did not wait in a shaped queue. */
static inline void clock_deq(const ctx_t *c, uint64_t *F) {
  if (c->deq < 0) clock_enq(c, F, 0);
  if (TM_EG_TS >= 0) F[TM_EG_TS] = c->now_us;
  if (TM_DEQ_DEPTH >= 0) F[TM_DEQ_DEPTH] = c->deq < 0 ? 0 : (uint64_t)c->deq;
  if (TM_DEQ_DELTA >= 0 && TM_ENQ_TS >= 0) {
    uint64_t d = (c->now_us - F[TM_ENQ_TS]) & TM_TS32;
    /* "negative": the enqueue time came from loop.c's integer clock within the same
     * microsecond (no packet waits 35 minutes) */
    F[TM_DEQ_DELTA] = d >> 31 ? 0 : d;
  }
}

/* The switch's clock origin (seconds, CLOCK_MONOTONIC's scale: Switch._t0). */
void np_clock_origin(void *p, double t0) {
  ctx_t *c = p;
  pthread_mutex_lock(&c->mu);
  c->t0 = t0;
  pthread_mutex_unlock(&c->mu);
}

/* 2. The events queue for the Python side: digests (process.c's learn_push) and packet-ins (a
 * frame io.c's tx_port sends to the CPU port) share one queue of 64-bit words, so the
 * Python side hands them to the digest and packet-in handlers in the order the packets
 * made them, as the Python backend calls them: a digest is its learn list's id, then its
 * words (g_learn); a packet-in is EV_PIN | its length, then its bytes in whole words.
 * The queue grows (doubling) up to EV_MAX words; np_digests empties it. It is touched by
 * the data-plane thread only (np_process, np_rx, np_tm_drain, np_digests). */
#define DQ_WORDS 16384              /* the queue's first size, and np_dq_words */
#define EV_MAX (DQ_WORDS * 64)      /* its largest (8 MiB): a packet-in past it is dropped, counted */
#define EV_PIN (UINT64_C(1) << 63)  /* a packet-in's first word; a learn list id is far below */
#define EV_FRAME (1u << 20)          /* the longest packet-in (io.c's frames are shorter) */

/* Room for words more words in the queue (grown when needed): 1, or 0 when it cannot. */
static int ev_room(ctx_t *c, uint32_t words) {
  if (words > EV_MAX || c->dqn > EV_MAX - words) return 0;
  uint32_t need = c->dqn + words;
  if (c->dq && need <= c->dqcap) return 1;
  uint32_t cap = c->dqcap ? c->dqcap : DQ_WORDS;
  while (cap < need) cap *= 2;
  uint64_t *q = realloc(c->dq, 8 * (size_t)cap);
  if (!q) return 0;
  c->dq = q; c->dqcap = cap;
  return 1;
}

/* Queue the len bytes at frame as a packet-in: 1, or 0 when the queue has no room. */
static int pin_push(ctx_t *c, const uint8_t *frame, uint32_t len) {
  uint32_t words = (len + 7) / 8;
  if (len > EV_FRAME || !ev_room(c, 1 + words)) return 0;
  uint64_t *w = c->dq + c->dqn;
  w[words] = 0;  /* the last word's padding */
  w[0] = EV_PIN | len;
  memcpy(w + 1, frame, len);
  c->dqn += 1 + words;
  return 1;
}

/* The queued events into buf (cap words); the queue emptied. UINT32_MAX when buf is too
 * small (nothing taken: ask np_dq_count, then call again with room for that many). */
uint32_t np_digests(void *p, uint64_t *buf, uint32_t cap) {
  ctx_t *c = p;
  pthread_mutex_lock(&c->mu);
  uint32_t n = c->dqn;
  if (n > cap) { pthread_mutex_unlock(&c->mu); return UINT32_MAX; }
  if (n) memcpy(buf, c->dq, 8 * (size_t)n);
  c->dqn = 0;
  pthread_mutex_unlock(&c->mu);
  return n;
}
uint32_t np_dq_words(void) { return DQ_WORDS; }
uint32_t *np_dq_count(void *p) { return &((ctx_t *)p)->dqn; }
