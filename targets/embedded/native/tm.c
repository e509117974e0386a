/* gradnet native backend: the traffic manager's shaped queues (hand-written; nothing in
 * this file comes from a BMv2 JSON). What targets/embedded/traffic.py and the switch's
 * _enqueue / _drain_port do for a port with a rate, in C, with the same arithmetic:
 * per egress port, strict-priority queues (slot 0 = the highest priority, served first),
 * each with a depth and an optional rate in packets/s (a token bucket of one packet),
 * and an optional rate of the whole port shared by its queues in strict priority (a
 * packet rate, or a byte rate charging a packet len / pframe of a frame; while packets
 * wait it earns up to TM_CATCH_UP_S of credit, an idle port one frame at most).
 *
 * A packet to a port the control plane shaped natively (np_tm_cfg; the batched receive
 * path's fast mask says 2) is queued after ingress with its PHV (tm_enqueue, from
 * np_process: rc TM_QUEUED, or TM_FULL when its queue holds depth packets). A queue
 * without a rate is drained at once, as the Python path does; the rest leave when
 * np_tm_drain runs (the C loop calls it when the next departure is due; a Python loop
 * from the switch's service): egress pipeline, checksums, deparse, tx_port, counted in
 * the switch's counters (io.c). A packet whose egress the Python path must finish
 * (a clone or a recirculation; a truncate is cut here) is handed back in slow, as np_rx does. Every call
 * takes the instance's mutex, so a configuration write is atomic with respect to packets.
 * Needs api.c's ctx_t, pre.c's egress_run, io.c's tx_port and CNT_*. */
#include <time.h>
#define TM_MAXQ 8
#define TM_CATCH_UP_S 0.01  /* traffic.py's PORT_CATCH_UP_S */

/* a queued packet: its PHV, its frame (payload at off), clen its length for a byte rate */
typedef struct tment { struct tment *next; uint32_t len, off, clen; uint64_t F[NS]; w256 W[NW + 1]; uint8_t frame[]; } tment_t;
typedef struct {
  tment_t *head[TM_MAXQ], *tail[TM_MAXQ];
  uint32_t cnt[TM_MAXQ], depth[TM_MAXQ], nq, on, size;
  double rate[TM_MAXQ], tokens[TM_MAXQ], last[TM_MAXQ];  /* rate < 0: none */
  double prate, ptokens, plast;                            /* prate < 0: none */
  uint32_t pframe;                                         /* 0: prate counts packets */
} tmport_t;
struct tmgr {
  tmport_t *port[512];
  uint32_t queued;  /* packets in every queue */
  double clock;     /* < 0: CLOCK_MONOTONIC; else the time np_tm_clock set (tests) */
};

