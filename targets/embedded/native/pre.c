/* gradnet native backend: the packet replication engine (hand-written; nothing in this
 * file comes from a BMv2 JSON). Multicast groups and clone sessions live in native
 * memory, written by the control plane through np_pre_set / np_pre_del / np_pre_clear
 * under the instance's mutex (so atomic with respect to packets, as table writes are),
 * one group or session at a time.
 *
 * pre_mcast runs what simple_switch does after an ingress that set mcast_grp: for each
 * replica of the group, in order, a copy of the PHV left by ingress (instance_type
 * REPLICATION, egress_rid the replica's), the traffic manager's priority check, the
 * egress pipeline, checksum update and deparse into the instance's replica arena.
 * pre_i2e does the same for an ingress clone (I2E) to a session -- the frame parsed
 * again, metadata reset, the field list copied, instance_type INGRESS_CLONE, the
 * session's truncation -- then the original's multicast or unicast; pre_e2e for an
 * egress clone (E2E) of a unicast, after the original. The caller sends
 * the records (frame, port, outcome) in order through its one per-port send function.
 * A replica C cannot finish -- to a shaped port or the CPU port, or an egress asking
 * for a clone or a recirculation -- stops there: the records before it are sent,
 * and the Python path resumes at replica k of the stage (np_mc_stop). A clone session
 * with a port C cannot serve, a digest, a resubmit with a clone, an egress clone of a
 * replica or with a recirculation leave the whole packet to Python.
 * Needs the generated constants and g_parse, g_egress, g_update, g_deparse,
 * g_reset_meta, g_copy_fl. */

typedef struct { uint64_t id; uint32_t n, trunc; uint64_t rep[]; } mcg_t;  /* rep: port | rid << 32 */
typedef struct { mcg_t **slot; uint32_t cap, cnt; } mtab_t;  /* open addressing on the id */
typedef struct { uint32_t off, len, port, prio, rc; } mrec_t;  /* rc: 0 sent, 1 dropped, 4 bad priority, 5 egress drop */
struct pre {
  mtab_t tab[2];                     /* PRE_GROUPS, PRE_SESSIONS */
  uint8_t *arena; size_t acap, used; /* the replicas' frames */
  mrec_t *rec; uint32_t rcap, nout;  /* what each replica did, in order */
  uint64_t id; uint32_t k, egressed, stage;  /* where a stopped replication resumes (PRE_STOP) */
  uint64_t F0[NS]; w256 W0[NW + 1];  /* the PHV after ingress */
  uint64_t C0[NS]; w256 CW0[NW + 1]; /* an ingress clone's, before its egress */
};
#define PRE_GROUPS 0
#define PRE_SESSIONS 1
#define PRE_DONE 6   /* np_process: every replica finished (records in np_mc_out) */
#define PRE_STOP 7   /* np_process: records 0..k-1 finished, the Python path resumes at k */
enum { ST_MCAST, ST_I2E, ST_UNICAST, ST_E2E };  /* the stage a PRE_STOP resumes in */
#define IT_NORMAL 0
#define IT_I2E 1
#define IT_E2E 2
#define IT_REPLICATION 5

static inline uint64_t mc_hash(uint64_t id) { return tmix(&id, 1); }

static struct pre *pre_get(ctx_t *c) {
  if (!c->pre) c->pre = calloc(1, sizeof(struct pre));
  return c->pre;
}

static void mt_free(mcg_t **slot, uint32_t cap) {
  for (uint32_t i = 0; i < cap; i++) free(slot[i]);
  free(slot);
}

static void pre_free(ctx_t *c) {
  struct pre *m = c->pre;
  if (!m) return;
  for (int t = 0; t < 2; t++) mt_free(m->tab[t].slot, m->tab[t].cap);
  free(m->arena); free(m->rec); free(m);
  c->pre = NULL;
}

/* the slot holding id, else the empty slot where it would go (cap > cnt, a power of 2) */
static uint32_t mt_slot(const mtab_t *t, uint64_t id) {
  uint32_t mask = t->cap - 1, s = (uint32_t)mc_hash(id) & mask;
  while (t->slot[s] && t->slot[s]->id != id) s = (s + 1) & mask;
  return s;
}

