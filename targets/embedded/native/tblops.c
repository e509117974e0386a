/* gradnet native backend: one table entry at a time (hand-written; nothing in this file
 * comes from a BMv2 JSON). np_tbl_load copies a whole table; np_tbl_op inserts, modifies
 * or deletes one entry, or sets the default, in place: an exact table's hash index
 * follows in O(1) amortised (arrays and index grow by doubling; a delete moves the last
 * entry into the hole), a scanned table (LPM, ternary, range) keeps its scan order --
 * descending prio (prefix length, priority), a new entry after the ones of equal prio,
 * as the Python table orders them -- by one memmove. Each call takes the instance's
 * mutex unless the caller holds it (np_lock: several operations that packets must see
 * all at once, a P4Runtime Write). */

void np_lock(void *p) { pthread_mutex_lock(&((ctx_t *)p)->mu); }
void np_unlock(void *p) { pthread_mutex_unlock(&((ctx_t *)p)->mu); }

static int tgrow(tbl_t *t, int need) {
  if (need <= t->cap) return 0;
  int cap = t->cap < 8 ? 8 : t->cap;
  while (cap < need) cap *= 2;
  size_t nk = t->nk, np = t->np;
  uint64_t *k = realloc(t->key, 8 * (cap * nk + 1));
  if (k) t->key = k;
  uint64_t *m = realloc(t->mask, 8 * (cap * nk + 1));
  if (m) t->mask = m;
  int32_t *a = realloc(t->act, 4 * ((size_t)cap + 1));
  if (a) t->act = a;
  w256 *d = realloc(t->data, sizeof(w256) * (cap * np + 1));
  if (d) t->data = d;
  int64_t *pr = realloc(t->prio, 8 * ((size_t)cap + 1));
  if (pr) t->prio = pr;
  if (!k || !m || !a || !d || !pr) return -2;
  t->cap = cap;
  return 0;
}

/* the hash slot holding entry key k, else the empty slot where it would go */
static uint32_t tslot(const tbl_t *t, const uint64_t *k) {
  uint32_t mask = (uint32_t)t->hcap - 1, s = (uint32_t)tmix(k, t->nk) & mask;
  while (t->hidx[s] >= 0 && memcmp(t->key + (size_t)t->hidx[s] * t->nk, k, 8 * t->nk)) s = (s + 1) & mask;
  return s;
}

static int thash(tbl_t *t, int cap) {  /* rebuild the index with cap slots */
  int32_t *h = malloc(4 * (size_t)cap);
  if (!h) return -2;
  memset(h, 0xFF, 4 * (size_t)cap);
  free(t->hidx);
  t->hidx = h; t->hcap = cap;
  for (int e = 0; e < t->n; e++) t->hidx[tslot(t, t->key + (size_t)e * t->nk)] = e;
  return 0;
}

static void thash_del(tbl_t *t, uint32_t i) {  /* backward-shift deletion, no tombstones */
  uint32_t mask = (uint32_t)t->hcap - 1, j = i;
  t->hidx[i] = -1;
  for (;;) {
    j = (j + 1) & mask;
    if (t->hidx[j] < 0) return;
    uint32_t h = (uint32_t)tmix(t->key + (size_t)t->hidx[j] * t->nk, t->nk) & mask;
    int stays = i < j ? (i < h && h <= j) : (i < h || h <= j);  /* its home lies in (i, j] */
    if (!stays) { t->hidx[i] = t->hidx[j]; t->hidx[j] = -1; i = j; }
  }
}

/* the entry with this key (and mask and prio, in a scanned table), else -1 */
static int tfind(const tbl_t *t, const uint64_t *k, const uint64_t *m, int64_t prio) {
  if (t->exact) return t->hcap ? t->hidx[tslot(t, k)] : -1;
  size_t nk = t->nk;
  for (int e = 0; e < t->n; e++)
    if (t->prio[e] == prio && !memcmp(t->key + e * nk, k, 8 * nk) && !memcmp(t->mask + e * nk, m, 8 * nk)) return e;
  return -1;
}

