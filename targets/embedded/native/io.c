/* gradnet native backend: batched receive and transmit on AF_PACKET sockets (hand-written).
 * np_rx receives up to RXB frames with one recvmmsg, runs each through np_process and
 * queues what it finishes for its egress port's socket; the queued frames leave with one
 * sendmmsg per run of frames to the same socket, at the latest when the call returns, so
 * a frame the Python path finishes afterwards cannot overtake them. It runs without the
 * GIL (ctypes releases it, or the native loop, loop.c, calls it). It stops at the first
 * packet the Python path must finish (its frame in slow, its PHV in the instance,
 * *slowinfo = rc | port << 8 | prio << 20) and keeps the rest of the batch for the next
 * call. What each packet did is counted in cnt (the switch's counters, CNT_* below; the
 * Python side folds them into SwitchStats). Frames still waiting in the batch are taken
 * first, with the port they came from, whichever socket is named; np_rx_pending says how
 * many wait (the caller must come back for them: epoll will not). */
#include <sys/socket.h>
#include <linux/if_packet.h>
#include <errno.h>
#define RXB 32
#define RXSZ (65536 + 8)
#define TXMAX (65536 + HDRMAX + 64)   /* the largest frame out */
#define TXARENA (4 * TXMAX)
/* the counters array (uint64 words), one per switch */
#define CNT_PIPE 0
#define CNT_NOPORT 1
#define CNT_LOOP 3   /* resubmit/recirculate chains cut at MAX_LOOPS (process.c) */
#define CNT_RX 8
#define CNT_TX (CNT_RX + 512)
#define CNT_QDROP (CNT_TX + 512)
#define CNT_PRIO (CNT_QDROP + 512)
#define CNT_ENQ (CNT_PRIO + 512)      /* [port * 8 + prio] */
#define CNT_TMDROP (CNT_ENQ + 512 * 8)  /* [port * 8 + prio]: dropped by a full shaped queue (tm.c) */
#define CPU_FD (-3)  /* txfd[] of the CPU port (glue.PortTable): a packet-in */
#define CNT_WORDS (CNT_TMDROP + 512 * 8)

uint32_t np_cnt_words(void) { return CNT_WORDS; }

static void tx_flush(ctx_t *c, uint64_t *cnt) {
  struct mmsghdr m[RXB];
  struct iovec iov[RXB];
  uint32_t n = c->txn, i = 0;
  memset(m, 0, sizeof(m[0]) * n);
  for (uint32_t k = 0; k < n; k++) {
    iov[k].iov_base = c->txbuf + c->txoff[k]; iov[k].iov_len = c->txlen[k];
    m[k].msg_hdr.msg_iov = &iov[k]; m[k].msg_hdr.msg_iovlen = 1;
  }
  while (i < n) {
    uint32_t j = i;
    while (j < n && c->txfd[j] == c->txfd[i]) j++;  /* a run to one socket */
    while (i < j) {
      int r = sendmmsg(c->txfd[i], m + i, j - i, MSG_DONTWAIT);
      if (r <= 0) { cnt[CNT_QDROP + c->txport[i]]++; i++; continue; }  /* as a refused send() */
      for (int k = 0; k < r; k++) cnt[CNT_TX + c->txport[i + k]]++;
      i += (uint32_t)r;
    }
  }
  c->txn = 0; c->txused = 0;
}

/* The one way a frame leaves: queue the olen bytes at txbuf + txused for port's socket,
 * push them into the port's in-memory link at once, or (the CPU port) queue them as a
 * packet-in for the Python side's handlers (meta.c). */
static void tx_port(ctx_t *c, const int32_t *txfd, uint32_t port, uint32_t olen, uint64_t *cnt) {
  int s = txfd[port];
  if (s == CPU_FD) {  /* a packet-in: queued for the packet-in handlers (meta.c) */
    cnt[pin_push(c, c->txbuf + c->txused, olen) ? CNT_TX + port : CNT_QDROP + port]++;
    return;
  }
  if (s == ML_FD) { ml_send(txfd, port, c->txbuf + c->txused, olen, cnt, CNT_TX, CNT_QDROP); return; }  /* memlink.c */
  if (s < 0) { cnt[CNT_NOPORT]++; return; }
  c->txoff[c->txn] = c->txused; c->txlen[c->txn] = olen; c->txfd[c->txn] = s;
  c->txport[c->txn++] = (uint16_t)port;
  c->txused += (olen + 63) & ~63u;
}

