"""Data distribution of a token node (token: model, shards, JSON gradient files).

* :class:`Distribution` -- the initiator broadcasts the model's parameters (MODEL), every
  member's shard (DATA tagged with the member's number) and the test set (DATA 0), then
  DATA_DONE; members keep only their own shard and the test set and ack (DATA_ACK),
  missing pieces are NACKed and everything is re-sent (receivers keep what earlier rounds
  brought);
* :func:`encode_examples` / :func:`decode_examples` -- examples on the wire (65 bytes
  each as digits pixel levels, or 260 bytes as exact float32);
* :func:`write_json_gradients` / :func:`read_json_gradients` -- the JSON gradient files
  (one per batch and node).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from hosts.token.link import FrameIO, TokenError
from wire.token import TokenFlags, TokenMsg

BLOB_CHUNK = 1024  # raw payload bytes per MODEL/DATA frame
DISTRIBUTION_ROUNDS = 6  # the whole distribution at most this often (receivers keep pieces)


class Distribution(FrameIO):
    """Mixin of :class:`hosts.token.node.Node`: MODEL/DATA broadcast and its collection.

    Reads the node's ``roster`` and ``args.ack_timeout``/``args.join_timeout``."""

    roster: dict[int, bytes]

    def send_blob(self, msg: TokenMsg, member: int, data: bytes, batch: int = 0,
                  flags: int = 0) -> None:
        n = max(1, -(-len(data) // BLOB_CHUNK))
        for i in range(n):
            chunk = data[i * BLOB_CHUNK:(i + 1) * BLOB_CHUNK]
            self.send(self.header(msg, member=member, frag=i, nfrags=n, aux=len(data),
                                  batch=batch, flags=flags), payload=chunk)
            if i % 16 == 15:
                time.sleep(0.002)  # let the NICs' pipelines keep up

    def distribute(self, params: bytes, shards: dict[int, bytes], test: bytes, m_train: int) -> None:
        """Model, then each member's shard, then DATA_DONE; re-send on NACK."""
        for attempt in range(DISTRIBUTION_ROUNDS):
            flags = int(TokenFlags.RESEND) if attempt else 0
            self.send_blob(TokenMsg.MODEL, 0, params, flags=flags)
            for s, blob in shards.items():
                if s != self.seq:
                    self.send_blob(TokenMsg.DATA, s, blob, flags=flags)
            self.send_blob(TokenMsg.DATA, 0, test, flags=flags)
            self.send(self.header(TokenMsg.DATA_DONE, aux=m_train, count=len(self.roster)))
            acks: dict[int, int] = {}
            deadline = time.monotonic() + self.args.ack_timeout
            while time.monotonic() < deadline and len(acks) < len(self.roster) - 1:
                got = self.next_frame(0.1)
                if got and got[0].msg_type == TokenMsg.DATA_ACK:
                    acks[got[0].sender] = got[0].aux
            missing = [s for s in self.roster if s != self.seq and acks.get(s, 1) != 0]
            self.log("distributed", attempt=attempt, bytes=len(params) + sum(map(len, shards.values())),
                     missing=missing)
            if not missing:
                return
        raise TokenError(f"members {missing} never got the model and data")

    def receive_distribution(self) -> tuple[bytes, bytes, bytes, int]:
        """Collect MODEL, own DATA and the test set until DATA_DONE; ack."""
        blobs: dict[tuple[int, int], dict[int, bytes]] = {}
        sizes: dict[tuple[int, int], tuple[int, int]] = {}
        deadline = time.monotonic() + self.args.join_timeout
        while time.monotonic() < deadline:
            got = self.next_frame(0.5)
            if got is None:
                continue
            hdr, _src, rest = got
            if hdr.msg_type in (TokenMsg.MODEL, TokenMsg.DATA):
                key = (hdr.msg_type, hdr.member)
                if hdr.msg_type == TokenMsg.DATA and hdr.member not in (0, self.seq):
                    continue  # keep only the data of my own sequence number
                blobs.setdefault(key, {})[hdr.frag] = bytes(rest)
                sizes[key] = (hdr.nfrags, hdr.aux)
            elif hdr.msg_type == TokenMsg.DATA_DONE:
                want = [(TokenMsg.MODEL, 0), (TokenMsg.DATA, self.seq), (TokenMsg.DATA, 0)]
                missing = 0
                out = []
                for key in want:
                    nf, total = sizes.get(key, (1, -1))
                    have = blobs.get(key, {})
                    missing += sum(1 for i in range(nf) if i not in have)
                    if total >= 0 and not missing:
                        out.append(b"".join(have[i] for i in range(nf))[:total])
                if not missing and len(out) == 3:
                    return out[0], out[1], out[2], hdr.aux  # acked once the model is built
                self.send(self.header(TokenMsg.DATA_ACK, aux=max(1, missing)))
            elif hdr.msg_type == TokenMsg.TOKEN:
                self.pending.append(got)
                raise TokenError("training started before this node got its data")
        raise TokenError("no model/data from the initiator")


def exact_encoding(data_name: str) -> bool:
    """Whether the examples of data set ``data_name`` (a node's ``--data``) travel as
    float32: every set but the digits, whose pixels are levels / 16 and travel exactly as
    levels (and ``""``, the node's default digits split)."""
    return data_name not in ("", "digits")


def encode_examples(x: Any, y: Any, exact: bool = False) -> bytes:
    """Examples (N, 1, 8, 8) -> bytes. Default: 64 pixel levels (0..16) + label per
    example, uint8 (65 bytes; exact for the digits, whose pixels are levels / 16).
    ``exact``: 64 float32 features + the label as float32 (260 bytes), any data set
    bit for bit (the harness's ``--data``)."""
    if exact:
        xs = np.asarray(x, dtype=np.float32).reshape(len(y), -1)
        return np.concatenate([xs, np.asarray(y, dtype=np.float32)[:, None]], axis=1).tobytes()
    xs = np.rint(np.asarray(x).reshape(len(y), -1) * 16).astype(np.uint8)
    return np.concatenate([xs, np.asarray(y, dtype=np.uint8)[:, None]], axis=1).tobytes()


def decode_examples(data: bytes, exact: bool = False) -> tuple[Any, Any]:
    """Inverse of :func:`encode_examples` (same ``exact``): tensors (N, 1, 8, 8) float32
    and int64 labels."""
    import torch

    if exact:
        a = np.frombuffer(data, dtype=np.float32).reshape(-1, 65)
        x = torch.from_numpy(a[:, :64].copy().reshape(-1, 1, 8, 8))
        return x, torch.from_numpy(a[:, 64].astype(np.int64))
    a = np.frombuffer(data, dtype=np.uint8).reshape(-1, 65)
    x = torch.from_numpy(a[:, :64].astype(np.float32).reshape(-1, 1, 8, 8) / 16.0)
    y = torch.from_numpy(a[:, 64].astype(np.int64))
    return x, y


def write_json_gradients(path: Path, batch: int, seq: int, arrays: list[np.ndarray],
                         n: int | None = None) -> None:
    """The JSON gradient interface: one file per batch and node,
    ``{"batch", "node", ["n",] "gradients": [{"shape", "values"}, ...]}`` in
    ``model.parameters()`` order (own gradients ``grad-*``, averaged sums ``mean-*``)."""
    doc: dict[str, Any] = {"batch": batch, "node": seq,
                           "gradients": [{"shape": list(a.shape), "values": a.ravel().tolist()}
                                         for a in arrays]}
    if n is not None:
        doc["n"] = n
    path.write_text(json.dumps(doc))


def read_json_gradients(path: str | Path) -> list[np.ndarray]:
    """Arrays back from a file of :func:`write_json_gradients`."""
    doc = json.loads(Path(path).read_text())
    return [np.asarray(g["values"], dtype=np.float32).reshape(g["shape"]) for g in doc["gradients"]]