static const mcg_t *mt_find(const mtab_t *t, uint64_t id) { return t->cap ? t->slot[mt_slot(t, id)] : NULL; }

static int mt_grow(mtab_t *t) {
  uint32_t cap = t->cap ? t->cap * 2 : 16;
  mcg_t **ns = calloc(cap, sizeof *ns);
  if (!ns) return -2;
  mcg_t **old = t->slot;
  uint32_t ocap = t->cap;
  t->slot = ns; t->cap = cap;
  for (uint32_t i = 0; i < ocap; i++)
    if (old[i]) t->slot[mt_slot(t, old[i]->id)] = old[i];
  free(old);
  return 0;
}

/* Insert or replace group or session id (kind PRE_GROUPS / PRE_SESSIONS): n replicas
 * (ports[i], rids[i]), a session's copies cut to trunc bytes (0: whole). */
int np_pre_set(void *p, int kind, uint64_t id, uint32_t n, const uint32_t *ports, const uint32_t *rids,
               uint32_t trunc) {
  ctx_t *c = p;
  if (kind != PRE_GROUPS && kind != PRE_SESSIONS) return -1;
  mcg_t *g = malloc(sizeof(mcg_t) + 8 * (size_t)(n ? n : 1));
  if (!g) return -2;
  g->id = id; g->n = n; g->trunc = trunc;
  for (uint32_t i = 0; i < n; i++) g->rep[i] = (uint64_t)ports[i] | (uint64_t)rids[i] << 32;
  pthread_mutex_lock(&c->mu);
  struct pre *m = pre_get(c);
  mtab_t *t = m ? &m->tab[kind] : NULL;
  if (!t || (2 * (t->cnt + 1) > t->cap && mt_grow(t))) { pthread_mutex_unlock(&c->mu); free(g); return -2; }
  uint32_t s = mt_slot(t, id);
  mcg_t *old = t->slot[s];
  t->slot[s] = g;
  if (!old) t->cnt++;
  pthread_mutex_unlock(&c->mu);
  free(old);
  return 0;
}

/* Delete one (linear probing, backward-shift deletion: no tombstones); 1 if absent. */
int np_pre_del(void *p, int kind, uint64_t id) {
  ctx_t *c = p;
  if (kind != PRE_GROUPS && kind != PRE_SESSIONS) return -1;
  pthread_mutex_lock(&c->mu);
  mtab_t *t = c->pre ? &c->pre->tab[kind] : NULL;
  if (!t || !t->cap || !t->slot[mt_slot(t, id)]) { pthread_mutex_unlock(&c->mu); return 1; }
  uint32_t mask = t->cap - 1, i = mt_slot(t, id), j = i;
  mcg_t *old = t->slot[i];
  t->slot[i] = NULL;
  t->cnt--;
  for (;;) {
    j = (j + 1) & mask;
    if (!t->slot[j]) break;
    uint32_t h = (uint32_t)mc_hash(t->slot[j]->id) & mask;
    int stays = i < j ? (i < h && h <= j) : (i < h || h <= j);  /* its home lies in (i, j] */
    if (!stays) { t->slot[i] = t->slot[j]; t->slot[j] = NULL; i = j; }
  }
  pthread_mutex_unlock(&c->mu);
  free(old);
  return 0;
}

int np_pre_clear(void *p, int kind) {
  ctx_t *c = p;
  if (kind != PRE_GROUPS && kind != PRE_SESSIONS) return -1;
  pthread_mutex_lock(&c->mu);
  mtab_t *t = c->pre ? &c->pre->tab[kind] : NULL;
  mcg_t **slot = t ? t->slot : NULL;
  uint32_t cap = t ? t->cap : 0;
  if (t) { t->slot = NULL; t->cap = t->cnt = 0; }
  pthread_mutex_unlock(&c->mu);
  mt_free(slot, cap);
  return 0;
}

/* room for n more records of hdr + payload bytes each */
static int pre_room(struct pre *m, uint32_t n, uint32_t plen) {
  size_t need = m->used + (size_t)n * ((HDRMAX + plen + 63) & ~(size_t)63);
  if (need > m->acap) {
    uint8_t *a = realloc(m->arena, need);
    if (!a) return -1;
    m->arena = a; m->acap = need;
  }
  if (m->nout + n > m->rcap) {
    mrec_t *r = realloc(m->rec, sizeof(mrec_t) * (m->nout + n));
    if (!r) return -1;
    m->rec = r; m->rcap = m->nout + n;
  }
  return 0;
}

