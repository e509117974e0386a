"""hosts/net.py, the agents' shared plumbing: buffers, the receive loop, deadlines, timers."""

from __future__ import annotations

import os
import socket

import pytest

from hosts.net import (
    Deadline,
    NicCounters,
    Timers,
    drain,
    net_dev,
    nic_counters,
    parse_net_dev,
    set_buffers,
    udp_socket,
    wait_readable,
)


def test_udp_socket_drain_takes_every_queued_datagram_in_order():
    rx = udp_socket("127.0.0.1", 0)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        addr = rx.getsockname()
        for i in range(50):
            tx.sendto(i.to_bytes(2, "big"), addr)
        got = [int.from_bytes(d, "big") for d, _ in drain(rx, timeout=1.0)]
        assert got == list(range(50))
        assert list(drain(rx, timeout=0.0)) == []  # nothing left, no blocking
        assert not wait_readable(rx, 0.01)
    finally:
        rx.close()
        tx.close()


def test_bind_failure_names_the_address():
    a = udp_socket("127.0.0.1", 0)
    try:
        port = a.getsockname()[1]
        with pytest.raises(OSError, match=f"127.0.0.1:{port}"):
            udp_socket("127.0.0.1", port)
    finally:
        a.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="forced buffer sizes need root")
def test_forced_buffers_exceed_the_system_maximum():
    with open("/proc/sys/net/core/rmem_max") as f:
        rmem_max = int(f.read())
    want = max(rmem_max * 4, 1 << 20)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        set_buffers(s, rcvbuf=want, sndbuf=None)
        assert s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= want  # the kernel doubles it
        set_buffers(s, rcvbuf=want, sndbuf=None, force=False)
        assert s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) <= 2 * rmem_max
    finally:
        s.close()


def test_deadline_on_a_given_clock():
    now = [100.0]
    d = Deadline(5.0, clock=lambda: now[0])
    assert d.remaining() == 5.0 and not d.expired()
    now[0] = 104.5
    assert d.remaining() == pytest.approx(0.5)
    now[0] = 105.0
    assert d.expired() and d.remaining() == 0.0


def test_timers_rearm_cancel_and_pop_in_due_order():
    t = Timers()
    t.arm("a", 3.0)
    t.arm("b", 1.0)
    t.arm("c", 2.0)
    t.arm("a", 0.5)  # re-armed: the earlier due time wins, the old entry is skipped
    t.cancel("c")
    assert len(t) == 2 and "c" not in t and "a" in t
    assert t.next_due() == 0.5
    assert t.pop_due(0.4) == []
    assert t.pop_due(1.0) == ["a", "b"]
    assert t.pop_due(10.0) == []  # a's stale 3.0 entry and c's cancelled one never fire
    assert t.next_due() is None and len(t) == 0


def test_net_dev_counters() -> None:
    text = ("Inter-|   Receive                            |  Transmit\n"
            " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets "
            "errs drop fifo colls carrier compressed\n"
            "    lo:     100       2    0    0    0     0          0         0      100       2 "
            "   0    0    0     0       0          0\r\n"
            "h1-eth0: 5000 40 0 0 0 0 0 0 7000 50 0 0 0 0 0 0\n")
    assert parse_net_dev(text) == {"lo": NicCounters(100, 2, 100, 2),
                                   "h1-eth0": NicCounters(5000, 40, 7000, 50)}
    assert "lo" in net_dev() and isinstance(nic_counters("lo"), NicCounters)  # counts move: no =
    assert nic_counters("no-such-iface") == (0, 0, 0, 0)
