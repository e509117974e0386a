"""Digests: DigestEntry configs, batching samples into DigestLists, acks."""

from __future__ import annotations

import threading
import time

from finsy.proto import p4d, p4r

from targets.embedded.p4runtime.base import ServiceBase
from targets.embedded.p4runtime.common import (
    SC,
    DigestState,
    P4RuntimeError,
    encode_bytes,
    invalid_id,
)
from targets.embedded.p4runtime.pipeline import DigestInfo, Pipeline


def digest_data(di: DigestInfo, sample: tuple[int, ...]) -> p4d.P4Data:
    """One digest sample as P4Data, shaped as the P4Info digest type says."""
    if di.kind == "bitstring":
        return p4d.P4Data(bitstring=encode_bytes(sample[0]))
    members = p4d.P4StructLike(members=[p4d.P4Data(bitstring=encode_bytes(v)) for v in sample])
    return p4d.P4Data(struct=members) if di.kind == "struct" else p4d.P4Data(tuple=members)


class DigestsMixin(ServiceBase):
    """Configure digests and stream DigestLists to the primaries."""

    def _write_digest(self, pl: Pipeline, t: int, de: p4r.DigestEntry) -> None:
        if de.digest_id not in pl.digests:
            raise invalid_id()
        self._check_update_type(t, p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE)
        with self._digest_lock:
            st = self._digests.get(de.digest_id)
            if t == p4r.Update.DELETE:
                if st is None:
                    raise P4RuntimeError(SC.NOT_FOUND, "Digest not configured")
                if st.timer is not None:
                    st.timer.cancel()
                del self._digests[de.digest_id]
                return
            if t == p4r.Update.INSERT and st is not None:
                raise P4RuntimeError(SC.ALREADY_EXISTS, "Digest already configured")
            if t == p4r.Update.MODIFY and st is None:
                raise P4RuntimeError(SC.NOT_FOUND, "Digest not configured")
            if not de.HasField("config"):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing config field in DigestEntry")
            c = de.config
            if c.max_timeout_ns < 0 or c.max_list_size < 0 or c.ack_timeout_ns < 0:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "DigestEntry config values must not be negative")
            if st is None:
                self._digests[de.digest_id] = DigestState(p4r.DigestEntry.Config(
                    max_timeout_ns=c.max_timeout_ns, max_list_size=c.max_list_size, ack_timeout_ns=c.ack_timeout_ns))
            else:
                st.config.CopyFrom(c)

    def _read_digest(self, pl: Pipeline, de: p4r.DigestEntry, out: list[p4r.Entity]) -> None:
        if de.digest_id and de.digest_id not in pl.digests:
            raise invalid_id()
        with self._digest_lock:
            for did, st in sorted(self._digests.items()):
                if de.digest_id in (0, did):
                    out.append(p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=did, config=st.config)))

    def _on_digest(self, learn_list: str, samples: list[tuple[int, ...]]) -> None:
        """Digest handler of the switch (data-plane thread): batch, dedup, maybe send."""
        pl = self.pipeline
        did = pl.digest_by_list.get(learn_list) if pl is not None else None
        if did is None:
            return
        now = time.monotonic()
        with self._digest_lock:
            st = self._digests.get(did)
            if st is None:  # not configured: PI drops it too
                return
            ack_timeout = st.config.ack_timeout_ns / 1e9
            if ack_timeout > 0:
                for list_id, (sent, lst) in list(st.pending.items()):
                    if now - sent > ack_timeout:
                        del st.pending[list_id]
                        st.cache.difference_update(lst)
            for s in samples:
                if ack_timeout > 0:
                    if s in st.cache:
                        continue
                    st.cache.add(s)
                st.buffer.append(s)
            if not st.buffer:
                return
            c = st.config
            if c.max_timeout_ns == 0 or (c.max_list_size > 0 and len(st.buffer) >= c.max_list_size):
                self._flush_digest(pl, did, st)
            elif st.timer is None:
                st.timer = threading.Timer(c.max_timeout_ns / 1e9, self._digest_timeout, (pl, did, st))
                st.timer.daemon = True
                st.timer.start()

    def _digest_timeout(self, pl: Pipeline, did: int, st: DigestState) -> None:
        with self._digest_lock:
            st.timer = None
            if self._digests.get(did) is st:
                self._flush_digest(pl, did, st)

    def _flush_digest(self, pl: Pipeline, did: int, st: DigestState) -> None:
        """Send the buffered samples (caller holds the digest lock)."""
        if st.timer is not None:
            st.timer.cancel()
            st.timer = None
        di = pl.digests[did]
        size = st.config.max_list_size or len(st.buffer)
        buffered, st.buffer = st.buffer, []
        with self._conn_lock:
            primaries = self._primaries()
        for i in range(0, len(buffered), size):
            chunk = buffered[i:i + size]
            list_id = st.next_list_id
            st.next_list_id += 1
            if st.config.ack_timeout_ns > 0:
                st.pending[list_id] = (time.monotonic(), chunk)
            if not primaries:
                self.digest_drops += len(chunk)
                continue
            data = [digest_data(di, s) for s in chunk]
            msg = p4r.StreamMessageResponse(digest=p4r.DigestList(
                digest_id=did, list_id=list_id, data=data, timestamp=time.time_ns()))
            for primary in primaries:
                primary.send(msg)

    def _digest_ack(self, ack: p4r.DigestListAck) -> None:
        with self._digest_lock:
            st = self._digests.get(ack.digest_id)
            if st is None:
                return
            item = st.pending.pop(ack.list_id, None)
            if item is not None:
                st.cache.difference_update(item[1])