/* simple_switch's egress of the PHV in c->F as it leaves for port at priority prio
 * (queue prio; process.c's unicast and each replica here): EG_ON to deparse (then the
 * caller truncates and recirculates), EG_PYTHON the Python path must finish it (egress
 * asked for a clone), EG_DROPPED by egress. */
enum { EG_ON, EG_PYTHON, EG_DROPPED };
static inline int egress_run(ctx_t *c, uint64_t port, uint64_t prio) {
  uint64_t *F = c->F;
  if (SM_QID >= 0) F[SM_QID] = prio;
  F[SM_EGRESS_PORT] = port;
  F[SM_EGRESS_SPEC] = 0;
  F[SM_PACKET_LENGTH] = F[H_PKTLEN];
  clock_deq(c, F);  /* meta.c */
  g_egress(c);
  F[H_EXIT] = 0;
  if (F[H_CLONE]) return EG_PYTHON;
  return F[SM_EGRESS_SPEC] == 511 ? EG_DROPPED : EG_ON;
}

static void pre_phv(ctx_t *c, const uint64_t *F, const w256 *W) {
  memcpy(c->F, F, sizeof c->F);
  memcpy(c->W, W, sizeof(w256) * NW);
}

/* Replicas rep[0..n) of the PHV (B, BW), in order (see the file's comment): records
 * appended; PRE_DONE, or PRE_STOP at replica m->k. set_rid: a PRE copy (egress_rid =
 * the replica's), not the original going out. trunc: cut each frame to it (0: not). */
static int pre_run(ctx_t *c, struct pre *m, const uint64_t *rep, uint32_t n, int set_rid, uint32_t trunc,
                   const uint64_t *B, const w256 *BW, const uint8_t *pay, uint32_t plen, uint32_t nbq,
                   const uint8_t *fast, uint32_t *outport, uint32_t *outprio) {
  uint64_t *F = c->F;
  uint64_t prio = SM_PRIORITY >= 0 ? B[SM_PRIORITY] : 0;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t port = (uint32_t)rep[k], rid = (uint32_t)(rep[k] >> 32);
    m->k = k; m->egressed = 0;
    *outport = port; *outprio = (uint32_t)prio;
    if (port >= 512 || fast[port] != 1) return PRE_STOP;  /* 2: a shaped queue (tm.c) */
    pre_phv(c, B, BW);
    if (set_rid && SM_EGRESS_RID >= 0) F[SM_EGRESS_RID] = rid;
    mrec_t *r = &m->rec[m->nout];
    r->port = port; r->prio = (uint32_t)prio; r->off = (uint32_t)m->used; r->len = 0;
    if (prio >= nbq) { r->rc = 4; m->nout++; continue; }
    int eg = egress_run(c, port, prio);
    m->egressed = 1;
    if (eg == EG_PYTHON) return PRE_STOP;
    if (eg == EG_DROPPED) { r->rc = 5; m->nout++; continue; }
    if (F[H_RECIRC]) return PRE_STOP;  /* a copy recirculated: the Python path */
    g_update(c, pay, plen);
    uint8_t *out = m->arena + m->used;
    uint32_t h = g_deparse(c, out, HDRMAX + plen);
    if (h == UINT32_MAX) return PRE_STOP;
    memcpy(out + h, pay, plen);
    r->len = h + plen;
    if (F[H_TRUNCATE] && r->len > F[H_TRUNCATE]) r->len = (uint32_t)F[H_TRUNCATE];
    if (trunc && r->len > trunc) r->len = trunc;
    r->rc = 0;
    m->used += (h + plen + 63) & ~(size_t)63;
    m->nout++;
  }
  return PRE_DONE;
}

/* After an ingress that set mcast_grp (c->F): its replicas. fresh: the first records of
 * this packet. PRE_DONE, PRE_STOP (*outport, *outprio: replica k's), or 2 (Python). */
