/* gradnet native backend: direct counters and direct meters (hand-written; nothing from
 * a BMv2 JSON). Each entry of a table with one carries a cell handle in its last action
 * data slot (the Python side hands them out, binding.py / direct.py); the cells live
 * here, per table, grown by np_direct_reserve, with the default entry's counters apart.
 * A handle past the cells counts nowhere. Every call takes the instance's mutex. */
struct dtbl {
  uint64_t *pk, *by;   /* cap cells */
  meter_t *m;
  uint64_t cap, dpk, dby;  /* cells; the default entry's packets and bytes */
};
struct dstate { struct dtbl t[NT + 1]; };

static void ds_free(ctx_t *c) {
  if (!c->ds) return;
  for (int t = 0; t < NT; t++) { free(c->ds->t[t].pk); free(c->ds->t[t].by); free(c->ds->t[t].m); }
  free(c->ds);
  c->ds = NULL;
}
/* the packet path: a hit on the entry of cell h, or a miss (h = UINT64_MAX) */
static inline void dc_count(ctx_t *c, int t, uint64_t h, uint64_t len) {
  if (!c->ds) return;
  struct dtbl *d = &c->ds->t[t];
  if (h == UINT64_MAX) { d->dpk++; d->dby += len; }
  else if (h < d->cap) { d->pk[h]++; d->by[h] += len; }
}
static inline uint64_t dm_exec(ctx_t *c, int t, uint64_t h, double size) {
  if (!c->ds || h >= c->ds->t[t].cap) return 0;
  meter_t *m = &c->ds->t[t].m[h];
  return m->on ? meter_run(m, meter_clock(c), size) : 0;
}

/* Room for cells 0..cap-1 of table t (new cells zero). 0 done, -1 bad call, -2 no memory. */
int np_direct_reserve(void *p, int t, uint64_t cap) {
  ctx_t *c = p;
  if (t < 0 || t >= NT || cap > (UINT64_C(1) << 32)) return -1;
  pthread_mutex_lock(&c->mu);
  int rc = 0;
  if (!c->ds && !(c->ds = calloc(1, sizeof *c->ds))) rc = -2;
  struct dtbl *d = rc ? NULL : &c->ds->t[t];
  if (d && cap > d->cap) {
    uint64_t *pk = realloc(d->pk, 8 * cap), *by = pk ? realloc(d->by, 8 * cap) : NULL;
    if (pk) d->pk = pk;
    if (by) d->by = by;
    meter_t *m = by ? realloc(d->m, sizeof(meter_t) * cap) : NULL;
    if (m) {
      d->m = m;
      memset(pk + d->cap, 0, 8 * (cap - d->cap)); memset(by + d->cap, 0, 8 * (cap - d->cap));
      memset(m + d->cap, 0, sizeof(meter_t) * (cap - d->cap));
      d->cap = cap;
    } else rc = -2;
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}
/* Write cell h of table t (UINT64_MAX: the default's counters): its counters when cnt,
 * and its meter when meter is 0 (unconfigured) or 2 (this configuration, from the next
 * packet); meter 1 leaves the meter as it is. */
int np_direct_set(void *p, int t, uint64_t h, int cnt, uint64_t packets, uint64_t bytes, int meter, double cir,
                  double cburst, double pir, double pburst) {
  ctx_t *c = p;
  if (t < 0 || t >= NT || meter < 0 || meter > 2) return -1;
  pthread_mutex_lock(&c->mu);
  struct dtbl *d = c->ds ? &c->ds->t[t] : NULL;
  int rc = 0;
  if (d && h == UINT64_MAX) { if (cnt) { d->dpk = packets; d->dby = bytes; } }
  else if (d && h < d->cap) {
    if (cnt) { d->pk[h] = packets; d->by[h] = bytes; }
    if (meter != 1) meter_conf(&d->m[h], meter, 0, cir, cburst, pir, pburst);
  } else rc = -1;
  pthread_mutex_unlock(&c->mu);
  return rc;
}
/* The counters of cell h of table t (UINT64_MAX: the default's) into out[0..1], after
 * adding add[0..1] to them (what the Python path counted, modulo 2^64), in one hold. */
int np_direct_get(void *p, int t, uint64_t h, const uint64_t *add, uint64_t *out) {
  ctx_t *c = p;
  if (t < 0 || t >= NT) return -1;
  pthread_mutex_lock(&c->mu);
  struct dtbl *d = c->ds ? &c->ds->t[t] : NULL;
  uint64_t *pk = NULL, *by = NULL;
  if (d && h == UINT64_MAX) { pk = &d->dpk; by = &d->dby; }
  else if (d && h < d->cap) { pk = &d->pk[h]; by = &d->by[h]; }
  int rc = pk ? 0 : -1;
  if (pk) { *pk += add[0]; *by += add[1]; out[0] = *pk; out[1] = *by; }
  pthread_mutex_unlock(&c->mu);
  return rc;
}
