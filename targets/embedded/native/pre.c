/* gradnet native backend: the packet replication engine's multicast groups (hand-written;
 * nothing in this file comes from a BMv2 JSON). Groups live in native memory, written by
 * the control plane through np_mc_set / np_mc_del / np_mc_clear under the instance's
 * mutex (so atomic with respect to packets, as table writes are), one group at a time.
 *
 * pre_mcast runs what simple_switch does after an ingress that set mcast_grp: for each
 * replica of the group, in order, a copy of the PHV left by ingress (instance_type
 * REPLICATION, egress_rid the replica's), the traffic manager's priority check, the
 * egress pipeline, checksum update and deparse into the instance's replica arena. The
 * caller sends the replicas (records: frame, port, outcome) in order through its one
 * per-port send function. A replica C cannot finish -- to a shaped port or the CPU port,
 * or an egress asking for clone, truncate or recirculate -- stops the loop there: the
 * replicas before it are sent, and the Python path resumes from replica k (its PHV after
 * egress when it ran, else the PHV after ingress, kept in np_mc_phv0).
 * Needs the generated constants and g_egress, g_update, g_deparse. */

typedef struct { uint64_t gid; uint32_t n; uint64_t rep[]; } mcg_t;  /* rep: port | rid << 32 */
typedef struct { uint32_t off, len, port, prio, rc; } mrec_t;  /* rc: 0 sent, 4 bad priority, 5 dropped */
struct pre {
  mcg_t **slot; uint32_t cap, cnt;   /* groups: open addressing on the group id */
  uint8_t *arena; size_t acap;       /* the replicas' frames */
  mrec_t *rec; uint32_t rcap, nout;  /* what each replica did, in order */
  uint64_t gid; uint32_t k, egressed;  /* where a stopped replication resumes (PRE_STOP) */
  uint64_t F0[NS]; w256 W0[NW + 1];  /* the PHV after ingress */
};
#define PRE_DONE 6   /* np_process: every replica finished (records in np_mc_out) */
#define PRE_STOP 7   /* np_process: records 0..k-1 finished, the Python path resumes at k */
#define PRE_REPLICATION 5  /* instance_type of a multicast replica */

static inline uint64_t mc_hash(uint64_t gid) { return tmix(&gid, 1); }

static struct pre *pre_get(ctx_t *c) {
  if (!c->pre) c->pre = calloc(1, sizeof(struct pre));
  return c->pre;
}

static void pre_free(ctx_t *c) {
  struct pre *m = c->pre;
  if (!m) return;
  for (uint32_t i = 0; i < m->cap; i++) free(m->slot[i]);
  free(m->slot); free(m->arena); free(m->rec); free(m);
  c->pre = NULL;
}

/* the slot holding gid, else the empty slot where it would go (cap > cnt, a power of 2) */
static uint32_t mc_slot(const struct pre *m, uint64_t gid) {
  uint32_t mask = m->cap - 1, s = (uint32_t)mc_hash(gid) & mask;
  while (m->slot[s] && m->slot[s]->gid != gid) s = (s + 1) & mask;
  return s;
}

static const mcg_t *mc_find(const struct pre *m, uint64_t gid) {
  return m && m->cap ? m->slot[mc_slot(m, gid)] : NULL;
}

static int mc_grow(struct pre *m) {
  uint32_t cap = m->cap ? m->cap * 2 : 16;
  mcg_t **ns = calloc(cap, sizeof *ns);
  if (!ns) return -2;
  mcg_t **old = m->slot;
  uint32_t ocap = m->cap;
  m->slot = ns; m->cap = cap;
  for (uint32_t i = 0; i < ocap; i++)
    if (old[i]) m->slot[mc_slot(m, old[i]->gid)] = old[i];
  free(old);
  return 0;
}

/* Insert or replace group gid: n replicas (ports[i], rids[i]). */
int np_mc_set(void *p, uint64_t gid, uint32_t n, const uint32_t *ports, const uint32_t *rids) {
  ctx_t *c = p;
  mcg_t *g = malloc(sizeof(mcg_t) + 8 * (size_t)(n ? n : 1));
  if (!g) return -2;
  g->gid = gid; g->n = n;
  for (uint32_t i = 0; i < n; i++) g->rep[i] = (uint64_t)ports[i] | (uint64_t)rids[i] << 32;
  pthread_mutex_lock(&c->mu);
  struct pre *m = pre_get(c);
  if (!m || (2 * (m->cnt + 1) > m->cap && mc_grow(m))) { pthread_mutex_unlock(&c->mu); free(g); return -2; }
  uint32_t s = mc_slot(m, gid);
  mcg_t *old = m->slot[s];
  m->slot[s] = g;
  if (!old) m->cnt++;
  pthread_mutex_unlock(&c->mu);
  free(old);
  return 0;
}

