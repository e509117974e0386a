/* gradnet native backend: per-instance state and the control-plane API (hand-written).
 * Needs the generated constants: NS NW NT NR NC NM HBUF, REG_W REG_S CTR_S, TBL_NK TBL_NP
 * TBL_EXACT TBL_RANGE, TEMPLATE. Every call takes the instance's mutex: a read or write
 * is atomic with respect to packets, which hold it from parse to deparse. */
typedef struct {
  pthread_mutex_t mu;
  uint64_t rng;
  tbl_t T[NT + 1];
  void *R[NR + 1];                 /* uint64_t cells (width <= 64) or w256 cells */
  uint64_t *CP[NC + 1], *CB[NC + 1];
  uint64_t F[NS];                  /* the packet in flight: narrow slots */
  w256 W[NW + 1];                  /* its wide fields */
  const uint8_t *pkt; uint32_t n, off;
  uint8_t hbuf[HBUF + 65536];      /* hash and checksum input */
  uint8_t *rxbuf, *txbuf;          /* a received batch (np_rx): RXB frames of RXSZ bytes; frames out */
  uint32_t rxlen[32], rxn, rxi, rxport;  /* frames rxi..rxn-1 of the batch wait, from rxport */
  uint32_t txoff[32], txlen[32], txn, txused;  /* frames queued in txbuf for one sendmmsg */
  int32_t txfd[32]; uint16_t txport[32];
  struct pre *pre;                 /* the PRE: groups, clone sessions, the last copies (pre.c) */
  struct ml_ring *rxring;          /* the in-memory link np_rx_ml serves (memlink.c) */
  uint32_t loops, nlq;             /* this packet's resubmits + recirculations; its recirculated passes */
  uint32_t lq[33];                 /* each recirculated pass's queue: port | prio << 16 (process.c) */
  uint8_t *rcbuf;                  /* the frame a recirculation sends back to ingress */
  uint64_t RF[NS]; w256 RW[NW + 1];  /* the PHV a resubmit or recirculation copies from */
  uint64_t *dq; uint32_t dqn, dqcap;  /* digests and packet-ins queued for the Python side (meta.c) */
  struct tmgr *tm;                   /* the shaped queues (tm.c) */
  struct mtr *mt;                    /* the meters (meters.c; NULL until one is configured) */
  struct dstate *ds;                 /* direct counters and meters (direct.c) */
  struct profs *pf;                  /* action profiles and selectors (profiles.c) */
  struct vsets *vs;                  /* parser value sets (vsets.c) */
  double t0;                       /* the switch's clock origin (meta.c) */
  uint64_t now_us; int64_t deq;    /* the packet's clock; its dequeue depth (-1: not queued) */
} ctx_t;
static void pre_free(ctx_t *c);
/* tm.c: np_process's rc for a packet queued in a shaped queue / dropped, its queue full */
#define TM_QUEUED 10
#define TM_FULL 11
static void tm_free(ctx_t *c);
static void mtr_free(ctx_t *c);
static void ds_free(ctx_t *c);
static void pf_free(ctx_t *c);
static void vs_free(ctx_t *c);
static int tm_enqueue(ctx_t *c, const uint8_t *frame, uint32_t len, uint64_t eport, uint32_t nbq,
                      uint32_t *outport, uint32_t *outprio);
static int tm_urgent(const ctx_t *c, uint32_t port, uint32_t prio, uint32_t nbq);
static int tm_drain_now(ctx_t *c, uint32_t port, const int32_t *txfd, uint64_t *cnt, uint8_t *slow,
                        uint32_t *slowlen, uint32_t *slowinfo);

