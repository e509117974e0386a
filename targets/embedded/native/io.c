/* gradnet native backend: batched receive and transmit on AF_PACKET sockets (hand-written).
 * np_rx receives up to RXB frames with one recvmmsg, runs each through np_process and
 * sends what it finishes straight to the egress port's socket, without the GIL (ctypes
 * releases it). It stops at the first packet the Python path must finish (its frame in
 * slow, its PHV in the instance) and keeps the rest of the batch for the next call.
 * One event per packet tells Python what to count: rc | port << 8 | prio << 20 | tx << 28
 * (tx: 1 sent, 2 the socket refused it, 3 no socket for the port). Frames still waiting in
 * the batch are taken first, with the port they came from, whichever socket is named;
 * np_rx_pending says how many wait (the caller must come back for them: epoll will not). */
#include <sys/socket.h>
#include <linux/if_packet.h>
#include <errno.h>
#define RXB 32
#define RXSZ (65536 + 8)

static int rx_fill(ctx_t *c, int fd) {
  struct mmsghdr m[RXB];
  struct iovec iov[RXB];
  union { struct cmsghdr h; uint8_t b[CMSG_SPACE(sizeof(struct tpacket_auxdata))]; } cm[RXB];
  if (!c->rxbuf && !(c->rxbuf = malloc((size_t)RXB * RXSZ))) return -1;
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

int np_rx(void *p, int fd, uint32_t port, uint64_t now_us, uint32_t nbq, const uint8_t *fast,
          const int32_t *txfd, uint32_t *ev, uint32_t maxev, uint8_t *slow, uint32_t *slowlen) {
  ctx_t *c = p;
  uint32_t k = 0, olen = 0, oport = 0, oprio = 0;
  if (!c->txbuf && !(c->txbuf = malloc(65536 + HDRMAX + 64))) return -1;
  uint8_t *out = c->txbuf;
  *slowlen = 0;
  while (k < maxev) {
    if (c->rxi >= c->rxn) {
      if (rx_fill(c, fd) <= 0) break;
      c->rxport = port;
    }
    uint8_t *f = c->rxbuf + (size_t)c->rxi * RXSZ + 4;
    uint32_t len = c->rxlen[c->rxi++];
    oport = oprio = 0;
    int rc = np_process(c, f, len, c->rxport, now_us, nbq, fast, out, 65536 + HDRMAX + 64, &olen, &oport, &oprio);
    uint32_t tx = 0;
    if (rc == 0) {
      int s = oport < 512 ? txfd[oport] : -1;
      tx = s < 0 ? 3 : (send(s, out, olen, MSG_DONTWAIT) >= 0 ? 1 : 2);
    }
    ev[k++] = (uint32_t)rc | (oport & 0xFFF) << 8 | (oprio & 0xFF) << 20 | tx << 28;
    if (rc == 2 || rc == 3) {  /* the Python path finishes this one */
      memcpy(slow, f, len);
      *slowlen = len;
      break;
    }
  }
  return (int)k;
}
