"""Differentiated transmission (differentiated) without a network: blocks, header, SANE
contribution, threshold and levels, reconstruction, the receiver's buffers and engines
over loopback sockets, and a short real training on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hosts.differentiated.blocks import BlockLayout, Contribution, classify, threshold
from hosts.differentiated.receiver import DataBuffer, Receiver
from wire.differentiated import (
    DIFF_BLOCK_HEADER_LEN,
    DSCP_BEST_EFFORT,
    DSCP_IMPORTANT,
    DSCP_LEVELS,
    DiffBlockHeader,
    DiffDecodeError,
    Kind,
    decode_diff_block,
    dscp_priority_map,
    encode_diff_block,
    frame,
    level_dscp,
    manifest,
    pack_datagrams,
    parse_manifest,
)
from wire.scapy_layers import diff_block_layer

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- blocks


def test_conv_weight_split_by_kernel_others_by_size() -> None:
    shapes = [(16, 8, 3, 3), (16,), (10, 100), (5,)]
    layout = BlockLayout(shapes, block_size=64)
    conv = [b for b in layout.blocks if b.tensor_index == 0]
    assert len(conv) == 16 and all(b.count == 8 * 9 for b in conv)
    assert [b.position for b in conv] == [4 * 72 * i for i in range(16)]
    assert all((b.first_block, b.last_block) == (0, 15) for b in conv)
    (bias,) = [b for b in layout.blocks if b.tensor_index == 1]
    assert (bias.block_index, bias.count, bias.first_block, bias.last_block) == (16, 16, 16, 16)
    fc = [b for b in layout.blocks if b.tensor_index == 2]
    assert [b.count for b in fc] == [64] * 15 + [40]  # 1000 values: last block shorter
    assert (fc[0].first_block, fc[-1].last_block, fc[0].tensor_bytes) == (17, 32, 4000)
    assert [b.block_index for b in layout.blocks] == list(range(len(layout)))
    # every value of every tensor is in exactly one block
    for t, shape in enumerate(shapes):
        covered = sum(b.count for b in layout.blocks if b.tensor_index == t)
        assert covered == int(np.prod(shape))


def test_split_and_reconstruct_place_every_block() -> None:
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(4, 2, 3, 3), (4,), (7, 13)]]
    layout = BlockLayout.of(arrays, block_size=10)
    blocks = layout.split(arrays)
    full = layout.reconstruct(dict(enumerate(blocks)))
    for a, r in zip(arrays, full, strict=True):
        assert np.array_equal(a, r)
    keep = {j: v for j, v in enumerate(blocks) if j % 3 != 1}
    part = layout.reconstruct(keep)
    masks = layout.missing_mask(keep)
    for a, r, m in zip(arrays, part, masks, strict=True):
        assert np.array_equal(r[~m], a[~m])  # equal outside the missing blocks
        assert not r[m].any()  # zero inside them
    assert sum(int(m.sum()) for m in masks) == sum(b.count for b in layout.blocks if b.block_index % 3 == 1)
    with pytest.raises(ValueError, match="expected"):
        layout.reconstruct({0: np.zeros(3, dtype=np.float32)})
    with pytest.raises(ValueError, match="not in this layout"):
        layout.reconstruct({len(layout): np.zeros(1)})


def test_block_header_round_trip_struct_and_scapy() -> None:
    hdr = DiffBlockHeader(tensor_index=2, block_index=17, first_block=17, last_block=32,
                          tensor_bytes=4000, position=256, iteration=9, worker=3, level=2, flags=0, count=4)
    values = np.array([1.5, -0.0, 3.25e-8, np.float32(np.pi)], dtype=np.float32)
    wire = encode_diff_block(hdr, values)
    assert len(wire) == DIFF_BLOCK_HEADER_LEN + 16
    # the six location fields first, in order, big-endian
    assert wire[:22] == bytes.fromhex("0002" "00000011" "00000011" "00000020" "00000fa0" "00000100")
    got, vals, end = decode_diff_block(wire + wire, 0)
    assert got == hdr and end == len(wire)
    assert vals.dtype == np.float32 and vals.tobytes() == values.tobytes()  # bit-exact
    DiffBlock = diff_block_layer()
    pkt = DiffBlock(wire + wire)
    assert (pkt.tensor_index, pkt.block_index, pkt.first_block, pkt.last_block, pkt.tensor_bytes,
            pkt.position, pkt.iteration, pkt.worker, pkt.level, pkt.count) == (2, 17, 17, 32, 4000, 256, 9, 3, 2, 4)
    assert pkt.payload.block_index == 17  # the second block message of the datagram
    built = bytes(DiffBlock(tensor_index=2, block_index=17, first_block=17, last_block=32, tensor_bytes=4000,
                            position=256, iteration=9, worker=3, level=2, values=[float(v) for v in values]))
    assert built == wire


def test_block_decode_errors() -> None:
    hdr = DiffBlockHeader(0, 1, 0, 3, 64, 16, 0, 0, 1, 0, 4)
    wire = encode_diff_block(hdr, np.zeros(4, dtype=np.float32))
    with pytest.raises(DiffDecodeError, match="truncated"):
        decode_diff_block(wire[:10])
    with pytest.raises(DiffDecodeError, match="announced"):
        decode_diff_block(wire[:-1])
    with pytest.raises(DiffDecodeError, match="outside"):
        decode_diff_block(encode_diff_block(hdr._replace(block_index=5), np.zeros(4)))
    with pytest.raises(DiffDecodeError, match="overruns"):
        decode_diff_block(encode_diff_block(hdr._replace(position=56), np.zeros(4)))
    with pytest.raises(ValueError, match="count"):
        encode_diff_block(hdr, np.zeros(3))


# ----------------------------------------------------------------------------- SANE, classes


def test_contribution_formula_known_numbers() -> None:
    c = Contribution(2, alpha=0.5)
    got = c.update([np.array([1.0, -1.0]), np.array([2.0, 2.0, -2.0])])
    assert np.allclose(got, [0.5, 1.0])  # 0.5 * 0 + 0.5 * mean|g|
    got = c.update([np.array([3.0, -3.0]), np.array([0.0, 0.0, 0.0])])
    assert np.allclose(got, [0.5 * 0.5 + 0.5 * 3.0, 0.5 * 1.0 + 0.5 * 0.0])
    c0 = Contribution(1, alpha=0.0)
    assert np.allclose(c0.update([np.array([-4.0, 2.0])]), [3.0])
    with pytest.raises(ValueError, match="alpha"):
        Contribution(1, alpha=1.0)


def test_threshold_and_levels() -> None:
    contrib = np.arange(10, dtype=float)
    assert threshold(contrib, 0.7) == pytest.approx(6.3)
    levels = classify(contrib, 0.7, 3)
    # 7, 8, 9 above the threshold: important; 6, 5, 4 -> level 1; 3, 2 -> 2; 1, 0 -> 3
    assert levels.tolist() == [3, 3, 2, 2, 1, 1, 1, 0, 0, 0]
    assert classify(contrib, 1.0, 3).min() >= 1  # nothing above the maximum
    assert (classify(contrib, 0.0, 2) == 0).sum() == 9  # all but the smallest
    lv = classify(np.random.default_rng(0).random(100), 0.5, 4)
    assert (lv == 0).sum() == 50 and [(lv == k).sum() for k in (1, 2, 3, 4)] == [13, 12, 13, 12]
    with pytest.raises(ValueError):
        classify(contrib, 1.5, 3)


def test_dscp_and_priorities() -> None:
    rules = dscp_priority_map(3)
    assert rules[DSCP_IMPORTANT] == 7 and rules[DSCP_BEST_EFFORT] == 0
    assert [rules[d] for d in DSCP_LEVELS[:3]] == [6, 3, 0]  # level 1 above level 2 above level 3
    assert level_dscp(0, "differentiated") == DSCP_IMPORTANT
    assert level_dscp(2, "differentiated") == DSCP_LEVELS[1]
    assert level_dscp(2, "unreliable") == DSCP_BEST_EFFORT
    assert level_dscp(2, "reliable") == DSCP_IMPORTANT
    with pytest.raises(ValueError):
        dscp_priority_map(0)


def test_pack_datagrams_and_manifest() -> None:
    msgs = [bytes([i]) * 500 for i in range(5)]
    d = pack_datagrams(msgs, 1400)
    assert [len(x) for x in d] == [1000, 1000, 500]
    assert b"".join(d) == b"".join(msgs)
    assert pack_datagrams([b"x" * 2000], 1400) == [b"x" * 2000]
    assert parse_manifest(manifest(7, 3, [4, 5, 6], [0, 1, 2, 3])) == (7, 3, [4, 5, 6], bytes([0, 1, 2, 3]))


# ----------------------------------------------------------------------------- receiver


def _msg(layout: BlockLayout, j: int, it: int, worker: int, level: int, values: np.ndarray) -> bytes:
    return encode_diff_block(layout.blocks[j].header(it, worker, level), values)


def test_data_buffer_waits_for_important_and_folds_late_blocks() -> None:
    layout = BlockLayout([(6,)], block_size=2)  # blocks 0, 1, 2
    buf = DataBuffer(layout, world=1, staleness=1)
    buf.manifest(0, manifest(0, 1, [1], [0, 1, 1]))
    ok, _ = buf.wait_ready(0, grace=0.0, timeout=0.05)
    assert not ok  # the important block is not in yet
    buf.store(_msg(layout, 0, 0, 0, 0, np.array([1, 2], np.float32)), reliable=True)
    buf.store(_msg(layout, 1, 0, 0, 1, np.array([3, 4], np.float32)), reliable=False)
    ok, _ = buf.wait_ready(0, grace=0.05, timeout=1)
    assert ok
    blocks, carry, levels = buf.take(0)
    assert sorted(blocks[0]) == [0, 1] and carry == [] and levels[0] == bytes([0, 1, 1])
    recon = layout.reconstruct(blocks[0])[0]
    assert recon.tolist() == [1, 2, 3, 4, 0, 0]
    # block 2 of iteration 0 arrives late: kept for the next aggregate (delayed update)
    buf.store(_msg(layout, 2, 0, 0, 1, np.array([5, 6], np.float32)), reliable=False)
    assert buf.stats.late_blocks == 1
    _, carry, _ = buf.take(1)
    assert [(j, v.tolist()) for j, v in carry] == [(2, [5.0, 6.0])]
    buf.take(2)
    buf.store(_msg(layout, 2, 0, 0, 1, np.array([5, 6], np.float32)), reliable=False)
    assert buf.stats.stale_blocks == 1  # three iterations late: dropped


def test_receiver_engines_over_loopback_sockets() -> None:
    layout = BlockLayout([(3, 1, 2, 2), (10,)], block_size=4)  # 3 kernels + 3 blocks
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    rx = Receiver(layout, world=2, tcp=tcp, udp=udp).start()
    rng = np.random.default_rng(1)
    grads = {w: [rng.standard_normal((3, 1, 2, 2)).astype(np.float32),
                 rng.standard_normal(10).astype(np.float32)] for w in range(2)}
    clients = []
    try:
        for w in range(2):
            c = socket.create_connection(tcp.getsockname())
            clients.append(c)
            c.sendall(frame(Kind.HELLO, w.to_bytes(2, "big") + b"\x00\x02"))
        rx.wait_workers(5)
        levels = [0, 0, 1, 1, 2, 2]
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for w, c in enumerate(clients):
            blocks = layout.split(grads[w])
            imp = [frame(Kind.BLOCK, _msg(layout, j, 0, w, 0, blocks[j])) for j in range(6) if levels[j] == 0]
            c.sendall(frame(Kind.MANIFEST, manifest(0, len(imp), [1, 1], levels)) + b"".join(imp))
            for lv in (1, 2):
                if w == 1 and lv == 2:
                    continue  # this datagram is "lost"
                u.sendto(b"".join(_msg(layout, j, 0, w, lv, blocks[j]) for j in range(6) if levels[j] == lv),
                         udp.getsockname())
        ok, _ = rx.data.wait_ready(0, grace=2.0, timeout=5)
        assert ok
        deadline = time.monotonic() + 5  # the grace period may end before the last datagram
        while rx.data.stats.datagrams[1] + rx.data.stats.datagrams[2] < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        blocks, _, _ = rx.data.take(0)
        assert sorted(blocks[0]) == list(range(6)) and sorted(blocks[1]) == [0, 1, 2, 3]
        for w in range(2):
            recon = layout.reconstruct(blocks[w])
            assert np.array_equal(recon[0], grads[w][0])  # important kernels bit-exact
        assert np.array_equal(layout.reconstruct(blocks[1])[1][:4], grads[1][1][:4])
        assert not layout.reconstruct(blocks[1])[1][4:].any()  # the lost level-2 blocks: zeros
        assert rx.data.stats.datagrams == {1: 2, 2: 1}
        assert rx.data.stats.blocks[0] == 4  # two important blocks per worker, over TCP
    finally:
        for c in clients:
            c.close()
        rx.stop()


def _until(cond, what: str, timeout: float = 5.0) -> None:  # noqa: ANN001
    """Wait for ``cond()`` (the receiver's threads run concurrently); fail with ``what``."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _from(addr: str, kind: int = socket.SOCK_STREAM) -> socket.socket:
    s = socket.socket(socket.AF_INET, kind)
    s.bind((addr, 0))  # any 127/8 address is local: a host of its own
    return s


def test_receiver_refuses_non_members_and_the_sum_stays_exact() -> None:
    """With the job's members (rank -> address), a connection or datagram from another
    address, a HELLO under another member's rank, and a block whose worker field is not
    its sender's rank are refused and counted; the members' blocks still sum exactly."""
    layout = BlockLayout([(3, 1, 2, 2), (10,)], block_size=4)  # 3 kernels + 3 blocks
    levels = [0, 0, 1, 1, 2, 2]
    members = ["127.0.0.1", "127.0.0.3"]
    tcp = _from("127.0.0.1")
    tcp.listen(8)
    udp = _from("127.0.0.1", socket.SOCK_DGRAM)
    rx = Receiver(layout, world=2, tcp=tcp, udp=udp, members=members).start()
    st = rx.data.stats
    rng = np.random.default_rng(2)
    grads = {w: [rng.standard_normal((3, 1, 2, 2)).astype(np.float32),
                 rng.standard_normal(10).astype(np.float32)] for w in range(2)}
    forged = layout.split([np.full((3, 1, 2, 2), 1e6, np.float32), np.full(10, 1e6, np.float32)])
    socks: list[socket.socket] = []

    def connect(addr: str, rank: int) -> socket.socket:
        c = _from(addr)
        socks.append(c)
        c.connect(tcp.getsockname())
        c.sendall(frame(Kind.HELLO, rank.to_bytes(2, "big") + b"\x00\x02"))
        return c

    try:
        connect("127.0.0.2", 0)                     # not a member
        _until(lambda: st.refused_connections == 1, "non-member connection not refused")
        connect("127.0.0.1", 1)                     # rank 0's address claiming rank 1
        _until(lambda: st.refused_connections == 2, "HELLO under another rank not refused")
        with pytest.raises(TimeoutError):
            rx.wait_workers(0.2)                    # neither counts as a worker
        c0, c1 = connect("127.0.0.1", 0), connect("127.0.0.3", 1)
        rx.wait_workers(5)
        # forgeries first: had they been kept, the real blocks would be duplicates
        intruder = _from("127.0.0.2", socket.SOCK_DGRAM)
        socks.append(intruder)
        for w in range(2):
            intruder.sendto(b"".join(_msg(layout, j, 0, w, 1, forged[j]) for j in (2, 3)), udp.getsockname())
        u0, u1 = _from("127.0.0.1", socket.SOCK_DGRAM), _from("127.0.0.3", socket.SOCK_DGRAM)
        socks += [u0, u1]
        u0.sendto(_msg(layout, 2, 0, 1, 1, forged[2]), udp.getsockname())    # rank 0 writing rank 1's block
        c0.sendall(frame(Kind.BLOCK, _msg(layout, 0, 0, 1, 0, forged[0])))   # ... over its own connection
        _until(lambda: st.refused_datagrams == 2 and st.refused_blocks == 2, "forged blocks not refused")
        for w, (c, u) in enumerate(((c0, u0), (c1, u1))):
            blocks = layout.split(grads[w])
            imp = [frame(Kind.BLOCK, _msg(layout, j, 0, w, 0, blocks[j])) for j in range(6) if levels[j] == 0]
            c.sendall(frame(Kind.MANIFEST, manifest(0, len(imp), [1, 1], levels)) + b"".join(imp))
            for lv in (1, 2):
                u.sendto(b"".join(_msg(layout, j, 0, w, lv, blocks[j]) for j in range(6) if levels[j] == lv),
                         udp.getsockname())
        ok, _ = rx.data.wait_ready(0, grace=5.0, timeout=5)
        assert ok
        _until(lambda: rx.data._all_complete(0), "members' blocks missing")
        blocks, _, _ = rx.data.take(0)
        total = [a + b for a, b in zip(layout.reconstruct(blocks[0]), layout.reconstruct(blocks[1]), strict=True)]
        for t, a, b in zip(total, grads[0], grads[1], strict=True):
            assert np.array_equal(t, a + b)        # element by element, no forged value in it
        assert st.duplicates == 0 and st.bad_messages == 0
        assert st.refused() == {"connections": 2, "datagrams": 2, "blocks": 2}
    finally:
        for c in socks:
            c.close()
        rx.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u, socket.socket() as t:
        t.bind(("127.0.0.1", 0))
        port = t.getsockname()[1]
        u.bind(("127.0.0.1", port))  # the agents use the same number for TCP and UDP
        return port


@pytest.mark.long  # the same agents train over the emulated switch in test_train_differentiated
@pytest.mark.parametrize("mode", ["differentiated"])
def test_training_on_loopback(tmp_path: Path, mode: str) -> None:
    """Real training, one epoch, PS and two workers as processes over loopback."""
    port = str(_free_port())
    common = ["--world", "2", "--mode", mode, "--epochs", "1", "--port", port, "--max-time", "120"]
    ps = subprocess.Popen([sys.executable, "-m", "hosts.differentiated.ps", *common, "--bind", "127.0.0.1",
                           "--linger", "0.1", "--members", "127.0.0.1,127.0.0.1"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers = []
    try:
        for _ in range(50):  # wait until its sockets are bound
            line = ps.stderr.readline()
            if not line or b"listening" in line:
                break
        workers = [subprocess.Popen([sys.executable, "-m", "hosts.differentiated.worker", "--ps", "127.0.0.1",
                                     "--rank", str(r), *common], cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE) for r in range(2)]
        outs = [w.communicate(timeout=150) for w in workers]
        out, err = ps.communicate(timeout=60)
    finally:
        for p in (ps, *workers):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert ps.returncode == 0, err.decode()[-800:]
    assert all(w.returncode == 0 for w in workers), [o[1].decode()[-300:] for o in outs]
    summary = json.loads(out.decode().strip().splitlines()[-1])
    steps = (1348 // 2) // 32
    assert summary["iterations"] == steps and summary["incomplete"] == 0
    assert summary["refused"] == {"connections": 0, "datagrams": 0, "blocks": 0}  # both workers are members
    assert summary["epochs"][-1]["accuracy"] > summary["epochs"][0]["accuracy"] + 0.1
    w0 = json.loads(outs[0][0].decode().strip().splitlines()[-1])
    assert w0["iterations"] == steps
    if mode == "reliable":
        assert w0["sent_datagrams"] == [0, 0, 0, 0] and summary["missing_blocks"] == {}
    else:
        # loopback loses nothing: every unreliable datagram arrives
        assert sum(w0["sent_datagrams"]) > 0
        sent = sum(sum(json.loads(o[0].decode().strip().splitlines()[-1])["sent_datagrams"]) for o in outs)
        assert sum(summary["received_datagrams"].values()) == sent


def test_share_threshold_keeps_the_fewest_blocks_carrying_the_share() -> None:
    from hosts.differentiated.blocks import share_threshold

    c = np.array([1.0, 5.0, 2.0, 2.0, 10.0])  # total 20
    for share, important in ((0.5, {4}), (0.51, {4, 1}), (0.75, {4, 1}), (0.8, {4, 1, 2, 3}), (1.0, {0, 1, 2, 3, 4})):
        lv = classify(c, 0.5, 2, cut=share_threshold(c, share))
        assert set(np.flatnonzero(lv == 0).tolist()) == important, share
    assert share_threshold(np.zeros(3), 0.5) == 0.0  # nothing above 0: no block important
    with pytest.raises(ValueError):
        share_threshold(c, 0.0)


def test_classify_random_draws_the_count_and_grades_the_rest() -> None:
    from hosts.differentiated.blocks import classify_random

    rng = np.random.default_rng(1)
    a, b = classify_random(30, 10, 3, rng), classify_random(30, 10, 3, rng)
    for lv in (a, b):
        assert (lv == 0).sum() == 10 and sorted(np.bincount(lv).tolist()) == [6, 7, 7, 10]
    assert not np.array_equal(a, b)  # a fresh draw every iteration
    with pytest.raises(ValueError):
        classify_random(3, 4, 1, rng)
