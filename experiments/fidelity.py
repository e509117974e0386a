"""Whether a run's time says something about its scheme or about the emulator.

Every run of the harness gets one verdict, from evidence:

- ``x bound``: its measured synchronization time per iteration over the ideal bound of
  one synchronization (:mod:`experiments.ideal`: the scheme's own traffic without
  re-sends on the busiest link at its rate, plus its sequential latency);
- what the emulator's processes (the switch processes and the agents) did in the
  training window only (:class:`experiments.accounting.TrainingWindow`, counters of
  :mod:`experiments.cpu_evidence`): the CPU they used, the time their threads were
  runnable but waited in a run queue for a core, the busiest switch process, the
  machine's CPU (every process, ours or not) and UDP receive-buffer drops at the agents.

A run is **emulator-bound** when it ran above :data:`X_LINK` times its ideal bound and
one of these says the CPU, not the links, set its pace:

1. **saturated**: the switches and agents *wanted* at least :data:`CPU_SATURATED` of
   the machine's core-seconds in the window (CPU used plus run-queue wait: a process
   starved by others shows as waiting, not as CPU used);
2. **one switch saturated**: one switch process's threads ran or waited to run for at
   least :data:`CPU_SATURATED` of the window (its data plane is one thread, which cannot
   use a second core, and the Python backend's threads share one interpreter lock);
   or, in records from before the scheduler counters, one switch process used that
   much CPU;
3. **starved**: the machine was at least :data:`CPU_SATURATED` busy and the switch and
   agent threads together waited in run queues for at least :data:`STARVED` of the
   window (seconds of waiting per second): other work held the cores they needed,
   whatever CPU they got;
4. **dropped**: an agent's socket overflowed (``rx_drops`` > 0): a link delivered
   faster than the emulated host read.

Otherwise it is **link-bound**: either the links explain the time, or the CPU had room
to spare and the time above the bound is the protocol's own (its timers, windows, round
trips). ``unknown`` when a figure is missing. On a machine shared with other work,
rules 1 and 3 flag what that work slowed down: such a run says nothing about its scheme
either.
"""

from __future__ import annotations

from typing import Any

#: x bound at or below this: the links (and the protocol's latency) explain the time.
X_LINK = 1.5
#: Share of the cores (or of the window, for one switch process) wanted, or of the machine
#: busy, at or above which the emulator had nothing left to give.
CPU_SATURATED = 0.8
#: Run-queue wait of the switch and agent threads per second of the window at or above
#: which, on a busy machine, they were starved.
STARVED = 0.5
LINK_BOUND, EMULATOR_BOUND, UNKNOWN = "link-bound", "emulator-bound", "unknown"


def cpu_share(switch_cpu_s: float | None, agent_cpu_s: float, window_s: float | None,
              cores: int, busiest_switch_cpu_s: float | None = None) -> float | None:
    """The larger of: CPU seconds of switches and agents over the window's core-seconds,
    and the busiest switch process's CPU seconds over the window (its one thread)."""
    if switch_cpu_s is None or not window_s or cores < 1:
        return None
    return max((switch_cpu_s + agent_cpu_s) / (window_s * cores),
               (busiest_switch_cpu_s or 0.0) / window_s)


def verdict(x_bound: float | None, share: float | None, reasons: list[str] | None = None) -> str:
    """``link-bound``, ``emulator-bound`` or ``unknown`` (see the module doc): ``share``
    the CPU share of :func:`cpu_share` (rules 1 and 2 on CPU used only), ``reasons``
    those of :func:`pace_reasons` (None: no scheduler counters, judge by ``share``)."""
    if x_bound is None:
        return UNKNOWN
    if x_bound <= X_LINK:
        return LINK_BOUND
    if reasons:
        return EMULATOR_BOUND
    if share is None:
        return UNKNOWN
    return EMULATOR_BOUND if share >= CPU_SATURATED else LINK_BOUND


