"""Conformance of replication.p4, metadata_echo.p4 (one and four priority queues) and
instance_meta.p4 (rig: ``tests/conformance_rig.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.conformance_models_replication import (
    ECHO_AT,
    _echo,
    echo_queue_burst,
    im_cpu_expected,
    im_cpu_paths,
    replication_pre_changes,
    replication_pre_expected,
)
from tests.conformance_rig import Case, Rig, _ids, pytestmark, run_case, target
from tests.conformance_specs import SPECS, open_rig
from tests.p4.packets import (
    Echo,
)

__all__ = ["pytestmark", "target"]


class TestReplication:
    """replication.p4: multicast, clone I2E/E2E, resubmit, recirculate, instance_type."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("replication", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["replication"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["replication"], case)

    def test_pre_changes_over_p4runtime(self, rig: Rig) -> None:
        assert replication_pre_changes(rig) == replication_pre_expected()


class TestMetadataEcho:
    """metadata_echo.p4: every standard_metadata field and the queueing_metadata.qid alias."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("metadata_echo", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["metadata_echo"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["metadata_echo"], case)

    def test_timestamps_follow_the_clock(self, rig: Rig) -> None:
        """Microseconds since the switch started: within the rig's lifetime, increasing."""
        seen = []
        for _ in range(3):
            before = (time.monotonic() - rig.t_start) * 1e6
            (_, f), = rig.exchange(1, _echo(), 1)
            after = (time.monotonic() - rig.t_start) * 1e6
            e = Echo(f[ECHO_AT:])
            assert 0 < e.ingress_global_timestamp <= after + 1000, (e.ingress_global_timestamp, before, after)
            assert e.egress_global_timestamp - e.ingress_global_timestamp < 100_000
            seen.append(e.ingress_global_timestamp)
            time.sleep(0.01)
        assert seen[0] + 10_000 <= seen[1] + 1 and seen[1] + 10_000 <= seen[2] + 1, seen

    def test_queue_burst(self, rig: Rig) -> None:
        """A burst to one port: order kept, queue depths within the burst, FIFO timestamps."""
        echoes = echo_queue_burst(rig)
        n = len(echoes)
        assert [e._pad0 for e in echoes] == list(range(n))
        for e in echoes:
            assert 0 <= e.enq_qdepth < n and 0 <= e.deq_qdepth < n, (e.enq_qdepth, e.deq_qdepth)
            assert e.qid == 0 and e.egress_port == 2 and e.egress_instance_type == 0
        enq = [e.enq_timestamp for e in echoes]
        deq = [e.egress_global_timestamp for e in echoes]
        assert enq == sorted(enq) and deq == sorted(deq)


class TestPriorityQueues:
    """metadata_echo.p4 with 4 strict-priority queues per port (``--priority-queues 4``):
    ``qid`` (through the ``queueing_metadata.qid`` alias) is the priority, and a priority
    beyond the last queue is dropped ("Priority out of range" in simple_switch). Both
    targets take ``--priority-queues`` (simple_switch_grpc 1.15: after ``--``)."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("metadata_echo", target, priority_queues=4) as rig:
            yield rig

    @pytest.mark.parametrize("priority", [0, 1, 3])
    def test_qid_is_priority(self, rig: Rig, priority: int) -> None:
        (port, f), = rig.exchange(1, _echo(out_port=2, set_priority=priority), 1)
        e = Echo(f[ECHO_AT:])
        assert (port, e.priority, e.qid, e.egress_port) == (2, priority, priority, 2)

    def test_priority_out_of_range_dropped(self, rig: Rig) -> None:
        assert rig.exchange(1, _echo(out_port=2, set_priority=5), 0) == []


class TestInstanceMetadata:
    """instance_meta.p4: every standard_metadata field per instance type (normal, I2E and
    E2E clone, resubmit, recirculate, replication, PacketOut, to the CPU port) and
    simple_switch's packet-length register through setValid/setInvalid."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("instance_meta", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["instance_meta"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["instance_meta"], case)

    def test_packet_out_and_packet_in(self, rig: Rig) -> None:
        got, expect = im_cpu_paths(rig), im_cpu_expected()
        for (name, g), (_, e) in zip(got, expect, strict=True):
            assert g == e, f"[{rig.target}] {name}: expected {e!r}, got {g!r}"
