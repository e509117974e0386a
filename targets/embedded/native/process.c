/* gradnet native backend: simple_switch's packet flow for the common case (hand-written).
 * One call runs parser, checksum verification, ingress, the (unshaped) traffic manager,
 * egress, checksum update and deparser, multicast and ingress clones included (pre.c),
 * egress clones (E2E) of a unicast, resubmit, recirculate and truncate too (a resubmit or recirculation enters ingress
 * again with the template's PHV but the ingress port and the field list's fields, as
 * switch.py's _reenter; MAX_LOOPS such passes at most), digests (queued). What it does
 * not finish -- a digest or resubmit with an ingress clone, a digest when the queue is
 * full, a port shaped outside C (fast 0; 2: queued in C, tm.c) or unknown -- it leaves in
 * the instance's PHV, with the frame of the pass in c->pkt / c->n, and says where the
 * Python path must resume:
 *   0 sent (out, *outlen, *outport)   1 dropped by the pipeline (ingress or egress)
 *   2 resume after ingress            3 resume after egress     4 priority out of range
 *   5 dropped by egress (after the traffic manager counted it)
 *   6 replicated (multicast, I2E clone): every copy finished (pre.c: np_mc_out)
 *   7 replication stopped at a copy the Python path resumes (pre.c: np_mc_stop)
 *   8 dropped: a resubmit or recirculation past MAX_LOOPS passes
 *  10 queued in a shaped queue (tm.c)   11 dropped by a shaped queue, full (tm.c)
 * A digest is queued in the instance (learn_push) for the Python side.
 * Each recirculated pass went through a queue: c->lq lists them (np_loops), for the
 * traffic manager's counts. */
#define MAX_LOOPS 32    /* switch.py's MAX_LOOPS */
#define LOOP_LIMIT 8
#define IT_RECIRC 4
#define IT_RESUBMIT 6
#define RCMAX 65536    /* io.c hands at most this much of a frame to the Python path */

/* The digest ingress asked for (learn list F[H_LEARN]) queued for the Python side, which
 * delivers the queue at the end of a batch (np_digests; packets never wait for it); 1 when
 * it has no room (the Python path then delivers the queue, then this one). */
static int learn_push(ctx_t *c) {
  if (!ev_room(c, 1 + LEARN_MAXW)) return 1;  /* meta.c */
  int k = g_learn(c->F, c->W, c->F[H_LEARN], c->dq + c->dqn + 1);
  if (k >= 0) { c->dq[c->dqn] = c->F[H_LEARN]; c->dqn += 1 + (uint32_t)k; }
  c->F[H_LEARN] = 0;  /* an unknown list: nothing, as switch.py's _learn */
  return 0;
}

/* switch.py's _reenter: a fresh PHV but the ingress port and field list fl's fields. */
static void reenter(ctx_t *c, uint64_t fl, uint64_t it, uint32_t len) {
  memcpy(c->RF, c->F, sizeof c->F);
  memcpy(c->RW, c->W, sizeof c->W);
  memcpy(c->F, TEMPLATE, sizeof c->F);
  memset(c->W, 0, sizeof c->W);
  c->F[H_INPORT] = c->RF[H_INPORT];
  g_copy_fl(c->F, c->W, c->RF, c->RW, fl);
  c->F[SM_INSTANCE_TYPE] = it;
  c->F[SM_PACKET_LENGTH] = len;
  c->loops++;
}

/* After a unicast's deparse into out (olen bytes): truncate; a recirculation copies the
 * frame into rcbuf for the next pass (-1), else 0 (send it), LOOP_LIMIT, or 3 (no room). */
static int unicast_tail(ctx_t *c, uint8_t *out, uint32_t *olen, uint32_t port, uint32_t prio) {
  uint64_t *F = c->F;
  if (F[H_TRUNCATE] && *olen > F[H_TRUNCATE]) *olen = (uint32_t)F[H_TRUNCATE];
  if (!F[H_RECIRC]) return 0;
  if (c->nlq < sizeof c->lq / sizeof c->lq[0]) c->lq[c->nlq++] = port | prio << 16;
  if (c->loops >= MAX_LOOPS) return LOOP_LIMIT;
  if (*olen > RCMAX || (!c->rcbuf && !(c->rcbuf = malloc(RCMAX)))) return 3;
  memcpy(c->rcbuf, out, *olen);
  reenter(c, F[H_RECIRC] & ~H_FLAG, IT_RECIRC, *olen);
  return -1;
}