static uint64_t rng_next(ctx_t *c) {  /* splitmix64 */
  uint64_t z = (c->rng += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u; z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}
static uint64_t rng_range(ctx_t *c, uint64_t lo, uint64_t hi) {
  uint64_t span = hi - lo + 1;
  return span ? lo + rng_next(c) % span : rng_next(c);
}
static inline void ctr_count(ctx_t *c, int k, uint64_t idx, uint64_t len) {
  if (idx < CTR_S[k]) { c->CP[k][idx]++; c->CB[k][idx] += len; }
}

void *np_new(uint64_t seed) {
  static int crc_ready;
  if (!crc_ready) { crc_init(); crc_ready = 1; }
  ctx_t *c = calloc(1, sizeof(ctx_t));
  if (!c) return NULL;
  pthread_mutex_init(&c->mu, NULL);
  c->rng = seed;
  c->deq = -1;  /* meta.c: no packet dequeued from a shaped queue */
  for (int r = 0; r < NR; r++) c->R[r] = calloc(REG_S[r] ? REG_S[r] : 1, REG_W[r] > 64 ? sizeof(w256) : 8);
  for (int k = 0; k < NC; k++) { c->CP[k] = calloc(CTR_S[k] + 1, 8); c->CB[k] = calloc(CTR_S[k] + 1, 8); }
  for (int t = 0; t < NT; t++) {
    c->T[t].nk = TBL_NK[t]; c->T[t].np = TBL_NP[t]; c->T[t].exact = TBL_EXACT[t];
    c->T[t].range = TBL_RANGE[t];
  }
  return c;
}
void np_free(void *p) {
  ctx_t *c = p;
  for (int r = 0; r < NR; r++) free(c->R[r]);
  for (int k = 0; k < NC; k++) { free(c->CP[k]); free(c->CB[k]); }
  for (int t = 0; t < NT; t++) tfree(&c->T[t]);
  pre_free(c);
  tm_free(c);
  mtr_free(c);
  ds_free(c);
  pf_free(c);
  vs_free(c);
  free(c->rxbuf); free(c->txbuf); free(c->rcbuf); free(c->dq);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
int np_reg_get(void *p, int r, uint64_t i, uint64_t *out) {
  ctx_t *c = p;
  if (r < 0 || r >= NR || i >= REG_S[r]) return -1;
  pthread_mutex_lock(&c->mu);
  if (REG_W[r] > 64) memcpy(out, &((w256 *)c->R[r])[i], 32);
  else { out[0] = ((uint64_t *)c->R[r])[i]; out[1] = out[2] = out[3] = 0; }
  pthread_mutex_unlock(&c->mu);
  return 0;
}
int np_reg_set(void *p, int r, uint64_t i, const uint64_t *in) {  /* in: already masked */
  ctx_t *c = p;
  if (r < 0 || r >= NR || i >= REG_S[r]) return -1;
  pthread_mutex_lock(&c->mu);
  if (REG_W[r] > 64) memcpy(&((w256 *)c->R[r])[i], in, 32);
  else ((uint64_t *)c->R[r])[i] = in[0];
  pthread_mutex_unlock(&c->mu);
  return 0;
}
/* Whole registers at once, four limbs a cell (out/in hold REG_S[r] * 4 words). */
int np_reg_dump(void *p, int r, uint64_t *out) {
  ctx_t *c = p;
  if (r < 0 || r >= NR) return -1;
  pthread_mutex_lock(&c->mu);
  for (uint32_t i = 0; i < REG_S[r]; i++) {
    if (REG_W[r] > 64) memcpy(out + 4 * i, &((w256 *)c->R[r])[i], 32);
    else { out[4 * i] = ((uint64_t *)c->R[r])[i]; out[4 * i + 1] = out[4 * i + 2] = out[4 * i + 3] = 0; }
  }
  pthread_mutex_unlock(&c->mu);
  return 0;
}
int np_reg_load(void *p, int r, const uint64_t *in) {
  ctx_t *c = p;
  if (r < 0 || r >= NR) return -1;
  pthread_mutex_lock(&c->mu);
  for (uint32_t i = 0; i < REG_S[r]; i++) {
    if (REG_W[r] > 64) memcpy(&((w256 *)c->R[r])[i], in + 4 * i, 32);
    else ((uint64_t *)c->R[r])[i] = in[4 * i];
  }
  pthread_mutex_unlock(&c->mu);
  return 0;
}
int np_ctr_get(void *p, int k, uint64_t i, uint64_t *out) {
  ctx_t *c = p;
  if (k < 0 || k >= NC || i >= CTR_S[k]) return -1;
  pthread_mutex_lock(&c->mu);
  out[0] = c->CP[k][i]; out[1] = c->CB[k][i];
  pthread_mutex_unlock(&c->mu);
  return 0;
}
int np_ctr_set(void *p, int k, uint64_t i, uint64_t packets, uint64_t bytes) {
  ctx_t *c = p;
  if (k < 0 || k >= NC || i >= CTR_S[k]) return -1;
  pthread_mutex_lock(&c->mu);
  c->CP[k][i] = packets; c->CB[k][i] = bytes;
  pthread_mutex_unlock(&c->mu);
  return 0;
}
/* Replace a table's entries (in lookup order) and its default action, atomically (one
 * entry at a time instead: tblops.c). */
int np_tbl_load(void *p, int t, int n, const uint64_t *key, const uint64_t *mask, const int32_t *act,
                const uint64_t *data, int32_t def_act, const uint64_t *def_data, const int64_t *prio) {
  ctx_t *c = p;
  if (t < 0 || t >= NT || n < 0) return -1;
  tbl_t nt = c->T[t];
  size_t nk = nt.nk, np = nt.np;
  nt.n = nt.cap = n; nt.hcap = 0; nt.hidx = NULL;
  nt.key = malloc(8 * (n * nk + 1)); nt.mask = malloc(8 * (n * nk + 1));
  nt.act = malloc(4 * (n + 1)); nt.data = malloc(sizeof(w256) * (n * np + 1)); nt.prio = malloc(8 * (n + 1));
  if (!nt.key || !nt.mask || !nt.act || !nt.data || !nt.prio) { tfree(&nt); return -2; }
  memcpy(nt.key, key, 8 * n * nk); memcpy(nt.mask, mask, 8 * n * nk); memcpy(nt.prio, prio, 8 * n);
  memcpy(nt.act, act, 4 * n); memcpy(nt.data, data, sizeof(w256) * n * np);
  if (nt.exact && n) {
    int cap = 8;
    while (cap < 2 * n) cap *= 2;
    nt.hidx = malloc(4 * cap);
    if (!nt.hidx) { tfree(&nt); return -2; }
    memset(nt.hidx, 0xFF, 4 * cap);
    nt.hcap = cap;
    for (int e = 0; e < n; e++) {
      uint64_t s = tmix(nt.key + e * nk, nk) & (cap - 1);
      while (nt.hidx[s] >= 0) s = (s + 1) & (cap - 1);
      nt.hidx[s] = e;
    }
  }
  nt.def_act = def_act;
  memcpy(nt.def_data, def_data, sizeof(w256) * np);
  pthread_mutex_lock(&c->mu);
  tbl_t old = c->T[t];
  c->T[t] = nt;
  pthread_mutex_unlock(&c->mu);
  tfree(&old);
  return 0;
}
/* The PHV of the packet a call left for the Python path: narrow slots, then wide. */
uint32_t np_phv(void *p, uint64_t *F, uint64_t *W) {
  ctx_t *c = p;
  memcpy(F, c->F, sizeof c->F);
  memcpy(W, c->W, sizeof(w256) * NW);
  return c->off;
}