static double tm_now(const struct tmgr *t) {
  if (t->clock >= 0) return t->clock;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static inline double tm_min(double a, double b) { return a < b ? a : b; }

static void tm_free(ctx_t *c) {
  struct tmgr *t = c->tm;
  if (!t) return;
  for (int p = 0; p < 512; p++) {
    tmport_t *q = t->port[p];
    for (uint32_t i = 0; q && i < TM_MAXQ; i++)
      for (tment_t *e = q->head[i], *n; e; e = n) { n = e->next; free(e); }
    free(q);
  }
  free(t);
  c->tm = NULL;
}

/* Configure port's queues (np_tm_cfg): nq queues (slot 0 first), rate[i] < 0 none,
 * depth[i] packets, prate < 0 none, pframe 0 a packet rate. on = 0: the port is no
 * longer shaped natively (what it still holds drains). 0, -1 bad arguments, -2 memory. */
int np_tm_cfg(void *p, uint32_t port, uint32_t nq, const double *rate, const uint32_t *depth, double prate,
              uint32_t pframe, uint32_t on) {
  ctx_t *c = p;
  if (port >= 512 || nq < 1 || nq > TM_MAXQ) return -1;
  int rc = 0;
  pthread_mutex_lock(&c->mu);
  if (!c->tm && (c->tm = calloc(1, sizeof(struct tmgr)))) c->tm->clock = -1;
  tmport_t *q = c->tm ? c->tm->port[port] : NULL;
  if (c->tm && !q && (q = c->tm->port[port] = calloc(1, sizeof(tmport_t)))) {
    for (int i = 0; i < TM_MAXQ; i++) q->tokens[i] = 1.0;  /* traffic.py's PortQueues */
    q->ptokens = 1.0;
  }
  if (!q) { rc = -2; goto done; }
  q->nq = nq; q->on = on; q->prate = prate; q->pframe = pframe;
  for (uint32_t i = 0; i < nq; i++) { q->rate[i] = rate[i]; q->depth[i] = depth[i]; }
done:
  pthread_mutex_unlock(&c->mu);
  return rc;
}

/* Time for the traffic manager from now on (t < 0: the real clock again). */
void np_tm_clock(void *p, double t) {
  ctx_t *c = p;
  pthread_mutex_lock(&c->mu);
  if (!c->tm && (c->tm = calloc(1, sizeof(struct tmgr)))) c->tm->clock = -1;
  if (c->tm) c->tm->clock = t;
  pthread_mutex_unlock(&c->mu);
}

/* How many packets wait in queue slot of port (-1: the port is not shaped natively). */
int np_tm_occupancy(void *p, uint32_t port, uint32_t slot) {
  ctx_t *c = p;
  int n = -1;
  pthread_mutex_lock(&c->mu);
  if (c->tm && port < 512 && c->tm->port[port] && slot < TM_MAXQ) n = (int)c->tm->port[port]->cnt[slot];
  pthread_mutex_unlock(&c->mu);
  return n;
}

/* Admit a packet of priority prio to port's queues (mutex held): the idle port's credit
 * refreshed, then 4 priority out of range, TM_FULL, or its queue slot (>= 0). */
static int tm_admit(ctx_t *c, tmport_t *q, uint64_t prio, uint32_t nbq) {
  if (q->prate >= 0 && !q->size) {  /* an idle port earns no catch-up credit: one frame at most */
    double now = tm_now(c->tm);
    q->ptokens = tm_min(1.0, q->ptokens + (now - q->plast) * q->prate);
    q->plast = now;
  }
  if (prio >= nbq) return -4;
  uint32_t slot = nbq - 1 - (uint32_t)prio;
  return q->cnt[slot] >= q->depth[slot] ? -TM_FULL : (int)slot;
}

/* Append the packet (PHV F / W, len frame bytes after lead zero bytes, payload at off,
 * clen its length for a byte rate) to queue slot of q: TM_QUEUED, or TM_FULL without
 * memory. (lead 1: a frame handed to the Python path is never 0 bytes long.) */
static int tm_put(ctx_t *c, tmport_t *q, uint32_t slot, const uint64_t *F, const w256 *W, const uint8_t *frame,
                  uint32_t off, uint32_t len, uint32_t clen, uint32_t lead) {
  tment_t *e = malloc(sizeof(tment_t) + len + lead);
  if (!e) return TM_FULL;
  e->next = NULL; e->len = len + lead; e->off = off + lead; e->clen = clen;
  memcpy(e->F, F, sizeof e->F);
  clock_enq(c, e->F, q->size);  /* meta.c: at c->now_us, behind what the port holds */
  memset(e->W, 0, sizeof e->W);
  memcpy(e->W, W, sizeof(w256) * NW);  /* np_phv's layout: NW fields (c->W has a scratch one more) */
  memset(e->frame, 0, lead);
  memcpy(e->frame + lead, frame, len);
  if (q->tail[slot]) q->tail[slot]->next = e; else q->head[slot] = e;
  q->tail[slot] = e;
  q->cnt[slot]++; q->size++; c->tm->queued++;
  return TM_QUEUED;
}

/* np_process, after ingress, mutex held: queue the packet in c->F / c->W (frame, len)
 * for eport. 2 when eport is not shaped natively (the Python path queues it),
 * 4 priority out of range, TM_FULL, TM_QUEUED (tm_urgent: drain the port at once). */
static int tm_enqueue(ctx_t *c, const uint8_t *frame, uint32_t len, uint64_t eport, uint32_t nbq,
                      uint32_t *outport, uint32_t *outprio) {
  tmport_t *q = c->tm && eport < 512 ? c->tm->port[eport] : NULL;
  if (!q || !q->on || q->nq != nbq || len > RXSZ) return 2;  /* RXSZ: what the slow buffer holds */
  uint64_t prio = SM_PRIORITY >= 0 ? c->F[SM_PRIORITY] : 0;
  *outport = (uint32_t)eport; *outprio = (uint32_t)(prio & 7);
  int slot = tm_admit(c, q, prio, nbq);
  return slot < 0 ? -slot : tm_put(c, q, (uint32_t)slot, c->F, c->W, frame, c->off, len, len, 0);
}

/* A packet the Python path queues for a port shaped here (a replica, a clone, a frame
 * received one at a time): its PHV (F, W as np_phv lays them out), its payload and its
 * length, so that one scheduler serves the port. As tm_enqueue, with 16 added to
 * TM_QUEUED when its queue has no rate (the caller drains at once). */
int np_tm_push(void *p, const uint64_t *F, const uint64_t *W, const uint8_t *pay, uint32_t plen, uint32_t len,
               uint32_t port, uint32_t nbq) {
  ctx_t *c = p;
  int rc = 2;
  if (plen >= RXSZ) return 2;
  pthread_mutex_lock(&c->mu);
  tmport_t *q = c->tm && port < 512 ? c->tm->port[port] : NULL;
  if (q && q->on && q->nq == nbq) {
    c->now_us = clock_us(c, tm_now(c->tm));  /* the enqueue time (meta.c) */
    uint64_t prio = SM_PRIORITY >= 0 ? F[SM_PRIORITY] : 0;
    int slot = tm_admit(c, q, prio, nbq);
    rc = slot < 0 ? -slot : tm_put(c, q, (uint32_t)slot, F, (const w256 *)W, pay, 0, plen, len, 1);
    if (rc == TM_QUEUED && q->rate[slot] < 0) rc += 16;
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}

/* 1 when the queue the last TM_QUEUED packet went to has no rate (drain its port now). */
static int tm_urgent(const ctx_t *c, uint32_t port, uint32_t prio, uint32_t nbq) {
  const tmport_t *q = c->tm && port < 512 ? c->tm->port[port] : NULL;
  return q && prio < nbq && q->rate[nbq - 1 - prio] < 0;
}

typedef struct { const int32_t *txfd; uint64_t *cnt; uint8_t *slow; uint32_t *slowlen, *slowinfo; } tmio_t;

/* Egress of e, dequeued from port's slot i: sent, dropped (counted), or handed to the
 * Python path (returns 1: its frame in slow, its PHV in c->F / c->W). */
static int tm_egress(ctx_t *c, tment_t *e, uint32_t port, uint32_t prio, const tmio_t *io) {
  memcpy(c->F, e->F, sizeof c->F);
  memcpy(c->W, e->W, sizeof c->W);
  c->off = e->off; c->pkt = e->frame; c->n = e->len;
  int eg = egress_run(c, port, prio);  /* pre.c */
  if (eg == EG_DROPPED) { io->cnt[CNT_PIPE]++; return 0; }
  uint32_t plen = e->len - e->off;
  if (eg == EG_ON && !c->F[H_RECIRC]) {  /* a recirculation: the Python path */
    if (TXARENA - c->txused < TXMAX || c->txn == RXB) tx_flush(c, io->cnt);
    g_update(c, e->frame + e->off, plen);
    uint8_t *out = c->txbuf + c->txused;
    uint32_t h = g_deparse(c, out, TXMAX);
    if (h != UINT32_MAX && h + plen <= TXMAX) {
      memcpy(out + h, e->frame + e->off, plen);
      uint32_t olen = h + plen;
      if (c->F[H_TRUNCATE] && olen > c->F[H_TRUNCATE]) olen = (uint32_t)c->F[H_TRUNCATE];
      tx_port(c, io->txfd, port, olen, io->cnt);  /* io.c */
      return 0;
    }
  }
  if (c->txn) tx_flush(c, io->cnt);  /* what left before it goes first */
  memcpy(io->slow, e->frame, e->len);
  *io->slowlen = e->len;
  *io->slowinfo = 3u | port << 8 | (prio & 0xFF) << 20;  /* resume after egress */
  return 1;
}

/* Dequeue port's queues, highest priority first, as far as the rates allow at now
 * (traffic.py's _drain_port, step for step); *wait: the earliest time a queue that still
 * holds packets may send (seconds from now), lowered, never raised. 1: a packet waits
 * for the Python path (io->slow). */
static int tm_drain_port(ctx_t *c, uint32_t port, tmport_t *q, double now, double *wait, const tmio_t *io) {
  double prate = q->prate;
  for (uint32_t i = 0; i < q->nq; i++) {
    double rate = q->rate[i];
    while (q->head[i]) {
      tment_t *e = q->head[i];
      double cost = 1.0;
      if (prate >= 0) {
        if (q->pframe) cost = tm_min(1.0, (double)e->clen / (double)q->pframe);
        double cap = prate * TM_CATCH_UP_S > 1.0 ? prate * TM_CATCH_UP_S : 1.0;
        q->ptokens = tm_min(cap, q->ptokens + (now - q->plast) * prate);
        q->plast = now;
        if (q->ptokens < cost) {  /* the port is busy: nothing may go, whatever its priority */
          *wait = tm_min(*wait, prate > 0 ? (cost - q->ptokens) / prate : 1.0);
          return 0;
        }
      }
      if (rate >= 0) {
        q->tokens[i] = tm_min(1.0, q->tokens[i] + (now - q->last[i]) * rate);
        q->last[i] = now;
        if (q->tokens[i] < 1.0) {  /* this queue waits for tokens; lower ones may still go */
          *wait = tm_min(*wait, rate > 0 ? (1.0 - q->tokens[i]) / rate : 1.0);
          break;
        }
        q->tokens[i] -= 1.0;
      }
      if (prate >= 0) q->ptokens -= cost;
      if (!(q->head[i] = e->next)) q->tail[i] = NULL;
      q->cnt[i]--; q->size--; c->tm->queued--;
      c->now_us = clock_us(c, now); c->deq = q->size;  /* the dequeue time and depth (meta.c) */
      int slow = tm_egress(c, e, port, q->nq - 1 - i, io);
      c->deq = -1;
      free(e);
      if (slow) return 1;
    }
  }
  return 0;
}

/* np_rx, after a TM_QUEUED packet to a queue without a rate: drain its port now. */
static int tm_drain_now(ctx_t *c, uint32_t port, const int32_t *txfd, uint64_t *cnt, uint8_t *slow,
                        uint32_t *slowlen, uint32_t *slowinfo) {
  tmio_t io = { txfd, cnt, slow, slowlen, slowinfo };
  double wait = 1e9;
  pthread_mutex_lock(&c->mu);
  int r = tm_drain_port(c, port, c->tm->port[port], tm_now(c->tm), &wait, &io);
  pthread_mutex_unlock(&c->mu);
  return r;
}

/* np_tm_push's caller, for a queue without a rate: drain port now (tm_drain_now); 1 when
 * a packet waits for the Python path in slow. */
int np_tm_drain_port(void *p, uint32_t port, const int32_t *txfd, uint64_t *cnt, uint8_t *slow, uint32_t *slowlen,
                     uint32_t *slowinfo) {
  ctx_t *c = p;
  *slowlen = 0;
  if (!c->tm || port >= 512 || !c->tm->port[port]) return 0;
  if (!c->txbuf && !(c->txbuf = malloc(TXARENA))) return 0;
  int r = tm_drain_now(c, port, txfd, cnt, slow, slowlen, slowinfo);
  if (c->txn) tx_flush(c, cnt);
  return r;
}

/* Dequeue what the rates allow on every port (now < 0: the traffic manager's clock),
 * send it, and set *wait to the seconds until the next departure (-1: nothing waits).
 * Returns how many packets left the queues, or -1 without memory; *slowlen != 0 when
 * the last one waits for the Python path (call again after it: the rest stay queued). */
int np_tm_drain(void *p, double now, const int32_t *txfd, uint64_t *cnt, uint8_t *slow, uint32_t *slowlen,
                uint32_t *slowinfo, double *wait) {
  ctx_t *c = p;
  tmio_t io = { txfd, cnt, slow, slowlen, slowinfo };
  double w = 1e9;
  int k = 0;
  *slowlen = 0;
  *wait = -1;
  if (!c->tm || !c->tm->queued) return 0;  /* a read without the mutex: a packet is counted in queued before it returns */
  if (!c->txbuf && !(c->txbuf = malloc(TXARENA))) return -1;
  pthread_mutex_lock(&c->mu);
  struct tmgr *t = c->tm;
  if (now < 0) now = tm_now(t);
  uint32_t before = t->queued;
  for (uint32_t port = 0; port < 512 && t->queued; port++) {
    tmport_t *q = t->port[port];
    if (q && q->size && tm_drain_port(c, port, q, now, &w, &io)) break;
  }
  k = (int)(before - t->queued);
  if (t->queued && !*slowlen) *wait = w < 0 ? 0 : w;
  pthread_mutex_unlock(&c->mu);
  if (c->txn) tx_flush(c, cnt);
  return k;
}
