/* gradnet native backend: parser value sets (hand-written; nothing from a BMv2 JSON).
 * Needs the generated constant NVS: the selects that use a value set, each with its own
 * keys -- the set's members laid out as that select builds its key (fields in whole
 * bytes, its mask applied; nvsets.py computes them as state.ValueSetUse does) -- kept
 * sorted for a binary search. np_vset_load replaces one select's keys under the
 * instance's mutex: a packet sees the set before or after a write, never in between. */
struct vsets { uint64_t *k[NVS + 1]; uint32_t n[NVS + 1]; };

static void vs_free(ctx_t *c) {
  if (!c->vs) return;
  for (int u = 0; u < NVS; u++) free(c->vs->k[u]);
  free(c->vs);
  c->vs = NULL;
}
/* the parser: is key k (already masked) in select u's set? */
static int vs_has(const ctx_t *c, int u, uint64_t k) {
  if (!c->vs || u < 0 || u >= NVS) return 0;
  const uint64_t *a = c->vs->k[u];
  uint32_t lo = 0, hi = c->vs->n[u];
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (a[mid] == k) return 1;
    if (a[mid] < k) lo = mid + 1; else hi = mid;
  }
  return 0;
}
/* Replace select u's keys with keys[0..n-1] (ascending). 0 done, -1 bad call, -2 no memory. */
int np_vset_load(void *p, int u, uint32_t n, const uint64_t *keys) {
  ctx_t *c = p;
  if (u < 0 || u >= NVS) return -1;
  for (uint32_t i = 1; i < n; i++)
    if (keys[i - 1] >= keys[i]) return -1;
  uint64_t *k = malloc(8 * ((size_t)n + 1));
  if (!k) return -2;
  memcpy(k, keys, 8 * (size_t)n);
  pthread_mutex_lock(&c->mu);
  if (!c->vs && !(c->vs = calloc(1, sizeof *c->vs))) { pthread_mutex_unlock(&c->mu); free(k); return -2; }
  uint64_t *old = c->vs->k[u];
  c->vs->k[u] = k; c->vs->n[u] = n;
  pthread_mutex_unlock(&c->mu);
  free(old);
  return 0;
}
