"""Parameter server of differentiated gradient transmission.

    python -m hosts.differentiated.ps --world W --mode M [--epochs E ...]       # training
    python -m hosts.differentiated.ps --world W --gradient G.npz --iterations K \\
        --out-dir DIR                                                              # fixed tensors

Listens on TCP and UDP port DIFF_TCP_PORT/DIFF_UDP_PORT. Each iteration it waits until
every important block of every worker is in (plus ``--grace`` seconds for unreliable
blocks, less when all arrive), rebuilds each worker's gradient with zeros in place of the
missing blocks, adds the late blocks of earlier iterations (delayed update), takes one
SGD step on the sum and sends the new parameters to every worker over TCP. Evaluates
test accuracy after every epoch. Prints one JSON summary; with ``--out-dir`` (fixed
tensors) saves each worker's reconstruction ``recon-w<rank>-it<i>.npz`` and the
received-block lists.

``--members IP,IP,...`` (rank order: worker r sends from the r-th address) makes the
receiver accept connections, datagrams and blocks only from the job's workers; refused
ones are counted in the summary's ``refused``. Without it any source is accepted (for
runs over loopback, where every worker has the same address).

With the harness's shared options (``--model``, ``--data``, ``--max-steps``, see the
worker) it trains the same model; ``--no-eval`` leaves the per-epoch evaluation to the
workers (rank 0's records). The summary adds the CPU seconds, the TCP retransmissions of
this namespace and the hash of the final weights.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np

from hosts.net import net_dev, udp_socket
from wire.differentiated import DIFF_LEVEL_IMPORTANT, Kind, frame, params_body

from .blocks import BlockLayout
from .receiver import Receiver
from .worker import (
    add_common_args,
    check_common_args,
    cpu_seconds,
    load_tensors,
    load_training,
    tcp_retransmissions,
    training_steps,
)


def _nic_counters() -> dict[str, int]:
    """rx bytes/packets of every non-loopback interface of this namespace."""
    nics = [c for name, c in net_dev().items() if name != "lo"]
    return {"rx_bytes": sum(c.rx_bytes for c in nics), "rx_packets": sum(c.rx_packets for c in nics)}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the PS agent."""
    p = argparse.ArgumentParser(prog="python -m hosts.differentiated.ps", description=__doc__.splitlines()[0])
    add_common_args(p)
    p.add_argument("--bind", default="0.0.0.0", help="address to listen on")
    p.add_argument("--grace", type=float, default=0.01,
                   help="seconds to wait for unreliable blocks once the important ones are in")
    p.add_argument("--staleness", type=int, default=1,
                   help="late blocks up to this many iterations old are applied (delayed update)")
    p.add_argument("--linger", type=float, default=0.5, help="seconds to count late datagrams at the end")
    p.add_argument("--out-dir", default=None, help="save reconstructions here (fixed tensors)")
    p.add_argument("--members", default=None, metavar="IP,IP,...",
                   help="source address of each worker, in rank order: refuse and count every other "
                        "source (default: accept any)")
    p.add_argument("--clip", type=float, default=0.0,
                   help="cap the L2 norm of the averaged gradient (sum / world) at this value before "
                        "the SGD step (0, default: no cap; see docs/differentiated.md, 'Stability')")
    p.add_argument("--no-eval", action="store_true",
                   help="no test accuracy per epoch here (the workers evaluate)")
    args = p.parse_args(argv)
    check_common_args(p, args)
    if args.clip < 0:
        p.error("--clip must be >= 0")
    members = None
    if args.members is not None:
        members = [m.strip() for m in args.members.split(",")]
        if len(members) != args.world:
            p.error(f"--members names {len(members)} addresses for --world {args.world}")
        for m in members:
            try:
                socket.inet_aton(m)
            except OSError:
                p.error(f"--members: {m!r} is not an IPv4 address")

    model = data = None
    if args.gradient:
        shapes = [a.shape for a in load_tensors(args.gradient)]
        total = steps = args.iterations
    else:
        import torch

        from hosts import training

        torch.set_num_threads(1)
        model, data = load_training(args)
        shapes = [a.shape for a in training.parameter_arrays(model)]
        steps = training_steps(args, len(data.y_train))
        total = steps * args.epochs
    layout = BlockLayout(shapes, args.block_size)

    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((args.bind, args.port))
    tcp.listen(args.world + 4)
    udp = udp_socket(args.bind, args.port, rcvbuf=8 << 20, sndbuf=None, blocking=True)
    rx = Receiver(layout, args.world, tcp, udp, args.staleness, members).start()
    print(json.dumps({"listening": args.port}), file=sys.stderr, flush=True)
    out_dir = Path(args.out_dir) if args.out_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)

    rx.wait_workers(args.max_time)
    nic0 = _nic_counters()
    cpu0, retrans0 = cpu_seconds(), tcp_retransmissions()
    t_start = time.monotonic()
    deadline = t_start + args.max_time
    missing = collections.Counter()  # level -> blocks not there at reconstruction
    iter_times: list[float] = []
    grace_waited: list[float] = []
    epochs: list[dict] = []
    norms: list[list[float]] = []  # per iteration, see "update_norms" in the summary
    incomplete = 0
    t_prev = t_start
    acc0 = None if args.no_eval else training_eval(model, data)
    if acc0 is not None:
        epochs.append({"epoch": 0, "seconds": 0.0, "accuracy": acc0})
    it = 0
    while it < total:
        ok, waited = rx.data.wait_ready(it, args.grace, max(0.0, deadline - time.monotonic()))
        if not ok:
            incomplete += 1
            print(json.dumps({"error": f"important blocks of iteration {it} incomplete at --max-time"}),
                  file=sys.stderr, flush=True)
            break
        grace_waited.append(waited)
        blocks, carry, levels = rx.data.take(it)
        agg = [np.zeros(s, dtype=np.float32) for s in layout.shapes]
        zero_filled = 0
        for w in range(args.world):
            got = blocks.get(w, {})
            lv = levels.get(w, b"")
            for j in range(len(layout)):
                if j not in got:
                    missing[lv[j] if j < len(lv) else -1] += 1
                    zero_filled += 1
            recon = layout.reconstruct(got)
            for a, r in zip(agg, recon, strict=True):
                a += r
            if out_dir:
                np.savez(out_dir / f"recon-w{w}-it{it}.npz", *recon)
                np.save(out_dir / f"received-w{w}-it{it}.npy", np.array(sorted(got), dtype=np.int64))
        on_time = _norm(agg)
        late_norm = 0.0
        if carry:  # delayed update: late blocks of earlier iterations join this one
            late = layout.reconstruct({})
            for j, values in carry:
                b = layout.blocks[j]
                late[b.tensor_index].reshape(-1)[b.start:b.start + b.count] += values
            late_norm = _norm(late)
            for a, r in zip(agg, late, strict=True):
                a += r
        total_norm = _norm(agg)
        # the cap applies to the whole step, late blocks included: no iteration moves the
        # model by more than lr * clip, whatever arrived late or was zero-filled
        scale = 1.0 / args.world
        if args.clip and total_norm * scale > args.clip:
            scale = args.clip / total_norm
        norms.append([round(on_time, 6), round(late_norm, 6), len(carry), zero_filled,
                      round(scale * args.world, 6)])
        stop = it + 1 >= total or time.monotonic() > deadline
        if model is not None:
            from hosts import training

            training.apply_gradients(model, agg, args.lr, scale)
            values = training.flatten(training.parameter_arrays(model))
        else:
            values = np.zeros(0, dtype=np.float32)
        rx.send_all(frame(Kind.PARAMS, params_body(it + 1, stop, values)))
        now = time.monotonic()
        iter_times.append(now - t_prev)
        t_prev = now
        it += 1
        if model is not None and not args.no_eval and it % steps == 0:
            epochs.append({"epoch": it // steps, "seconds": now - t_start,
                           "accuracy": training_eval(model, data)})
        if stop:
            break
    seconds = time.monotonic() - t_start
    rx.data.wait_byes(30.0)
    time.sleep(args.linger)  # count the datagrams still queued in the switch
    nic1 = _nic_counters()
    st = rx.data.stats
    summary = {
        "mode": args.mode, "world": args.world, "iterations": it, "seconds": seconds,
        "iteration_mean_s": float(np.mean(iter_times)) if iter_times else None,
        "grace_mean_s": float(np.mean(grace_waited)) if grace_waited else None,
        "incomplete": incomplete, "blocks_per_worker": len(layout),
        "missing_blocks": {str(k): v for k, v in sorted(missing.items())},
        "received_datagrams": {str(k): v for k, v in sorted(st.datagrams.items())},
        "received_blocks": {str(k): v for k, v in sorted(st.blocks.items())},
        "late_blocks": st.late_blocks, "stale_blocks": st.stale_blocks,
        "bad_messages": st.bad_messages, "duplicates": st.duplicates, "refused": st.refused(),
        "tcp_bytes": st.tcp_bytes, "udp_bytes": st.udp_bytes,
        "nic_rx_bytes": nic1["rx_bytes"] - nic0["rx_bytes"],
        "nic_rx_packets": nic1["rx_packets"] - nic0["rx_packets"],
        "epochs": epochs, "final_accuracy": epochs[-1]["accuracy"] if epochs else None,
        "workers": {str(w): b for w, b in sorted(rx.data.byes.items())},
        "important_level": DIFF_LEVEL_IMPORTANT,
        "cpu_s": round(cpu_seconds() - cpu0, 3), "retransmissions": tcp_retransmissions() - retrans0,
        # per iteration: L2 norm of the on-time sum and of the late blocks folded in, the
        # late blocks' count, the blocks zero-filled and the factor --clip left (1: none);
        # the step is lr * factor / world times the sum
        "update_norms": norms,
    }
    if model is not None:
        from hosts.trainer import weights_hash

        summary["weights"] = weights_hash(model)
    rx.stop()
    print(json.dumps(summary), flush=True)
    return 0 if not incomplete else 1


def _norm(arrays: list[np.ndarray]) -> float:
    """L2 norm of a list of tensors taken as one vector."""
    return float(np.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays)))


def training_eval(model, data) -> float | None:  # noqa: ANN001
    """Test accuracy, or None without a model (fixed tensors)."""
    if model is None:
        return None
    from hosts import training

    return training.evaluate(model, data)


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown (seconds with torch loaded on a busy machine): the
    # summary is out and the kernel closes the sockets.
    os._exit(rc)