int np_process(void *p, const uint8_t *frame, uint32_t len, uint32_t port, uint64_t now_us, uint32_t nbq,
               const uint8_t *fast, uint8_t *out, uint32_t cap, uint32_t *outlen, uint32_t *outport,
               uint32_t *outprio) {
  ctx_t *c = p;
  uint64_t *F = c->F;
  int rc;
  pthread_mutex_lock(&c->mu);
  memcpy(F, TEMPLATE, sizeof c->F);
  memset(c->W, 0, sizeof c->W);
  F[SM_INGRESS_PORT] = F[H_INPORT] = port;
  F[SM_PACKET_LENGTH] = len;
  if (TM_IG_TS >= 0) F[TM_IG_TS] = now_us;
  c->now_us = now_us; c->deq = -1;  /* meta.c */
  c->loops = c->nlq = 0;
again:
  F[H_PKTLEN] = F[H_ILEN] = len;
  c->pkt = frame; c->n = len;
  c->off = g_parse(c);
  if (g_verify(c) && SM_CHECKSUM_ERROR >= 0) F[SM_CHECKSUM_ERROR] = 1;
  g_ingress(c);
  F[H_EXIT] = 0;
  if (F[H_LEARN] && !F[H_CLONE] && learn_push(c)) { rc = 2; goto done; }  /* with a clone: Python (it goes first) */
  if (F[H_RESUBMIT] && !(F[H_LEARN] | F[H_CLONE])) {
    if (c->loops >= MAX_LOOPS) { rc = LOOP_LIMIT; goto done; }
    reenter(c, F[H_RESUBMIT] & ~H_FLAG, IT_RESUBMIT, len);
    goto again;
  }
  if (F[H_LEARN] | F[H_RESUBMIT]) { rc = 2; goto done; }
  if (F[H_CLONE]) { rc = pre_i2e(c, frame, len, nbq, fast, outport, outprio); goto done; }
  if (SM_MCAST_GRP >= 0 && F[SM_MCAST_GRP]) { rc = pre_mcast(c, frame, len, nbq, fast, outport, outprio, 1); goto done; }
  uint64_t eport = F[SM_EGRESS_SPEC];
  if (eport == 511) { rc = 1; goto done; }
  F[SM_INSTANCE_TYPE] = 0;
  if (eport >= 512 || fast[eport] != 1) {  /* 2: a shaped queue in C (tm.c), else the Python path's */
    rc = eport < 512 && fast[eport] == 2 ? tm_enqueue(c, frame, len, eport, nbq, outport, outprio) : 2;
    goto done;
  }
  uint64_t prio = SM_PRIORITY >= 0 ? F[SM_PRIORITY] : 0;
  *outport = (uint32_t)eport; *outprio = (uint32_t)prio;
  if (prio >= nbq) { rc = 4; goto done; }
  int eg = egress_run(c, eport, prio);  /* pre.c */
  if (eg == EG_PYTHON) {  /* an egress clone (pre.c) */
    rc = pre_e2e(c, frame, len, (uint32_t)eport, (uint32_t)prio, nbq, fast, outport, outprio);
    goto done;
  }
  if (eg == EG_DROPPED) { rc = 5; goto done; }
  uint32_t plen = len - c->off;
  g_update(c, frame + c->off, plen);
  uint32_t h = g_deparse(c, out, cap);
  if (h == UINT32_MAX || h + plen > cap) { rc = 3; goto done; }
  memcpy(out + h, frame + c->off, plen);
  *outlen = h + plen;
  rc = unicast_tail(c, out, outlen, (uint32_t)eport, (uint32_t)prio);
  if (rc < 0) { frame = c->rcbuf; len = c->n = *outlen; goto again; }
done:
  pthread_mutex_unlock(&c->mu);
  return rc;
}

/* This packet's resubmits and recirculations (c->loops); into enq (33 words) the queue of
 * each recirculated pass (port | prio << 16), their number in *nenq. */
uint32_t np_loops(void *p, uint32_t *enq, uint32_t *nenq) {
  ctx_t *c = p;
  memcpy(enq, c->lq, sizeof(uint32_t) * c->nlq);
  *nenq = c->nlq;
  return c->loops;
}

/* The frame of the pass the Python path resumes (a recirculated one, or the received
 * one): up to cap bytes into buf; its length. */
uint32_t np_cur(void *p, uint8_t *buf, uint32_t cap) {
  ctx_t *c = p;
  uint32_t n = c->n < cap ? c->n : cap;
  if (c->pkt) memcpy(buf, c->pkt, n);
  return n;
}
