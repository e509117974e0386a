"""Whether a run's time says something about its scheme or about the emulator.

Every run of the harness gets one verdict, from evidence:

- ``x bound``: its measured synchronization time per iteration over the ideal bound of
  one synchronization (:mod:`experiments.ideal`: the scheme's own traffic without
  re-sends on the busiest link at its rate, plus its sequential latency);
- the CPU the switch processes (sampled from ``/proc`` during the training window only,
  :class:`experiments.accounting.TrainingWindow`) and the agents (their own count from
  the training's start) used, as a share of the machine's cores over that window.

A run is **emulator-bound** when it ran above :data:`X_LINK` times its ideal bound while
those processes kept at least :data:`CPU_SATURATED` of the cores busy, or one switch
process (one data-plane thread: it cannot use a second core) busy for that share of the
window: the links cannot explain the time and the CPU that emulates them was spent, so
the time is the emulator's. Otherwise it is **link-bound**: either the links explain the time, or the
CPU had room to spare and the time above the bound is the protocol's own (its timers,
windows, round trips). ``unknown`` when a figure is missing.
"""

from __future__ import annotations

from typing import Any

#: x bound at or below this: the links (and the protocol's latency) explain the time.
X_LINK = 1.5
#: Share of the cores the switches and agents used in the training window at or above
#: which the emulator had nothing left to give.
CPU_SATURATED = 0.8
LINK_BOUND, EMULATOR_BOUND, UNKNOWN = "link-bound", "emulator-bound", "unknown"


def cpu_share(switch_cpu_s: float | None, agent_cpu_s: float, window_s: float | None,
              cores: int, busiest_switch_cpu_s: float | None = None) -> float | None:
    """The larger of: CPU seconds of switches and agents over the window's core-seconds,
    and the busiest switch process's CPU seconds over the window (its one thread)."""
    if switch_cpu_s is None or not window_s or cores < 1:
        return None
    return max((switch_cpu_s + agent_cpu_s) / (window_s * cores),
               (busiest_switch_cpu_s or 0.0) / window_s)


def verdict(x_bound: float | None, share: float | None) -> str:
    """``link-bound``, ``emulator-bound`` or ``unknown`` (see the module doc)."""
    if x_bound is None:
        return UNKNOWN
    if x_bound <= X_LINK:
        return LINK_BOUND
    if share is None:
        return UNKNOWN
    return EMULATOR_BOUND if share >= CPU_SATURATED else LINK_BOUND


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
    """Fill a record's re-sent bytes, x bound, CPU share and verdict from its figures."""
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
    rec.fidelity = verdict(rec.x_bound, rec.cpu_share)
    rec.cpu_bound = rec.fidelity == EMULATOR_BOUND
