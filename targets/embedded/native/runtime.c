/* gradnet native backend: the fixed part of every generated program (hand-written;
 * nothing in this file comes from a BMv2 JSON). The generator appends the program:
 * its PHV size, state and pipeline functions, using only generated identifiers. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

typedef struct { uint64_t v[4]; } w256;  /* a field of 65..256 bits, least significant limb first */

static inline w256 wc(uint64_t a, uint64_t b, uint64_t c, uint64_t d) { w256 r = {{a, b, c, d}}; return r; }
static inline w256 wf(uint64_t a) { return wc(a, 0, 0, 0); }
static inline w256 wadd(w256 a, w256 b) {
  w256 r; unsigned __int128 s = 0;
  for (int i = 0; i < 4; i++) { s += (unsigned __int128)a.v[i] + b.v[i]; r.v[i] = (uint64_t)s; s >>= 64; }
  return r;
}
static inline w256 wnot(w256 a) { for (int i = 0; i < 4; i++) a.v[i] = ~a.v[i]; return a; }
static inline w256 wsub(w256 a, w256 b) { return wadd(wadd(a, wnot(b)), wf(1)); }
static inline w256 wand(w256 a, w256 b) { for (int i = 0; i < 4; i++) a.v[i] &= b.v[i]; return a; }
static inline w256 wor(w256 a, w256 b) { for (int i = 0; i < 4; i++) a.v[i] |= b.v[i]; return a; }
static inline w256 wxor(w256 a, w256 b) { for (int i = 0; i < 4; i++) a.v[i] ^= b.v[i]; return a; }
static inline w256 wshl(w256 a, uint64_t s) {
  w256 r = wf(0);
  if (s >= 256) return r;
  int q = (int)(s / 64), b = (int)(s % 64);
  for (int i = 3; i >= q; i--) {
    uint64_t lo = a.v[i - q] << b;
    uint64_t hi = (b && i - q - 1 >= 0) ? a.v[i - q - 1] >> (64 - b) : 0;
    r.v[i] = lo | hi;
  }
  return r;
}
static inline w256 wshr(w256 a, uint64_t s) {
  w256 r = wf(0);
  if (s >= 256) return r;
  int q = (int)(s / 64), b = (int)(s % 64);
  for (int i = 0; i + q < 4; i++) {
    uint64_t lo = a.v[i + q] >> b;
    uint64_t hi = (b && i + q + 1 < 4) ? a.v[i + q + 1] << (64 - b) : 0;
    r.v[i] = lo | hi;
  }
  return r;
}
static inline int weq(w256 a, w256 b) { return !memcmp(&a, &b, sizeof a); }
static inline int wlt(w256 a, w256 b) {
  for (int i = 3; i >= 0; i--) if (a.v[i] != b.v[i]) return a.v[i] < b.v[i];
  return 0;
}
static inline int wnz(w256 a) { return (a.v[0] | a.v[1] | a.v[2] | a.v[3]) != 0; }
static inline w256 wmul(w256 a, w256 b) {  /* modulo 2^256 */
  w256 r = wf(0);
  for (int i = 0; i < 4; i++) {
    unsigned __int128 carry = 0;
    for (int j = 0; i + j < 4; j++) {
      unsigned __int128 t = (unsigned __int128)a.v[i] * b.v[j] + r.v[i + j] + carry;
      r.v[i + j] = (uint64_t)t; carry = t >> 64;
    }
  }
  return r;
}
static inline w256 wtr(w256 a, int bits) {  /* a mod 2^bits */
  for (int i = 0; i < 4; i++) {
    int lo = i * 64;
    if (bits <= lo) a.v[i] = 0;
    else if (bits < lo + 64) a.v[i] &= (UINT64_C(1) << (bits - lo)) - 1;
  }
  return a;
}
static inline uint64_t shl64(uint64_t a, uint64_t s) { return s >= 64 ? 0 : a << s; }
static inline uint64_t shr64(uint64_t a, uint64_t s) { return s >= 64 ? 0 : a >> s; }

/* big-endian bit fields of a byte buffer; w <= 64 */
static inline uint64_t rdb(const uint8_t *p, uint32_t off, int w) {
  uint32_t first = off >> 3, last = (off + w - 1) >> 3;
  unsigned __int128 acc = 0;
  for (uint32_t i = first; i <= last; i++) acc = (acc << 8) | p[i];
  acc >>= (last + 1) * 8 - (off + w);
  return w == 64 ? (uint64_t)acc : (uint64_t)acc & ((UINT64_C(1) << w) - 1);
}
static inline void wrb(uint8_t *p, uint32_t off, int w, uint64_t v) {  /* ORs into zeroed bytes */
  uint32_t first = off >> 3, last = (off + w - 1) >> 3;
  if (w < 64) v &= (UINT64_C(1) << w) - 1;
  unsigned __int128 acc = (unsigned __int128)v << ((last + 1) * 8 - (off + w));
  for (uint32_t i = last + 1; i-- > first;) { p[i] |= (uint8_t)acc; acc >>= 8; }
}
static inline w256 rdw(const uint8_t *p, uint32_t off, int w) {
  w256 r = wf(0);
  for (int i = 0; i * 64 < w; i++) {
    int width = w - i * 64 < 64 ? w - i * 64 : 64;
    r.v[i] = rdb(p, off + w - i * 64 - width, width);
  }
  return r;
}
static inline void wrw(uint8_t *p, uint32_t off, int w, w256 v) {
  for (int i = 0; i * 64 < w; i++) {
    int width = w - i * 64 < 64 ? w - i * 64 : 64;
    wrb(p, off + w - i * 64 - width, width, v.v[i]);
  }
}

