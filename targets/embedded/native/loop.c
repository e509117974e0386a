/* gradnet native backend: the data-plane loop in C (hand-written; nothing in this file
 * comes from a BMv2 JSON). One call waits on an epoll set holding every port socket that
 * a native program serves (of one switch or of a group of switches, each program in its
 * own shared object, reached through its np_rx) and the Python loop's own epoll, and
 * runs receive batch -> pipelines -> send batch for every ready port, without the GIL,
 * until one of:
 *   GL_IDLE (0)  nothing more to read for LINGER_MS after some work, or the timeout
 *                passed idle;
 *   GL_BUDGET    budget_us of work passed (the Python side beats the heartbeat, folds
 *                the counters and runs its timers, then calls again);
 *   GL_SLOW      a packet that the Python path must finish (*which: its source);
 *   GL_PYTHON    the Python epoll is readable (a wake-up, a packet-out, a port that the
 *                Python backend serves).
 * Control-plane calls (np_tbl_load, np_reg_*) take the program instance's mutex, which a
 * packet holds from parse to deparse, so they are atomic with respect to packets. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>
#include <errno.h>

typedef int (*rx_fn)(void *, int, uint32_t, uint64_t, uint32_t, const uint8_t *, const int32_t *, uint64_t *,
                     uint32_t, uint8_t *, uint32_t *, uint32_t *);
typedef uint32_t (*pending_fn)(void *);
typedef int (*rxml_fn)(void *, ml_ring_t *, uint32_t, uint64_t, uint32_t, const uint8_t *, const int32_t *,
                       uint64_t *, uint32_t, uint8_t *, uint32_t *, uint32_t *);

typedef int (*drain_fn)(void *, double, const int32_t *, uint64_t *, uint8_t *, uint32_t *, uint32_t *, double *);

typedef struct {           /* one port socket served natively (laid out as binding.Source) */
  rx_fn rx;
  pending_fn pending;
  void *ctx;               /* the program instance */
  const uint8_t *fast;     /* per egress port: 1 = unshaped, straight to egress */
  const int32_t *txfd;     /* per egress port: socket, -1 none */
  uint64_t *cnt;           /* the switch's counters (io.c CNT_*) */
  uint8_t *slow;           /* the frame handed to the Python path */
  uint32_t *slowlen, *slowinfo;
  int64_t t0_ns;           /* the switch's clock origin (CLOCK_MONOTONIC) */
  int32_t fd;
  uint32_t port, nbq, ts;  /* ts: the program reads the ingress timestamp */
  ml_ring_t *ring;         /* an in-memory link (memlink.c) instead of fd: rx is np_rx_ml */
  drain_fn drain;          /* the program's shaped queues (tm.c's np_tm_drain) */
} src_t;

enum { GL_IDLE, GL_BUDGET, GL_SLOW, GL_PYTHON };
#define CNT_TOUCHED 2  /* io.c's counters: a word np_rx leaves alone, set when a source did work */
#define PER_PORT 64   /* frames from one port before the next port's turn */
#define LINGER_MS 1   /* idle time after work before returning GL_IDLE */

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Up to PER_PORT frames of source s (np_rx loops over recvmmsg until the socket is
 * empty or the count is reached); 1 when a packet waits for the Python path. */
static int serve(src_t *s, uint32_t *work) {
  uint64_t now = s->ts ? (uint64_t)((now_ns() - s->t0_ns) / 1000) : 0;
  int k = s->ring ? ((rxml_fn)(void *)s->rx)(s->ctx, s->ring, s->port, now, s->nbq, s->fast, s->txfd, s->cnt,
                                             PER_PORT, s->slow, s->slowlen, s->slowinfo)
                 : s->rx(s->ctx, s->fd, s->port, now, s->nbq, s->fast, s->txfd, s->cnt, PER_PORT, s->slow, s->slowlen,
                         s->slowinfo);
  if (k > 0) { *work += (uint32_t)k; s->cnt[CNT_TOUCHED] = 1; }  /* the Python side folds only these */
  return *s->slowlen != 0;
}

/* In-memory links: serve every ring with a frame due; the earliest frame still on its way
 * (INT64_MAX: none). -1 - i when source i has a packet for the Python path. */
static int64_t serve_rings(src_t *src, int n, uint32_t *work, int *slow) {
  int64_t due = INT64_MAX, d;
  for (int i = 0; i < n; i++) {
    if (!src[i].ring) continue;
    if (ml_next(src[i].ring, now_ns(), &d)) {
      if (serve(&src[i], work)) { *slow = i; return 0; }
      ml_next(src[i].ring, now_ns(), &d);
    }
    if (d < due) due = d;
  }
  return due;
}

