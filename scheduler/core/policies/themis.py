"""Themis: finish-time fairness.

Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI'20, §3–4.
A job's finish-time fairness is ρ = T_shared / T_independent: how much longer it takes in
the shared cluster than on a private slice of it. ρ ≤ 1 is fair; Themis serves the apps
with the worst ρ first.

Inputs: ``snap.now``; each job's ``submit_time``, ``total_work``, ``remaining_work``
(assumed known, as Themis assumes apps report their progress and remaining work),
``tenant``, ``min_gpus``/``max_gpus``, ``gpu_type`` and speed curve (speed.py); tenants'
``weight``; the usable GPUs by type.
Outputs: a count per job (0 or within its bounds) and reasons. No state, no ``wake_at``.

Assumptions and choices:
- The private slice is per tenant, weighted: tenant t with weight w_t owns
  G·w_t/Σw of the G usable GPUs of the job's type (Σ over tenants with active jobs),
  split evenly among its active jobs. (Themis slices per app, 1/N; a tenant is this
  console's app.) T_independent = total_work / speed on that slice; a slice below
  ``min_gpus`` is time-shared at ``min_gpus``, a slice above ``max_gpus`` is capped.
- T_shared = (now − submit_time) + remaining time at the offered allocation.
- Greedy approximation of Themis' partial-allocation auction (no bids, no fairness
  knob f, no leases): jobs in decreasing ρ at ``min_gpus`` (ties by submit time, id) each
  get ``min_gpus`` while they fit, with backfilling. Spare GPUs then go one step at a
  time to the elastic job with the worst ρ at its current count, for as long as a step
  makes it faster. Re-decided at every arrival and completion, so it may preempt.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from typing import ClassVar

from ..capacity import Capacity
from ..policy import Capabilities, register
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import SpeedMemo, grant_in_order, resize_note


@register
class ThemisPolicy:
    name: ClassVar[str] = "themis"
    summary: ClassVar[str] = "Themis: finish-time fairness, the jobs furthest behind a fair share of the cluster first"
    event_driven: ClassVar[bool] = True
    capabilities: ClassVar[Capabilities] = Capabilities()

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        fairness = FinishTimeFairness(snap)
        active = [job for job in snap.jobs if job.remaining_work > 0]
        worst_first = sorted(active, key=lambda job: (-fairness.rho(job, job.min_gpus), job.submit_time, job.id))
        capacity = Capacity(snap)
        allocations, reasons = grant_in_order(snap, worst_first, capacity, backfill=True, ahead="less fairly served")
        spread_spare(fairness, [job for job in worst_first if allocations[job.id] > 0], allocations, capacity)
        explained = {job.id: fairness.explain(job, allocations[job.id], reasons.get(job.id)) for job in active}
        reasons = {job_id: reason for job_id, reason in explained.items() if reason}
        for job in snap.jobs:
            if job.remaining_work <= 0:
                allocations[job.id], reasons[job.id] = 0, "finished: no work left"
        return PolicyResult(allocations=allocations, reasons=reasons)


class FinishTimeFairness:
    """ρ of every job of one snapshot at any GPU count; lives for one ``allocate`` call."""

    def __init__(self, snap: ClusterSnapshot) -> None:
        self.now = snap.now
        self.memo = SpeedMemo(snap)
        self.slice = private_slices(snap)

    def independent_time(self, job: JobInfo) -> float:
        """Seconds the whole job would take alone on its private slice of the cluster."""
        share = self.slice[job.id]
        if share <= 0:
            return math.inf
        gpus = min(max(math.floor(share), job.min_gpus), job.max_gpus)
        speed = self.memo.speed(job, gpus) * min(1.0, share / gpus)  # time-shared below min_gpus
        return job.total_work / speed if speed > 0 else math.inf

    def rho(self, job: JobInfo, gpus: int) -> float:
        """Finish-time fairness at ``gpus`` GPUs from now on; 0 when no private slice could run it."""
        independent = self.independent_time(job)
        if not math.isfinite(independent) or independent <= 0:
            return 0.0
        shared = max(self.now - job.submit_time, 0.0) + self.memo.remaining_time(job, gpus)
        return shared / independent

    def explain(self, job: JobInfo, gpus: int, waiting: str | None) -> str | None:
        """The reason shown for ``job``: why it waits, or how it was resized, with its ρ."""
        offered = max(gpus, job.min_gpus)
        rho = f"ρ={self.rho(job, offered):.2f} at {offered} GPUs"
        if gpus == 0:
            return f"{waiting or 'waiting'} [{rho}]"
        return resize_note(job, gpus, f"GPUs go to the worst finish-time fairness first [{rho}]")


def private_slices(snap: ClusterSnapshot) -> dict[str, float]:
    """GPUs each job would own on its tenant's weighted slice of the cluster, split among the tenant's jobs."""
    weights = {tenant.name: tenant.weight for tenant in snap.tenants}
    jobs_of = Counter(job.tenant for job in snap.jobs if job.remaining_work > 0)
    total_weight = sum(weights.get(tenant, 1.0) for tenant in jobs_of)
    cluster = Capacity(snap)
    return {
        job.id: cluster.free_for(job) * weights.get(job.tenant, 1.0) / total_weight / jobs_of[job.tenant]
        if jobs_of[job.tenant] else 0.0
        for job in snap.jobs
    }


def spread_spare(fairness: FinishTimeFairness, running: list[JobInfo], allocations: dict[str, int],
                 capacity: Capacity) -> None:
    """Water-fill spare GPUs: the job with the worst ρ at its current count gets its next useful step."""
    heap = [(-fairness.rho(job, allocations[job.id]), job.submit_time, job.id, job)
            for job in running if job.elastic]
    heapq.heapify(heap)
    while heap and capacity.total_free > 0:
        _, _, _, job = heapq.heappop(heap)
        step = next_useful(fairness.memo, job, allocations[job.id], capacity.free_for(job))
        if step is None:
            continue
        capacity.take(job, step - allocations[job.id])
        allocations[job.id] = step
        if step < job.max_gpus:
            heapq.heappush(heap, (-fairness.rho(job, step), job.submit_time, job.id, job))


def next_useful(memo: SpeedMemo, job: JobInfo, gpus: int, free: int) -> int | None:
    """The smallest count above ``gpus``, within ``free`` more GPUs, at which ``job`` runs faster."""
    table = memo.table(job)
    for count in range(gpus + 1, min(job.max_gpus, gpus + free) + 1):
        if table[count] > table[gpus] * (1 + 1e-9):
            return count
    return None
