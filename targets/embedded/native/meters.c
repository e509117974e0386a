/* gradnet native backend: indirect meters (hand-written; nothing from a BMv2 JSON).
 * Needs the generated constants NM, MTR_S (cells per meter array) and MTR_B (1: the
 * array meters bytes). Two-rate three-colour exactly as the Python backend computes it
 * (codegen/support.py, Meter): the same doubles in the same order, peak rate first,
 * then committed; the first one short of tokens gives the colour (2 red, 1 yellow) and
 * later rates are not charged; an unconfigured cell is green (0). Time is seconds of
 * CLOCK_MONOTONIC as Python's time.monotonic() gives them, or the time np_meter_clock
 * set (tests). The state lives here, written through np_meter_set under the instance's
 * mutex: a configuration is atomic with respect to packets. */
#include <time.h>

typedef struct {
  double rate[2], burst[2], tok[2], cred[2];  /* [0] peak (red when short), [1] committed */
  double t0;                                  /* when it was configured */
  int on;
} meter_t;
struct mtr {
  meter_t *cell[NM + 1];
  double clock;                               /* < 0: CLOCK_MONOTONIC */
};

static double mtr_now(const struct mtr *m) {
  if (m->clock >= 0) return m->clock;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec) / 1e9;  /* as CPython converts */
}
static struct mtr *mtr_get(ctx_t *c) {  /* control-plane side: allocated on first use */
  if (c->mt) return c->mt;
  struct mtr *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->clock = -1;
  for (int k = 0; k < NM; k++) {
    m->cell[k] = calloc(MTR_S[k] ? MTR_S[k] : 1, sizeof(meter_t));
    if (!m->cell[k]) {
      for (int j = 0; j < k; j++) free(m->cell[j]);
      free(m);
      return NULL;
    }
  }
  return c->mt = m;
}
static void mtr_free(ctx_t *c) {
  if (!c->mt) return;
  for (int k = 0; k < NM; k++) free(c->mt->cell[k]);
  free(c->mt);
  c->mt = NULL;
}

/* One packet of `size` (1, or its bytes) through meter m at time now: its colour. No
 * FMA: the Python backend's rounding. A meter configured to start at its next packet
 * (on 2, a direct meter: Python creates it there) starts now with full buckets. */
__attribute__((optimize("fp-contract=off")))
static uint64_t meter_run(meter_t *m, double now, double size) {
  if (!m->on) return 0;
  if (m->on == 2) { m->on = 1; m->t0 = now; m->tok[0] = m->burst[0]; m->tok[1] = m->burst[1]; m->cred[0] = m->cred[1] = 0; }
  double elapsed = now - m->t0;
  for (int j = 0; j < 2; j++) {
    double credited = elapsed * m->rate[j];
    double x = m->tok[j] + credited - m->cred[j];
    m->tok[j] = m->burst[j] < x ? m->burst[j] : x;
    m->cred[j] = credited;
    if (m->tok[j] < size) return j ? 1 : 2;
    m->tok[j] -= size;
  }
  return 0;
}
static double meter_clock(const ctx_t *c) {
  if (c->mt) return mtr_now(c->mt);
  struct mtr real = {.clock = -1};
  return mtr_now(&real);
}
/* The colour of one packet of `len` bytes on cell `idx` of meter array `k` (an index out
 * of range, or no meter configured yet: green). */
static uint64_t meter_exec(ctx_t *c, int k, uint64_t idx, uint64_t len) {
  struct mtr *mt = c->mt;
  if (!mt || k < 0 || k >= NM || idx >= MTR_S[k]) return 0;
  meter_t *m = &mt->cell[k][idx];
  return m->on ? meter_run(m, mtr_now(mt), MTR_B[k] ? (double)len : 1.0) : 0;
}
static void meter_conf(meter_t *m, int on, double now, double cir, double cburst, double pir, double pburst) {
  memset(m, 0, sizeof *m);
  if (!on) return;
  m->on = on; m->t0 = now;
  m->rate[0] = pir; m->burst[0] = pburst; m->tok[0] = pburst;
  m->rate[1] = cir; m->burst[1] = cburst; m->tok[1] = cburst;
}

/* Configure cell i of meter array k (on 0: unconfigured, green), full buckets from now. */
int np_meter_set(void *p, int k, uint64_t i, int on, double cir, double cburst, double pir, double pburst) {
  ctx_t *c = p;
  if (k < 0 || k >= NM || i >= MTR_S[k]) return -1;
  pthread_mutex_lock(&c->mu);
  struct mtr *mt = mtr_get(c);
  if (!mt) { pthread_mutex_unlock(&c->mu); return -1; }
  meter_conf(&mt->cell[k][i], on ? 1 : 0, mtr_now(mt), cir, cburst, pir, pburst);
  pthread_mutex_unlock(&c->mu);
  return 0;
}
/* Time for the meters from now on (t < 0: the real clock again). */
int np_meter_clock(void *p, double t) {
  ctx_t *c = p;
  pthread_mutex_lock(&c->mu);
  struct mtr *mt = mtr_get(c);
  if (mt) mt->clock = t;
  pthread_mutex_unlock(&c->mu);
  return mt ? 0 : -1;
}
/* One packet through a meter from outside the native packet path (the Python one). */
uint64_t np_meter_exec(void *p, int k, uint64_t i, uint64_t len) {
  ctx_t *c = p;
  pthread_mutex_lock(&c->mu);
  uint64_t col = meter_exec(c, k, i, len);
  pthread_mutex_unlock(&c->mu);
  return col;
}
