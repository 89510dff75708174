"""heSRPT: split the cluster among all jobs, the smaller the remaining job the larger its share.

Berg, Vesilo, Harchol-Balter, "heSRPT: Parallel Scheduling to Minimize Mean Slowdown",
Performance Evaluation 2020, and "Optimal Resource Allocation for Elastic and Inelastic
Jobs", SPAA'20. For speedup s(k) = k^p (0 ≤ p < 1) and m jobs sorted by decreasing
remaining size (job 1 largest … job m smallest), the optimal share of job i is
    θ_i = (i/m)^c − ((i−1)/m)^c,   c = 1/(1−p),
so the smallest job gets the largest share (p → 1 tends to SRPT, p = 0 to equal shares).
Shares change only at arrivals and completions (the order of remaining sizes holds), so
the policy is event-driven.

Inputs: each job's ``remaining_work`` (assumed known), speed curve (speed.py),
``min_gpus``/``max_gpus``, ``gpu_type``; the usable GPUs by type.
Outputs: a count per job (0 or within its bounds) and reasons. No state, no ``wake_at``.

Assumptions and choices:
- Size = remaining time at ``min_gpus`` (work units differ between profiles; time does not).
- p per job: least-squares slope of log speed against log k over k = 1..max_gpus on its
  speed curve; jobs without a workload profile (speed known only at ``min_gpus``) or with
  ``max_gpus`` = 1 use the constructor's ``default_p``. heSRPT needs one p for all jobs:
  the mean of the per-job estimates, clipped to [0, 0.99].
- Jobs with no work left, or too large for the usable cluster of their type, are left out
  of m. Shares of the G usable GPUs are rounded by largest remainder (ties to the smaller
  job); a share above ``max_gpus`` is capped and one below ``min_gpus`` becomes 0. Then,
  smallest job first, counts are taken from the capacity ledger (a job of a scarce type
  gets what is left, or 0 below its minimum); GPUs still free start the waiting jobs at
  ``min_gpus``, smallest first, and the rest grow running jobs toward ``max_gpus``,
  smallest first.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from ..capacity import Capacity
from ..policy import Capabilities, register
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import SpeedMemo, gpus_text, resize_note, unschedulable

MAX_P = 0.99


@register
class HesrptPolicy:
    name: ClassVar[str] = "hesrpt"
    summary: ClassVar[str] = (
        "heSRPT: the cluster split among all jobs, the less work "
        "left the larger the share; elastic"
    )
    event_driven: ClassVar[bool] = True
    capabilities: ClassVar[Capabilities] = Capabilities()

    def __init__(self, default_p: float = 0.5) -> None:
        if not 0 <= default_p <= MAX_P:
            raise ValueError(f"default_p must lie in [0, {MAX_P}]")
        self.default_p = float(default_p)

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        memo = SpeedMemo(snap)
        size = {job.id: memo.remaining_time(job, job.min_gpus) for job in snap.jobs}
        cluster = Capacity(snap)
        eligible = [job for job in snap.jobs
                    if 0 < size[job.id] < np.inf and unschedulable(cluster, job) is None]
        smallest_first = sorted(eligible, key=lambda job: (size[job.id], job.submit_time, job.id))
        p = float(np.mean([self.exponent(job, snap, memo) for job in eligible])) if eligible else self.default_p
        shares = hesrpt_shares(len(smallest_first), min(p, MAX_P)) * cluster.total_free
        targets = largest_remainder(shares, cluster.total_free)
        allocations = fit_counts(smallest_first, targets, Capacity(snap))
        reasons = {job.id: explain(job, allocations.get(job.id, 0), share, rank, len(eligible), p)
                   for rank, (job, share) in enumerate(zip(smallest_first, shares, strict=True), start=1)}
        for job in snap.jobs:
            if job.id not in allocations:
                allocations[job.id] = 0
                reasons[job.id] = left_out(job, cluster, size[job.id])
        return PolicyResult(allocations=allocations, reasons={k: v for k, v in reasons.items() if v})

    def exponent(self, job: JobInfo, snap: ClusterSnapshot, memo: SpeedMemo) -> float:
        """p of s(k) = k^p fitted to the job's speed curve, or the default where the curve is not measured."""
        by_type = snap.profiles.get(job.profile) if job.profile else None
        fitted = fit_exponent(memo.table(job)) if by_type else None
        return self.default_p if fitted is None else min(max(fitted, 0.0), MAX_P)


def hesrpt_shares(m: int, p: float) -> NDArray:
    """heSRPT's fractions of the cluster for m jobs listed smallest first (they sum to 1)."""
    c = 1.0 / (1.0 - p)
    i = np.arange(m, 0, -1, dtype=float)  # the smallest job is job m
    return (i / m) ** c - ((i - 1) / m) ** c


def largest_remainder(shares: NDArray, total: int) -> NDArray:
    """Integers summing to ``total`` (or less, if the shares do), each floor or ceil of its share."""
    counts = np.floor(shares + 1e-9)
    short = max(0, min(total - int(counts.sum()), len(shares)))
    by_remainder = np.argsort(-(shares - counts), kind="stable")  # ties keep the smaller job first
    counts[by_remainder[:short]] += 1
    return counts.astype(int)


def fit_counts(smallest_first: list[JobInfo], targets: NDArray, capacity: Capacity) -> dict[str, int]:
    """Targets within bounds and capacity; then spare GPUs start waiting jobs, then grow running ones."""
    allocations: dict[str, int] = {}
    for job, target in zip(smallest_first, targets, strict=True):
        want = min(int(target), job.max_gpus, capacity.free_for(job))
        allocations[job.id] = want if want >= job.min_gpus else 0
        capacity.take(job, allocations[job.id])
    for job in smallest_first:
        if allocations[job.id] == 0 and capacity.fits(job, job.min_gpus):
            allocations[job.id] = job.min_gpus
            capacity.take(job, job.min_gpus)
    for job in smallest_first:
        extra = min(job.max_gpus - allocations[job.id], capacity.free_for(job)) if allocations[job.id] else 0
        allocations[job.id] += extra
        capacity.take(job, extra)
    return allocations


def fit_exponent(speeds: NDArray) -> float | None:
    """Least-squares slope of log speed against log k over the counts k ≥ 1 with positive speed."""
    k = np.arange(len(speeds), dtype=float)
    usable = (k >= 1) & (speeds > 0)
    if usable.sum() < 2:
        return None
    x, y = np.log(k[usable]), np.log(speeds[usable])
    x -= x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


def explain(job: JobInfo, gpus: int, share: float, rank: int, m: int, p: float) -> str | None:
    why = f"heSRPT share {share:.2f} GPUs, size rank {rank} of {m} (smallest first), p={p:.2f}"
    if gpus == 0:
        verb = "preempted" if job.running else "waiting"
        return f"{verb}: {gpus_text(job, job.min_gpus)} needed, not enough left after smaller jobs; {why}"
    return resize_note(job, gpus, why)


def left_out(job: JobInfo, cluster: Capacity, size: float) -> str:
    if job.remaining_work <= 0:
        return "finished: no work left"
    if size == np.inf:
        return f"unschedulable: its workload model makes no progress at {gpus_text(job, job.min_gpus)}"
    return unschedulable(cluster, job) or "waiting"
