/* gradnet native backend: action profiles and selectors (hand-written; nothing from a
 * BMv2 JSON). Needs the generated constants NAP (profiles) and AP_NP (action data slots
 * of each profile's members). A profile is kept as BMv2 + PI keep it
 * (action_profiles.py): every member handle (weight copies included) with its action
 * and data, and every group handle with its pick list (member handles in ascending
 * order); a table entry holds {1, member handle} or {2, group handle} in its first
 * action data slot. np_prof_load replaces a whole profile at once, under the instance's
 * mutex: packets see it before or after a control-plane write, never in between. */
struct prof {
  uint32_t nmem, ngrp, nsel;
  int32_t *act;         /* nmem: the action id of each member handle, -1 none */
  w256 *data;           /* nmem * AP_NP[k] */
  uint32_t *goff, *glen;  /* ngrp: each group's pick list in sel (glen 0: no such group / empty) */
  uint32_t *sel;        /* nsel member handles */
};
struct profs { struct prof p[NAP + 1]; };

static void prof_clear(struct prof *p) {
  free(p->act); free(p->data); free(p->goff); free(p->glen); free(p->sel);
  memset(p, 0, sizeof *p);
}
static void pf_free(ctx_t *c) {
  if (!c->pf) return;
  for (int k = 0; k < NAP; k++) prof_clear(&c->pf->p[k]);
  free(c->pf);
  c->pf = NULL;
}

typedef uint64_t (*calc_t)(ctx_t *, const uint8_t *, uint32_t);
/* A hit on an entry of a table of profile k whose first data slot is ref: the action id
 * to run, its data in *d; -1 (a no-op) for an empty group or a handle not in the profile.
 * A group picks sel[off + hash % len] with the selector's hash (none: the first). */
static int ap_pick(ctx_t *c, int k, const w256 *ref, calc_t hash, const w256 **d) {
  const struct prof *p = c->pf ? &c->pf->p[k] : NULL;
  if (!p) return -1;
  uint64_t kind = ref->v[0], h = ref->v[1];
  if (kind == 2) {
    if (h >= p->ngrp || !p->glen[h]) return -1;
    uint64_t i = hash ? hash(c, 0, 0) % p->glen[h] : 0;
    h = p->sel[p->goff[h] + i];
  } else if (kind != 1) return -1;
  if (h >= p->nmem || p->act[h] < 0) return -1;
  *d = p->data + h * (size_t)AP_NP[k];
  return p->act[h];
}

/* Replace profile k: nmem member handles (act, data: nmem * AP_NP[k] slots of 4 limbs),
 * ngrp group handles (goff, glen into sel, nsel member handles). Every group's list must
 * lie in sel. 0 done, -1 bad call, -2 no memory. */
int np_prof_load(void *pp, int k, uint32_t nmem, const int32_t *act, const uint64_t *data, uint32_t ngrp,
                 const uint32_t *goff, const uint32_t *glen, uint32_t nsel, const uint32_t *sel) {
  ctx_t *c = pp;
  if (k < 0 || k >= NAP) return -1;
  for (uint32_t g = 0; g < ngrp; g++)
    if (goff[g] > nsel || glen[g] > nsel - goff[g]) return -1;
  struct prof n = {nmem, ngrp, nsel, 0, 0, 0, 0, 0};
  size_t np = AP_NP[k];
  n.act = malloc(4 * ((size_t)nmem + 1)); n.data = malloc(sizeof(w256) * (nmem * np + 1));
  n.goff = malloc(4 * ((size_t)ngrp + 1)); n.glen = malloc(4 * ((size_t)ngrp + 1)); n.sel = malloc(4 * ((size_t)nsel + 1));
  if (!n.act || !n.data || !n.goff || !n.glen || !n.sel) { prof_clear(&n); return -2; }
  memcpy(n.act, act, 4 * (size_t)nmem); memcpy(n.data, data, sizeof(w256) * nmem * np);
  memcpy(n.goff, goff, 4 * (size_t)ngrp); memcpy(n.glen, glen, 4 * (size_t)ngrp); memcpy(n.sel, sel, 4 * (size_t)nsel);
  pthread_mutex_lock(&c->mu);
  if (!c->pf && !(c->pf = calloc(1, sizeof *c->pf))) { pthread_mutex_unlock(&c->mu); prof_clear(&n); return -2; }
  struct prof old = c->pf->p[k];
  c->pf->p[k] = n;
  pthread_mutex_unlock(&c->mu);
  prof_clear(&old);
  return 0;
}