static void tput(tbl_t *t, int e, const uint64_t *k, const uint64_t *m, int64_t prio, int32_t act,
                 const uint64_t *data) {
  size_t nk = t->nk, np = t->np;
  memcpy(t->key + e * nk, k, 8 * nk); memcpy(t->mask + e * nk, m, 8 * nk);
  t->prio[e] = prio; t->act[e] = act;
  memcpy(t->data + e * np, data, sizeof(w256) * np);
}

static void tmove(tbl_t *t, int to, int from, int count) {  /* entries from..from+count-1 to to.. */
  size_t nk = t->nk, np = t->np;
  memmove(t->key + to * nk, t->key + from * nk, 8 * nk * count);
  memmove(t->mask + to * nk, t->mask + from * nk, 8 * nk * count);
  memmove(t->prio + to, t->prio + from, 8 * (size_t)count);
  memmove(t->act + to, t->act + from, 4 * (size_t)count);
  memmove(t->data + to * np, t->data + from * np, sizeof(w256) * np * count);
}

static int top_insert(tbl_t *t, const uint64_t *k, const uint64_t *m, int64_t prio, int32_t act,
                      const uint64_t *data) {
  if (tfind(t, k, m, prio) >= 0) return 1;
  if (tgrow(t, t->n + 1)) return -2;
  if (t->exact) {
    if (2 * (t->n + 1) > t->hcap && thash(t, t->hcap ? 2 * t->hcap : 16)) return -2;
    tput(t, t->n, k, m, prio, act, data);
    t->hidx[tslot(t, k)] = t->n++;
    return 0;
  }
  int lo = 0, hi = t->n;  /* the first entry of lower prio */
  while (lo < hi) { int mid = (lo + hi) / 2; if (t->prio[mid] >= prio) lo = mid + 1; else hi = mid; }
  tmove(t, lo + 1, lo, t->n - lo);
  tput(t, lo, k, m, prio, act, data);
  t->n++;
  return 0;
}

static int top_delete(tbl_t *t, const uint64_t *k, const uint64_t *m, int64_t prio) {
  int e = tfind(t, k, m, prio);
  if (e < 0) return 1;
  if (t->exact) {
    thash_del(t, tslot(t, k));
    int last = t->n - 1;
    if (e != last) {  /* the last entry fills the hole */
      uint32_t s = tslot(t, t->key + (size_t)last * t->nk);
      tmove(t, e, last, 1);
      t->hidx[s] = e;
    }
  } else {
    tmove(t, e, e + 1, t->n - e - 1);
  }
  t->n--;
  return 0;
}

/* op 0 insert, 1 modify (action and data), 2 delete, 3 set the default (key unused).
 * 0 done, 1 no such entry (modify, delete) or one exists (insert), -1 bad call, -2 no memory. */
int np_tbl_op(void *p, int t, int op, const uint64_t *key, const uint64_t *mask, int64_t prio, int32_t act,
              const uint64_t *data, int locked) {
  ctx_t *c = p;
  if (t < 0 || t >= NT || op < 0 || op > 3) return -1;
  if (!locked) pthread_mutex_lock(&c->mu);
  tbl_t *T = &c->T[t];
  int rc = 0;
  if (op == 0) rc = top_insert(T, key, mask, prio, act, data);
  else if (op == 2) rc = top_delete(T, key, mask, prio);
  else if (op == 3) { T->def_act = act; memcpy(T->def_data, data, sizeof(w256) * T->np); }
  else {
    int e = tfind(T, key, mask, prio);
    if (e < 0) rc = 1;
    else { T->act[e] = act; memcpy(T->data + (size_t)e * T->np, data, sizeof(w256) * T->np); }
  }
  if (!locked) pthread_mutex_unlock(&c->mu);
  return rc;
}