/* Count and send the copies of the last replication (pre.c's records), in order. */
static void pre_send(ctx_t *c, const int32_t *txfd, uint64_t *cnt) {
  const struct pre *m = c->pre;
  for (uint32_t i = 0; m && i < m->nout; i++) {
    const mrec_t *r = &m->rec[i];
    uint32_t port = r->port & 511;
    if (r->rc == 1) { cnt[CNT_PIPE]++; continue; }  /* the original, dropped by ingress */
    if (r->rc == 4) { cnt[CNT_PRIO + port]++; continue; }
    cnt[CNT_ENQ + port * 8 + (r->prio & 7)]++;
    if (r->rc == 5) { cnt[CNT_PIPE]++; continue; }
    if (TXARENA - c->txused < TXMAX || c->txn == RXB) tx_flush(c, cnt);
    memcpy(c->txbuf + c->txused, m->arena + r->off, r->len);
    tx_port(c, txfd, port, r->len, cnt);
  }
}

static int rx_fill(ctx_t *c, int fd) {
  struct mmsghdr m[RXB];
  struct iovec iov[RXB];
  union { struct cmsghdr h; uint8_t b[CMSG_SPACE(sizeof(struct tpacket_auxdata))]; } cm[RXB];
  if (!c->rxbuf && !(c->rxbuf = malloc((size_t)RXB * RXSZ))) return -1;
  if (fd < 0 && c->rxring)  /* an in-memory link (memlink.c): its due frames, no VLAN tag taken off */
    return (int)(c->rxi = 0, c->rxn = (uint32_t)ml_fill(c->rxring, c->rxbuf + 4, RXSZ, RXSZ - 8, c->rxlen, RXB));
  memset(m, 0, sizeof m);
  for (int i = 0; i < RXB; i++) {
    iov[i].iov_base = c->rxbuf + (size_t)i * RXSZ + 4;  /* room for a VLAN tag */
    iov[i].iov_len = RXSZ - 8;
    m[i].msg_hdr.msg_iov = &iov[i]; m[i].msg_hdr.msg_iovlen = 1;
    m[i].msg_hdr.msg_control = &cm[i]; m[i].msg_hdr.msg_controllen = sizeof cm[i];
  }
  int n = recvmmsg(fd, m, RXB, MSG_DONTWAIT, NULL);
  if (n <= 0) return 0;
  for (int i = 0; i < n; i++) {
    uint8_t *f = c->rxbuf + (size_t)i * RXSZ + 4;
    uint32_t len = m[i].msg_len;
    if (len > RXSZ - 8) len = RXSZ - 8;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&m[i].msg_hdr); h; h = CMSG_NXTHDR(&m[i].msg_hdr, h)) {
      if (h->cmsg_level != SOL_PACKET || h->cmsg_type != PACKET_AUXDATA) continue;
      struct tpacket_auxdata a;
      memcpy(&a, CMSG_DATA(h), sizeof a);
      if ((a.tp_status & TP_STATUS_VLAN_VALID) && len >= 12) {  /* the tag the kernel took off */
        uint16_t tpid = (a.tp_status & TP_STATUS_VLAN_TPID_VALID) ? a.tp_vlan_tpid : 0x8100;
        memmove(f - 4, f, 12);
        f -= 4;
        f[12] = tpid >> 8; f[13] = tpid & 0xFF; f[14] = a.tp_vlan_tci >> 8; f[15] = a.tp_vlan_tci & 0xFF;
        len += 4;
        memmove(c->rxbuf + (size_t)i * RXSZ + 4, f, len);  /* frames start at offset 4 */
      }
    }
    c->rxlen[i] = len;
  }
  c->rxn = (uint32_t)n; c->rxi = 0;
  return n;
}