/* Delete group gid (linear probing, backward-shift deletion: no tombstones); 1 if absent. */
int np_mc_del(void *p, uint64_t gid) {
  ctx_t *c = p;
  pthread_mutex_lock(&c->mu);
  struct pre *m = c->pre;
  if (!m || !m->cap || !m->slot[mc_slot(m, gid)]) { pthread_mutex_unlock(&c->mu); return 1; }
  uint32_t mask = m->cap - 1, i = mc_slot(m, gid), j = i;
  mcg_t *old = m->slot[i];
  m->slot[i] = NULL;
  m->cnt--;
  for (;;) {
    j = (j + 1) & mask;
    if (!m->slot[j]) break;
    uint32_t h = (uint32_t)mc_hash(m->slot[j]->gid) & mask;
    int stays = i < j ? (i < h && h <= j) : (i < h || h <= j);  /* its home lies in (i, j] */
    if (!stays) { m->slot[i] = m->slot[j]; m->slot[j] = NULL; i = j; }
  }
  pthread_mutex_unlock(&c->mu);
  free(old);
  return 0;
}

int np_mc_clear(void *p) {
  ctx_t *c = p;
  pthread_mutex_lock(&c->mu);
  struct pre *m = c->pre;
  mcg_t **slot = m ? m->slot : NULL;
  uint32_t cap = m ? m->cap : 0;
  if (m) { m->slot = NULL; m->cap = m->cnt = 0; }
  pthread_mutex_unlock(&c->mu);
  for (uint32_t i = 0; i < cap; i++) free(slot[i]);
  free(slot);
  return 0;
}

/* room for n replicas of hdr + payload bytes each */
static int pre_room(struct pre *m, uint32_t n, uint32_t plen) {
  size_t need = (size_t)n * ((HDRMAX + plen + 63) & ~(size_t)63);
  if (need > m->acap) {
    uint8_t *a = realloc(m->arena, need);
    if (!a) return -1;
    m->arena = a; m->acap = need;
  }
  if (n > m->rcap) {
    mrec_t *r = realloc(m->rec, sizeof(mrec_t) * n);
    if (!r) return -1;
    m->rec = r; m->rcap = n;
  }
  return 0;
}

/* After an ingress that set mcast_grp (c->F): replicate (see the file's comment).
 * PRE_DONE, PRE_STOP (*outport, *outprio: replica k's), or 2 (the Python path replicates). */
static int pre_mcast(ctx_t *c, const uint8_t *frame, uint32_t len, uint32_t nbq, const uint8_t *fast,
                     uint32_t *outport, uint32_t *outprio) {
  uint64_t *F = c->F;
  struct pre *m = pre_get(c);
  if (!m) return 2;
  F[SM_INSTANCE_TYPE] = PRE_REPLICATION;
  m->nout = 0; m->k = 0; m->egressed = 0; m->gid = F[SM_MCAST_GRP];
  const mcg_t *g = mc_find(m, m->gid);
  if (!g) return PRE_DONE;  /* no such group: no copies, nothing counted */
  uint32_t plen = len - c->off, used = 0;
  if (pre_room(m, g->n, plen)) return 2;
  memcpy(m->F0, F, sizeof c->F);
  memcpy(m->W0, c->W, sizeof(w256) * NW);
  uint64_t prio = SM_PRIORITY >= 0 ? F[SM_PRIORITY] : 0;
  for (uint32_t k = 0; k < g->n; k++) {
    uint32_t port = (uint32_t)g->rep[k], rid = (uint32_t)(g->rep[k] >> 32);
    m->k = k;
    *outport = port; *outprio = (uint32_t)prio;
    if (port >= 512 || !fast[port]) return PRE_STOP;
    if (k) { memcpy(F, m->F0, sizeof c->F); memcpy(c->W, m->W0, sizeof(w256) * NW); }
    if (SM_EGRESS_RID >= 0) F[SM_EGRESS_RID] = rid;
    mrec_t *r = &m->rec[m->nout];
    r->port = port; r->prio = (uint32_t)prio; r->off = used; r->len = 0;
    if (prio >= nbq) { r->rc = 4; m->nout++; continue; }
    if (SM_QID >= 0) F[SM_QID] = prio;
    F[SM_EGRESS_PORT] = port;
    F[SM_EGRESS_SPEC] = 0;
    F[SM_PACKET_LENGTH] = F[H_PKTLEN];
    g_egress(c);
    F[H_EXIT] = 0;
    if (F[H_CLONE] | F[H_TRUNCATE] | F[H_RECIRC]) { m->egressed = 1; return PRE_STOP; }
    if (F[SM_EGRESS_SPEC] == 511) { r->rc = 5; m->nout++; continue; }
    g_update(c, frame + c->off, plen);
    uint8_t *out = m->arena + used;
    uint32_t h = g_deparse(c, out, HDRMAX + plen);
    if (h == UINT32_MAX) { m->egressed = 1; return PRE_STOP; }
    memcpy(out + h, frame + c->off, plen);
    r->len = h + plen; r->rc = 0;
    used += (h + plen + 63) & ~63u;
    m->nout++;
  }
  return PRE_DONE;
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

/* Where a PRE_STOP replication resumes: group, replica k, whether its egress ran (its
 * PHV is then np_phv's) ; the PHV after ingress into F/W (as np_phv lays it out). */
uint32_t np_mc_stop(void *p, uint64_t *gid, uint32_t *egressed, uint64_t *F, uint64_t *W) {
  ctx_t *c = p;
  struct pre *m = c->pre;
  if (!m) return UINT32_MAX;
  *gid = m->gid; *egressed = m->egressed;
  memcpy(F, m->F0, sizeof m->F0);
  memcpy(W, m->W0, sizeof(w256) * NW);
  return m->k;
}
