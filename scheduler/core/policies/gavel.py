"""Gavel: heterogeneity-aware shares from a linear program, carried out by round-based time sharing.

Narayanan, Santhanam, Kazhamiaka, Phanishayee, Zaharia, "Heterogeneity-Aware Cluster Scheduling Policies for
Deep Learning Workloads", OSDI'20 (§3 the allocation X, §4 its policies, §5 the round-based mechanism), with the
policy Sia compared against (``max_sum_throughput_perf``, Sia SOSP'23 §4.3; ``TRACES_DIR/sia/
REFERENCE-SETUP.md`` §4). This is our own code, written from those descriptions.

Inputs: each job's throughput on every GPU type at its own size (``min_gpus``: Gavel is rigid, a job runs on
exactly the GPUs it asked for) and batch (speed.py, work units/s), the usable GPUs per type, the GPUs each job
holds, and the state below. Outputs: ``min_gpus`` or 0 per job, the type it runs on, a reason.

Allocation (§3.1, §4.2): X[j, t] ∈ [0, 1] is the share of time job j should spend on type t. Maximise the total
throughput Σ T[j, t]·X[j, t], subject to Σ_t X[j, t] ≤ 1 per job and Σ_j X[j, t]·size_j ≤ usable GPUs of t per
type. T[j, t] = 0 where the type has fewer usable GPUs than the job's size, or is not the type it requires.
Solved as a linear program with HiGHS (``scipy.optimize.linprog``; Gavel uses ECOS through CVXPY).

Round-based mechanism (§5): each round, job j's priority on type t is X[j, t] divided by the share of t's time it
has received so far (a job that has received none has priority X[j, t] × 10⁹). Entries (j, t) are taken in
decreasing priority; a job is given its size on t if it has not been given GPUs yet this round and t has that
many left. Time received is counted per type from the policy state (``received``): each round adds the seconds
since the last round to the type each running job holds and to that type's total; every job and type starts
with half a round, as in Gavel. Jobs not chosen wait (or are preempted: time sharing); a job chosen on the type
it holds keeps its GPUs.

Deterministic: ties in priority go to the earlier arrival, then the type's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import csr_array

from ..policy import Capabilities, hold_allocations, register
from ..speed import held_type, job_speed
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import arrival_key

NEW_JOB_PRIORITY = 1e9  # Gavel's: a job that has received no time on a type comes first there


@register
@dataclass(frozen=True)
class GavelPolicy:
    name: ClassVar[str] = "gavel"
    summary: ClassVar[str] = (
        "Gavel: time shares of each GPU type from a linear program "
        "over per-type throughputs; rigid"
    )
    event_driven: ClassVar[bool] = False  # time sharing: every round may swap jobs
    capabilities: ClassVar[Capabilities] = Capabilities(
        count_rule="which gavel gives every job (it does not scale jobs)",
    )
    round_seconds: float = 360.0  # the round Gavel was run with in Sia's comparison; time is counted as it passes

    def __post_init__(self) -> None:
        if not 0 < self.round_seconds < 1e7:
            raise ValueError("gavel's round_seconds must be > 0")

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        jobs = sorted(snap.jobs, key=arrival_key)
        types = sorted(snap.usable_by_type)
        received, totals = _time_received(snap, jobs, types, state or {}, self.round_seconds / 2)
        shares = _shares(snap, jobs, types)
        if shares is None:
            return hold_allocations(snap, state, "gavel: the linear program gave no answer")
        priorities = []
        for j, job in enumerate(jobs):
            for t, kind in enumerate(types):
                share = shares[j, t]
                if share <= 1e-9:
                    continue
                got = received[job.id][kind] / totals[kind] if totals[kind] > 0 else 0.0
                priorities.append((-(share / got if got > 0 else share * NEW_JOB_PRIORITY), j, kind))
        priorities.sort()
        left = dict(snap.usable_by_type)
        allocations, gpu_types, reasons = {job.id: 0 for job in jobs}, {}, {}
        for priority, j, kind in priorities:
            job = jobs[j]
            if allocations[job.id] or job.min_gpus > left[kind]:
                continue
            allocations[job.id], gpu_types[job.id] = job.min_gpus, kind
            left[kind] -= job.min_gpus
            reasons[job.id] = (f"gavel: {job.min_gpus} {kind} GPUs, {shares[j, types.index(kind)]:.0%} of its time "
                               f"should be there (priority {-priority:.3g})")
        for j, job in enumerate(jobs):
            if not allocations[job.id]:
                verb = "preempted" if job.running else "waiting"
                reasons[job.id] = (f"{verb}: its turn comes as its share of time ({shares[j].sum():.0%}) falls "
                                   "behind" if shares[j].sum() > 1e-9 else f"{verb}: no GPU type has room for it")
        state_out = {"received": {job.id: received[job.id] for job in jobs}, "totals": totals, "at": snap.now}
        return PolicyResult(allocations=allocations, state=state_out, reasons=reasons, gpu_types=gpu_types)


def _shares(snap: ClusterSnapshot, jobs: list[JobInfo], types: list[str]) -> np.ndarray | None:
    """Gavel's X: the max-sum-throughput allocation, jobs × types; None if the solver failed."""
    if not jobs or not types:
        return np.zeros((len(jobs), len(types)))
    usable = snap.usable_by_type
    throughput = np.array([[job_speed(job, snap, job.min_gpus, gpu_type=kind) if _may_run(job, kind, usable[kind])
                            else 0.0 for kind in types] for job in jobs])
    n, m = throughput.shape
    rows, cols, values = [], [], []
    for j, job in enumerate(jobs):
        for t in range(m):
            col = j * m + t
            rows += [j, n + t]
            cols += [col, col]
            values += [1.0, float(job.min_gpus)]
    matrix = csr_array((values, (rows, cols)), shape=(n + m, n * m))
    upper = np.concatenate([np.ones(n), [float(usable[kind]) for kind in types]])
    result = linprog(-throughput.ravel(), A_ub=matrix, b_ub=upper, bounds=(0.0, 1.0), method="highs")
    if result.x is None:
        return None
    return np.clip(result.x.reshape(n, m), 0.0, 1.0)


def _may_run(job: JobInfo, kind: str, usable: int) -> bool:
    """The type has room for the job's size, and is the type it requires if it requires one."""
    return job.min_gpus <= usable and job.gpu_type in (None, kind)


def _time_received(
    snap: ClusterSnapshot, jobs: list[JobInfo], types: list[str], state: Mapping[str, Any], start: float,
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Seconds each job has run on each type, and each type's total, up to now (Gavel's job and cluster time)."""
    before = state.get("received", {}) if isinstance(state.get("received"), Mapping) else {}
    totals_before = state.get("totals", {}) if isinstance(state.get("totals"), Mapping) else {}
    last = state.get("at")
    elapsed = max(snap.now - last, 0.0) if isinstance(last, int | float) else 0.0
    totals = {kind: float(totals_before.get(kind, 0.0)) for kind in types}
    received: dict[str, dict[str, float]] = {}
    for job in jobs:
        known = before.get(job.id)
        if isinstance(known, Mapping):
            received[job.id] = {kind: float(known.get(kind, start)) for kind in types}
        else:  # a new job: half a round on every type, as Gavel starts it
            received[job.id] = dict.fromkeys(types, start)
            for kind in types:
                totals[kind] += start
        holds = held_type(job, snap) if job.running else None
        if holds is not None and holds in totals and elapsed:
            received[job.id][holds] += elapsed
            totals[holds] += elapsed
    return received, totals