/* hash and checksum algorithms, bit-exact with the Python backend (codegen/hashes.py) */
static uint32_t crc32_t[256];
static uint16_t crc16_t[256], ccitt_t[256];
static void crc_init(void) {
  for (uint32_t b = 0; b < 256; b++) {
    uint32_t r = b; uint16_t s = (uint16_t)b, c = (uint16_t)(b << 8);
    for (int k = 0; k < 8; k++) {
      r = r & 1 ? (r >> 1) ^ 0xEDB88320u : r >> 1;
      s = s & 1 ? (uint16_t)((s >> 1) ^ 0xA001) : (uint16_t)(s >> 1);
      c = c & 0x8000 ? (uint16_t)((c << 1) ^ 0x1021) : (uint16_t)(c << 1);
    }
    crc32_t[b] = r; crc16_t[b] = s; ccitt_t[b] = c;
  }
}
static uint64_t h_crc32(const uint8_t *b, uint32_t n) {
  uint32_t r = 0xFFFFFFFFu;
  for (uint32_t i = 0; i < n; i++) r = crc32_t[(r ^ b[i]) & 0xFF] ^ (r >> 8);
  return r ^ 0xFFFFFFFFu;
}
static uint64_t h_crc16(const uint8_t *b, uint32_t n) {
  uint16_t r = 0;
  for (uint32_t i = 0; i < n; i++) r = (uint16_t)(crc16_t[(r ^ b[i]) & 0xFF] ^ (r >> 8));
  return r;
}
static uint64_t h_ccitt(const uint8_t *b, uint32_t n) {
  uint16_t r = 0xFFFF;
  for (uint32_t i = 0; i < n; i++) r = (uint16_t)(ccitt_t[b[i] ^ (r >> 8)] ^ (r << 8));
  return r;
}
static uint64_t h_csum16(const uint8_t *b, uint32_t n) {
  uint64_t s = 0;
  for (uint32_t i = 0; i + 1 < n; i += 2) s += (uint32_t)(b[i] << 8 | b[i + 1]);
  if (n & 1) s += (uint32_t)b[n - 1] << 8;
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return ~s & 0xFFFF;
}
static uint64_t h_xor16(const uint8_t *b, uint32_t n) {
  uint64_t r = 0;
  for (uint32_t i = 0; i + 1 < n; i += 2) r ^= (uint32_t)(b[i] << 8 | b[i + 1]);
  if (n & 1) r ^= (uint32_t)b[n - 1] << 8;
  return r;
}
static uint64_t h_identity(const uint8_t *b, uint32_t n) {
  uint64_t r = 0;
  for (uint32_t i = 0; i < n && i < 8; i++) r = r << 8 | b[i];
  return r;
}

/* match-action tables: entries in the order the control plane's table scans them
 * (priority order), each key limb matched as (v & mask) == value or lo <= v <= hi;
 * a table of exact limbs only is looked up in an open-addressing hash index */
typedef struct {
  int nk, np, exact;         /* key limbs, action parameters, exact-only */
  const uint8_t *range;      /* per limb: 1 = range match (value = lo, mask = hi) */
  int n, hcap, cap;          /* entries, hash slots, room for entries (tblops.c grows it) */
  int64_t *prio;             /* n: the scan order, descending (priority, prefix length; 0 exact) */
  uint64_t *key, *mask;      /* n * nk */
  int32_t *act;              /* n */
  w256 *data;                /* n * np */
  int32_t *hidx;             /* hcap slots, -1 empty */
  int32_t def_act;
  w256 def_data[16];
} tbl_t;

static inline uint64_t tmix(const uint64_t *k, int nk) {
  uint64_t h = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < nk; i++) { h ^= k[i]; h *= 0xBF58476D1CE4E5B9u; h ^= h >> 31; }
  return h;
}
static int tlookup(const tbl_t *t, const uint64_t *k, const w256 **d) {
  if (t->exact) {
    if (!t->hcap) return -1;
    for (uint64_t s = tmix(k, t->nk) & (t->hcap - 1);; s = (s + 1) & (t->hcap - 1)) {
      int32_t e = t->hidx[s];
      if (e < 0) return -1;
      if (!memcmp(t->key + (size_t)e * t->nk, k, 8 * t->nk)) { *d = t->data + (size_t)e * t->np; return t->act[e]; }
    }
  }
  for (int e = 0; e < t->n; e++) {
    const uint64_t *v = t->key + (size_t)e * t->nk, *m = t->mask + (size_t)e * t->nk;
    int ok = 1;
    for (int i = 0; i < t->nk && ok; i++)
      ok = t->range[i] ? (k[i] >= v[i] && k[i] <= m[i]) : ((k[i] & m[i]) == v[i]);
    if (ok) { *d = t->data + (size_t)e * t->np; return t->act[e]; }
  }
  return -1;
}
static void tfree(tbl_t *t) { free(t->key); free(t->mask); free(t->act); free(t->data); free(t->hidx); free(t->prio); }