/* Shaped queues (tm.c): send what their rates allow now; the next departure (INT64_MAX:
 * none), as serve_rings. Sources of one program share its queues: the first drains them. */
static int64_t serve_queues(src_t *src, int n, uint32_t *work, int *slow) {
  int64_t due = INT64_MAX;
  for (int i = 0; i < n; i++) {
    if (!src[i].drain || (i && src[i].ctx == src[i - 1].ctx)) continue;
    double w;
    int k = src[i].drain(src[i].ctx, -1.0, src[i].txfd, src[i].cnt, src[i].slow, src[i].slowlen, src[i].slowinfo, &w);
    if (k > 0) { *work += (uint32_t)k; src[i].cnt[CNT_TOUCHED] = 1; }
    if (*src[i].slowlen) { *slow = i; return 0; }
    if (w >= 0) {
      int64_t d = now_ns() + (int64_t)(w * 1e9) + 1000;  /* a microsecond late, never early */
      if (d < due) due = d;
    }
  }
  return due;
}

int gl_run(int epfd, int pyfd, src_t *src, int n, int timeout_ms, int64_t budget_us, int *which) {
  struct epoll_event ev[64];
  int64_t end = -1;
  uint32_t work = 0;
  for (;;) {
    /* batches left in an instance first: epoll will not report their sockets */
    for (int i = 0; i < n; i++)
      if (src[i].pending(src[i].ctx) && serve(&src[i], &work)) { *which = i; return GL_SLOW; }
    int slow = -1;
    uint32_t ring_work = work;
    int64_t due = serve_rings(src, n, &work, &slow);
    if (slow >= 0) { *which = slow; return GL_SLOW; }
    int64_t qdue = serve_queues(src, n, &work, &slow);
    if (slow >= 0) { *which = slow; return GL_SLOW; }
    if (qdue < due) due = qdue;
    if (work != ring_work && end < 0) end = now_ns() + budget_us * 1000;
    /* after some work, linger a little for more before handing back to Python (each
     * return costs the Python loop tens of microseconds: under load it would be paid
     * every few frames); no longer than the next frame due on a ring */
    int64_t wait_ns = (int64_t)(work ? (timeout_ms < LINGER_MS ? timeout_ms : LINGER_MS) : timeout_ms) * 1000000;
    int cut = 0;
    if (due != INT64_MAX) {
      int64_t left = due - now_ns();
      if (left < wait_ns) { wait_ns = left > 0 ? left : 0; cut = 1; }
    }
    struct timespec ts = { wait_ns / 1000000000, wait_ns % 1000000000 };
    int m = epoll_pwait2(epfd, ev, 64, &ts, NULL);
    if (m < 0 && errno == ENOSYS)  /* a kernel before 5.11: milliseconds, rounded up */
      m = epoll_wait(epfd, ev, 64, (int)((wait_ns + 999999) / 1000000));
    if (m < 0) return errno == EINTR ? GL_IDLE : -1;
    if (m == 0) {
      if (!cut) return GL_IDLE;
      if (end >= 0 && now_ns() >= end) return GL_BUDGET;
      continue;  /* a ring's frame is due */
    }
    if (end < 0) end = now_ns() + budget_us * 1000;  /* from the first event, not the wait */
    int py = 0;
    uint32_t before = work;
    for (int e = 0; e < m; e++) {
      int fd = ev[e].data.fd;
      if (fd == pyfd) { py = 1; continue; }
      for (int i = 0; i < n; i++) {
        if (src[i].fd != fd) continue;
        if (serve(&src[i], &work)) { *which = i; return GL_SLOW; }
        break;
      }
    }
    if (py) return GL_PYTHON;
    if (work == before) return GL_IDLE;  /* readable but nothing read (a socket error): let Python look */
    if (now_ns() >= end) return GL_BUDGET;
  }
}

/* The nonzero words of a switch's counters (n words): up to max (index, value) pairs
 * into idx/val, each zeroed; how many (the Python side folds them, nloop.py). */
int gl_take(uint64_t *cnt, uint32_t n, uint32_t *idx, uint64_t *val, int max) {
  int k = 0;
  for (uint32_t b = 0; b < n && k < max; b += 8) {  /* mostly zero: skip 8 words at a time */
    uint32_t e = b + 8 < n ? b + 8 : n;
    uint64_t any = 0;
    for (uint32_t i = b; i < e; i++) any |= cnt[i];
    if (!any) continue;
    for (uint32_t i = b; i < e && k < max; i++)
      if (cnt[i]) { idx[k] = i; val[k++] = cnt[i]; cnt[i] = 0; }
  }
  return k;
}
