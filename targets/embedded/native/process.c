/* gradnet native backend: simple_switch's packet flow for the common case (hand-written).
 * One call runs parser, checksum verification, ingress, the (unshaped) traffic manager,
 * egress, checksum update and deparser, multicast and ingress clones included (pre.c).
 * What it does not finish -- egress clone, digest, resubmit, recirculate, truncate, a
 * port shaped outside C (fast 0; 2: queued in C, tm.c) or unknown -- it leaves in
 * the instance's PHV and says where the Python path must resume:
 *   0 sent (out, *outlen, *outport)   1 dropped by the pipeline (ingress or egress)
 *   2 resume after ingress            3 resume after egress     4 priority out of range
 *   5 dropped by egress (after the traffic manager counted it)
 *   6 replicated (multicast, I2E clone): every copy finished (pre.c: np_mc_out)
 *   7 replication stopped at a copy the Python path resumes (pre.c: np_mc_stop)
 *   8 queued in a shaped queue (tm.c)   9 dropped by a shaped queue, full (tm.c) */
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
  F[H_PKTLEN] = F[H_ILEN] = len;
  c->pkt = frame; c->n = len;
  c->off = g_parse(c);
  if (g_verify(c) && SM_CHECKSUM_ERROR >= 0) F[SM_CHECKSUM_ERROR] = 1;
  g_ingress(c);
  F[H_EXIT] = 0;
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
  if (eg == EG_PYTHON) { rc = 3; goto done; }
  if (eg == EG_DROPPED) { rc = 5; goto done; }
  uint32_t plen = len - c->off;
  g_update(c, frame + c->off, plen);
  uint32_t h = g_deparse(c, out, cap);
  if (h == UINT32_MAX || h + plen > cap) { rc = 3; goto done; }
  memcpy(out + h, frame + c->off, plen);
  *outlen = h + plen;
  rc = 0;
done:
  pthread_mutex_unlock(&c->mu);
  return rc;
}