def pace_reasons(rec: Any) -> list[str] | None:
    """Which of the module doc's rules a record's window evidence meets (empty: none),
    as short words for the report; None when it has no scheduler counters (an older
    record, or no training window)."""
    if rec.window_switch_wait_s is None or not rec.window_s or rec.cores < 1:
        return None
    w = rec.window_s
    cpu = (rec.window_switch_cpu_s or 0.0) + (rec.window_agent_cpu_s or 0.0)
    wait = (rec.window_switch_wait_s or 0.0) + (rec.window_agent_wait_s or 0.0)
    rec.demand_share = round((cpu + wait) / (w * rec.cores), 3)
    rec.busiest_switch_share = round((rec.window_busiest_switch_wanted_s or 0.0) / w, 3)
    rec.wait_share = round(wait / w, 3)
    out = []
    if rec.demand_share >= CPU_SATURATED:
        out.append("saturated")
    if rec.busiest_switch_share >= CPU_SATURATED:
        out.append("one switch saturated")
    if (rec.machine_busy or 0.0) >= CPU_SATURATED and rec.wait_share >= STARVED:
        out.append("starved")
    if rec.rx_drops:
        out.append("dropped")
    return out


def resend_packet_bytes(scheme: str) -> int:
    """Wire bytes of one packet a scheme's agents count as a retransmission: an INA
    GRAD (ina, ps), an NDN Interest (its Data comes back again too: counted once), a
    token fragment, a full TCP segment for the schemes whose re-sends are TCP's."""
    from experiments import ideal

    if scheme in ("ina", "ps"):
        return ideal._ina_packet()
    if scheme.startswith("ndn"):
        from wire.ndn import SEGMENT_VALUES

        collect, _, interest, _ = ideal._ndn_sizes()
        return 4 * SEGMENT_VALUES + collect + interest + 2 * ideal.ETH
    if scheme == "token":
        from wire.token import TOKEN_HEADER_LEN, TOKEN_VALUES

        return ideal.ETH + TOKEN_HEADER_LEN + 4 * TOKEN_VALUES
    return ideal.TCP_MSS + ideal.TCP_HDR


def ideal_for(plan: Any, scheme: str, budget: int, job: Any = None, *,
              tor_in_budget: bool = False) -> dict[str, Any]:
    """The ideal figures of one synchronization of ``scheme`` as the harness runs it
    (``plan.settings[scheme]``; ``job``: the run's INA job, planned again if None, with
    s_d inside the budget when ``tor_in_budget``);
    ``{"error": why}`` where the model cannot say (a finished run is never lost to it)."""
    from experiments.ideal import ideal_sync

    setting = plan.settings[scheme]
    try:
        if job is None and scheme in ("ina", "ps"):
            from controller.ina import InaJob

            job = InaJob.plan(setting.topo, setting.ps, setting.workers, budget if scheme == "ina" else 0,
                              1000.0, plan.parameters, aggregate=scheme == "ina",
                              tor_in_budget=tor_in_budget)
        return ideal_sync(scheme, setting, plan.parameters, job).to_dict()
    except Exception as e:  # noqa: BLE001 (reported beside the run, which keeps its figures)
        return {"error": f"{type(e).__name__}: {e}"}


def judge(rec: Any) -> None:
    """Fill a record's re-sent bytes, x bound, CPU share, the evidence's shares, the
    verdict and (``pace``) the rules that made it emulator-bound, from its figures."""
    rec.resent_bytes = int(rec.retransmissions) * resend_packet_bytes(rec.scheme)
    if rec.resends:  # INA/PS: GRADs re-sent on NACKs; requests are a header-only frame
        from wire.ina import INA_HEADER_LEN

        asked = sum(rec.resends.get(k, 0) for k in ("request_fast", "request_probe", "request_timer"))
        rec.resent_bytes = (rec.resends.get("resend_nack", 0) * resend_packet_bytes(rec.scheme)
                            + asked * (INA_HEADER_LEN + 42))  # + UDP, IPv4, Ethernet
    rec.x_bound = (round(rec.sync_s_per_iter / rec.ideal_bound_s, 3)
                   if rec.sync_s_per_iter is not None and rec.ideal_bound_s else None)
    share = cpu_share(rec.window_switch_cpu_s, rec.agent_cpu_s, rec.window_s, rec.cores,
                      rec.window_busiest_switch_cpu_s)
    rec.cpu_share = None if share is None else round(share, 3)
    reasons = pace_reasons(rec)
    rec.fidelity = verdict(rec.x_bound, rec.cpu_share, reasons)
    rec.pace = (", ".join(reasons or []) or "CPU used") if rec.fidelity == EMULATOR_BOUND else ""
    rec.cpu_bound = rec.fidelity == EMULATOR_BOUND
