"""Which of the traffic manager's standard_metadata fields a program reads (its clocks and
queue depths cost a call per packet each, so the switch fills only those)."""

from __future__ import annotations

import re

from targets.embedded.compiler import Program


def bind_metadata(program: Program) -> None:
    """Find the traffic manager's standard_metadata fields that ``program`` reads.

    p4c declares every field whether used or not; clocks and queue depths cost a
    call per packet each, so the switch fills only those the program can observe
    (its code, its field lists and digests) -- what it never reads has no effect. The
    slots go on the program itself (``Program.tm_*``), once."""
    if program.tm_bound:
        return
    lists = [set(v) for v in program.field_lists.values()]
    lists += [set(ll.slots) for ll in program.learn_by_id.values()]

    def used(name: str) -> int | None:
        slot = program.sm.get(name)
        if slot is None:
            return None
        if re.search(rf"\bF\[{slot}\]", program.source) or any(slot in fl for fl in lists):
            return slot
        return None

    program.tm_ig_ts = used("ingress_global_timestamp")
    program.tm_eg_ts = used("egress_global_timestamp")
    program.tm_enq_depth = used("enq_qdepth")
    program.tm_deq_depth = used("deq_qdepth")
    program.tm_deq_delta = used("deq_timedelta")
    # deq_timedelta is computed from the enqueue time
    program.tm_enq_ts = used("enq_timestamp")
    if program.tm_enq_ts is None and program.tm_deq_delta is not None:
        program.tm_enq_ts = program.sm.get("enq_timestamp")
    program.tm_bound = True