static int pre_mcast(ctx_t *c, const uint8_t *frame, uint32_t len, uint32_t nbq, const uint8_t *fast,
                     uint32_t *outport, uint32_t *outprio, int fresh) {
  uint64_t *F = c->F;
  struct pre *m = pre_get(c);
  if (!m) return 2;
  F[SM_INSTANCE_TYPE] = IT_REPLICATION;
  if (fresh) { m->nout = 0; m->used = 0; }
  m->stage = ST_MCAST; m->id = F[SM_MCAST_GRP]; m->k = 0; m->egressed = 0;
  memcpy(m->F0, F, sizeof c->F);
  memcpy(m->W0, c->W, sizeof(w256) * NW);
  const mcg_t *g = mt_find(&m->tab[PRE_GROUPS], m->id);
  if (!g) return PRE_DONE;  /* no such group: no copies, nothing counted */
  uint32_t plen = len - c->off;
  if (pre_room(m, g->n, plen)) return fresh ? 2 : PRE_STOP;
  return pre_run(c, m, g->rep, g->n, 1, 0, m->F0, m->W0, frame + c->off, plen, nbq, fast, outport, outprio);
}

/* After an ingress that asked for an I2E clone (and no digest, no resubmit): the
 * session's copies, then the original's multicast or unicast (see the file's comment). */
static int pre_i2e(ctx_t *c, const uint8_t *frame, uint32_t len, uint32_t nbq, const uint8_t *fast,
                   uint32_t *outport, uint32_t *outprio) {
  uint64_t *F = c->F;
  struct pre *m = pre_get(c);
  if (!m) return 2;
  const mcg_t *s = mt_find(&m->tab[PRE_SESSIONS], F[H_CLONE] & ~H_FLAG);
  for (uint32_t k = 0; s && k < s->n; k++)
    if ((uint32_t)s->rep[k] >= 512 || fast[(uint32_t)s->rep[k]] != 1) return 2;  /* before any side effect */
  uint64_t fl = F[H_CLONE_FL];
  uint32_t off = c->off, plen = len - off;
  F[H_CLONE] = F[H_CLONE_FL] = 0;
  m->nout = 0; m->used = 0;
  if (pre_room(m, (s ? s->n : 0) + 1, plen)) return 2;
  memcpy(m->F0, F, sizeof c->F);
  memcpy(m->W0, c->W, sizeof(w256) * NW);
  if (s) {  /* the frame as received, parsed again; fresh metadata but the field list's */
    memcpy(F, TEMPLATE, sizeof c->F);
    memset(c->W, 0, sizeof c->W);
    F[SM_INGRESS_PORT] = F[H_INPORT] = m->F0[H_INPORT];
    g_parse(c);
    g_reset_meta(F, c->W);
    g_copy_fl(F, c->W, m->F0, m->W0, fl);
    F[SM_INSTANCE_TYPE] = IT_I2E;
    F[H_PKTLEN] = F[H_ILEN] = len;
    memcpy(m->C0, F, sizeof c->F);
    memcpy(m->CW0, c->W, sizeof(w256) * NW);
    c->off = off;  /* the same parse of the same frame */
    m->stage = ST_I2E; m->id = s->id;
    int rc = pre_run(c, m, s->rep, s->n, 1, s->trunc, m->C0, m->CW0, frame + off, plen, nbq, fast, outport, outprio);
    if (rc != PRE_DONE) return rc;
    pre_phv(c, m->F0, m->W0);
  }
  if (SM_MCAST_GRP >= 0 && F[SM_MCAST_GRP]) return pre_mcast(c, frame, len, nbq, fast, outport, outprio, 0);
  uint64_t eport = F[SM_EGRESS_SPEC];
  if (eport == 511) {  /* dropped by ingress */
    mrec_t *r = &m->rec[m->nout++];
    r->off = r->len = r->port = r->prio = 0; r->rc = 1;
    return PRE_DONE;
  }
  F[SM_INSTANCE_TYPE] = IT_NORMAL;
  memcpy(m->F0, F, sizeof c->F);
  m->stage = ST_UNICAST; m->id = 0;
  uint64_t one = eport < 512 ? eport : 512;  /* 512: not a port C serves */
  return pre_run(c, m, &one, 1, 0, 0, m->F0, m->W0, frame + off, plen, nbq, fast, outport, outprio);
}

