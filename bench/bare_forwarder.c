/* The ceiling for a C switch: a bare AF_PACKET forwarder in C (python -m bench.bare_forwarder
 * --work c). Every frame that arrives on one socket leaves on the other, with the native
 * backend's I/O (recvmmsg batches of 32, one sendmmsg a batch, one epoll) and no work
 * between: what any switch over the same veths costs at least. Built by the native
 * backend's build path (targets/embedded/native/build.py); bf_run never returns. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#define B 32
#define SZ 9216

int bf_run(int a, int b) {
  static uint8_t buf[B][SZ];
  struct mmsghdr m[B];
  struct iovec iov[B];
  struct epoll_event ev[2];
  int ep = epoll_create1(0);
  if (ep < 0) return -1;
  ev[0].events = EPOLLIN; ev[0].data.fd = a; epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev[0]);
  ev[1].events = EPOLLIN; ev[1].data.fd = b; epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev[1]);
  for (;;) {
    int n = epoll_wait(ep, ev, 2, -1);
    for (int e = 0; e < n; e++) {
      int in = ev[e].data.fd, out = in == a ? b : a;
      for (;;) {
        memset(m, 0, sizeof m);
        for (int i = 0; i < B; i++) {
          iov[i].iov_base = buf[i]; iov[i].iov_len = SZ;
          m[i].msg_hdr.msg_iov = &iov[i]; m[i].msg_hdr.msg_iovlen = 1;
        }
        int k = recvmmsg(in, m, B, MSG_DONTWAIT, NULL);
        if (k <= 0) break;
        for (int i = 0; i < k; i++) iov[i].iov_len = m[i].msg_len;
        for (int i = 0; i < k;) {
          int r = sendmmsg(out, m + i, k - i, MSG_DONTWAIT);
          i += r > 0 ? r : 1;  /* a refused frame is dropped */
        }
        if (k < B) break;
      }
    }
  }
}
