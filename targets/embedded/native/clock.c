/* gradnet native backend: the traffic manager's clocks and queue depths in standard
 * metadata (hand-written; nothing in this file comes from a BMv2 JSON). What switch.py's
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
  if (TM_DEQ_DELTA >= 0 && TM_ENQ_TS >= 0) F[TM_DEQ_DELTA] = (c->now_us - F[TM_ENQ_TS]) & TM_TS32;
}

/* The switch's clock origin (seconds, CLOCK_MONOTONIC's scale: Switch._t0). */
void np_clock_origin(void *p, double t0) {
  ctx_t *c = p;
  pthread_mutex_lock(&c->mu);
  c->t0 = t0;
  pthread_mutex_unlock(&c->mu);
}