/* After a unicast's egress that asked for an E2E clone (c->F; switch.py's _egress_tail):
 * the original's record (deparsed and truncated, or its egress drop), then the session's
 * copies of its PHV -- metadata reset, the field list's fields, instance_type EGRESS_CLONE
 * -- each through its own egress, cut to the session's length. PRE_DONE, PRE_STOP at a
 * copy, or 3 (the Python path, nothing done: a recirculation too, a session port C cannot
 * serve, no room). */
static int pre_e2e(ctx_t *c, const uint8_t *frame, uint32_t len, uint32_t port, uint32_t prio, uint32_t nbq,
                   const uint8_t *fast, uint32_t *outport, uint32_t *outprio) {
  uint64_t *F = c->F;
  struct pre *m = pre_get(c);
  if (!m || F[H_RECIRC]) return 3;
  const mcg_t *s = mt_find(&m->tab[PRE_SESSIONS], F[H_CLONE] & ~H_FLAG);
  for (uint32_t k = 0; s && k < s->n; k++)
    if ((uint32_t)s->rep[k] >= 512 || fast[(uint32_t)s->rep[k]] != 1) return 3;
  uint32_t off = c->off, plen = len - off;
  m->nout = 0; m->used = 0;
  if (pre_room(m, (s ? s->n : 0) + 1, plen)) return 3;
  uint64_t fl = F[H_CLONE_FL];
  F[H_CLONE] = F[H_CLONE_FL] = 0;
  if (s) {
    memcpy(m->C0, F, sizeof c->F);
    memcpy(m->CW0, c->W, sizeof(w256) * NW);
    g_reset_meta(m->C0, m->CW0);
    g_copy_fl(m->C0, m->CW0, F, c->W, fl);
    m->C0[SM_INSTANCE_TYPE] = IT_E2E;
  }
  mrec_t *r = &m->rec[m->nout++];
  r->port = port; r->prio = prio; r->off = (uint32_t)m->used; r->len = 0; r->rc = 5;
  if (F[SM_EGRESS_SPEC] != 511) {
    g_update(c, frame + off, plen);
    uint8_t *out = m->arena + m->used;
    uint32_t h = g_deparse(c, out, HDRMAX + plen);
    if (h != UINT32_MAX) {  /* the arena holds HDRMAX + plen: always */
      memcpy(out + h, frame + off, plen);
      r->len = h + plen;
      if (F[H_TRUNCATE] && r->len > F[H_TRUNCATE]) r->len = (uint32_t)F[H_TRUNCATE];
      r->rc = 0;
      m->used += (h + plen + 63) & ~(size_t)63;
    }
  }
  if (!s) return PRE_DONE;
  m->stage = ST_E2E; m->id = s->id;
  return pre_run(c, m, s->rep, s->n, 1, s->trunc, m->C0, m->CW0, frame + off, plen, nbq, fast, outport, outprio);
}

/* The records of the last replication (5 words each: off, len, port, prio, rc; at most
 * max copied), their frames at np_mc_arena() + off; returns how many there are. */
uint32_t np_mc_out(void *p, uint32_t *rec, uint32_t max) {
  ctx_t *c = p;
  struct pre *m = c->pre;
  uint32_t n = m ? m->nout : 0;
  if (n) memcpy(rec, m->rec, sizeof(mrec_t) * (n < max ? n : max));
  return n;
}
const uint8_t *np_mc_arena(void *p) { ctx_t *c = p; return c->pre ? c->pre->arena : NULL; }

/* Where a PRE_STOP replication resumes: its stage (ST_*), group or session id, replica
 * k (returned), whether k's egress ran (its PHV is then np_phv's); into F/W (as np_phv
 * lays them out) the PHV after ingress (which 0) or the I2E clone's (which 1). */
uint32_t np_mc_stop(void *p, int which, uint64_t *id, uint32_t *egressed, uint32_t *stage, uint64_t *F, uint64_t *W) {
  ctx_t *c = p;
  struct pre *m = c->pre;
  if (!m) return UINT32_MAX;
  *id = m->id; *egressed = m->egressed; *stage = m->stage;
  memcpy(F, which ? m->C0 : m->F0, sizeof m->F0);
  memcpy(W, which ? m->CW0 : m->W0, sizeof(w256) * NW);
  return m->k;
}