uint32_t np_rx_pending(void *p) {
  ctx_t *c = p;
  return c->rxn - c->rxi;
}

/* Take the next frame still waiting in the batch (a program swap: the instance is about to
 * be dropped, its frames go to the program that follows): its length copied into buf (cap
 * bytes at most), its port in *port; 0 when none waits. */
uint32_t np_rx_take(void *p, uint8_t *buf, uint32_t cap, uint32_t *port) {
  ctx_t *c = p;
  if (!c->rxbuf || c->rxi >= c->rxn) return 0;
  uint32_t len = c->rxlen[c->rxi];
  if (len > cap) len = cap;
  memcpy(buf, c->rxbuf + (size_t)c->rxi++ * RXSZ + 4, len);
  *port = c->rxport;
  return len;
}

int np_rx(void *p, int fd, uint32_t port, uint64_t now_us, uint32_t nbq, const uint8_t *fast,
          const int32_t *txfd, uint64_t *cnt, uint32_t maxpk, uint8_t *slow, uint32_t *slowlen,
          uint32_t *slowinfo) {
  ctx_t *c = p;
  uint32_t k = 0, olen = 0, oport = 0, oprio = 0;
  if (!c->txbuf && !(c->txbuf = malloc(TXARENA))) return -1;
  *slowlen = 0;
  while (k < maxpk) {
    if (c->rxi >= c->rxn) {
      if (rx_fill(c, fd) <= 0) break;
      c->rxport = port;
    }
    uint8_t *f = c->rxbuf + (size_t)c->rxi * RXSZ + 4;
    uint32_t len = c->rxlen[c->rxi++];
    uint32_t inport = c->rxport < 512 ? c->rxport : 0;
    oport = oprio = 0;
    if (TXARENA - c->txused < TXMAX || c->txn == RXB) tx_flush(c, cnt);
    uint8_t *out = c->txbuf + c->txused;
    int rc = np_process(c, f, len, c->rxport, now_us, nbq, fast, out, TXMAX, &olen, &oport, &oprio);
    k++;
    cnt[CNT_RX + inport]++;
    oport &= 511;
    if (rc == 0 || rc == 3 || rc == 5 || rc == TM_QUEUED) cnt[CNT_ENQ + oport * 8 + (oprio & 7)]++;
    if (rc == 1 || rc == 5) cnt[CNT_PIPE]++;
    else if (rc == 4) cnt[CNT_PRIO + oport]++;
    else if (rc == TM_FULL) { cnt[CNT_QDROP + oport]++; cnt[CNT_TMDROP + oport * 8 + (oprio & 7)]++; }
    else if (rc == TM_QUEUED && tm_urgent(c, oport, oprio, nbq) &&  /* a queue without a rate: out now */
             tm_drain_now(c, oport, txfd, cnt, slow, slowlen, slowinfo))
      return (int)k;
    else if (rc == 0) tx_port(c, txfd, oport, olen, cnt);
    else if (rc == 6 || rc == 7) pre_send(c, txfd, cnt);  /* the replicas C finished */
    else if (rc == LOOP_LIMIT) cnt[CNT_LOOP]++;
    for (uint32_t i = 0; i < c->nlq; i++)  /* the queues its recirculated passes went through */
      cnt[CNT_ENQ + (c->lq[i] & 511) * 8 + ((c->lq[i] >> 16) & 7)]++;
    if (rc == 2 || rc == 3 || rc == 7) {  /* the Python path finishes this one, after what went before */
      if (c->txn) tx_flush(c, cnt);
      len = c->n < RXSZ - 8 ? c->n : RXSZ - 8;  /* the frame of its last pass (a recirculation's) */
      memcpy(slow, c->pkt, len);
      *slowlen = len;
      *slowinfo = (uint32_t)rc | oport << 8 | (oprio & 0xFF) << 20;
      return (int)k;
    }
  }
  if (c->txn) tx_flush(c, cnt);
  return (int)k;
}
