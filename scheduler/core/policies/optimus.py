"""Optimus: greedy marginal-gain allocation on fitted speed models.

Peng et al., "Optimus: An Efficient Dynamic Resource Scheduler for Deep Learning
Clusters", EuroSys'18, §4 (resource allocation). Optimus fits each job's speed as a
function of its resources, estimates its remaining time, and hands resources out one unit
at a time to the job whose remaining time falls the most.

Inputs: each job's ``remaining_work`` (``total_work - progress``, assumed known: Optimus
estimates it from the convergence curve; here it is given), its fitted speed at every GPU
count (speed.py: the goodput model of its profile on fewest nodes, or linear for jobs
without one), ``min_gpus``..``max_gpus``, ``gpu_type``, ``submit_time``.
Outputs: a GPU count per job (0 or within its bounds) and a reason for each job waiting
or resized.

Rules:
- Admission: jobs in arrival order ``(submit_time, id)`` each get ``min_gpus`` while they
  fit; a job that does not fit waits and later, smaller jobs still start (backfilling).
  Optimus starts every job with one worker; here the smallest unit of a job is its
  ``min_gpus``. Jobs with no work left get nothing (they are finishing).
- Growth: remaining time T_j(k) = remaining_work_j / speed_j(k). The next step goes to the
  job with the largest reduction of remaining time per GPU,
  (T_j(k) − T_j(k')) / (k' − k), over k < k' ≤ min(k + node size, max_gpus, free GPUs).
  Optimus adds one unit at a time; a step here may fill up to one node (the largest node
  of the job's GPU type) because speed dips when a job first spills onto another node, and
  a one-GPU look-ahead would mistake that dip for the end of the job's scaling.
- Stop when no step reduces any job's remaining time, or no GPU is left. A max-heap with
  lazy re-evaluation picks the steps (a job's best step only shrinks as GPUs run out).
- Ties go to the earlier arrival. Deterministic, no state.
"""

from __future__ import annotations

import heapq
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from ..capacity import Capacity
from ..policy import Capabilities, register
from ..speed import gpus_per_node
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import SpeedMemo, arrival_key, grant_in_order, resize_note

# Remaining time of a job that cannot progress at some count: larger than any real one.
_NEVER = 1e30


@register
class OptimusPolicy:
    name: ClassVar[str] = "optimus"
    summary: ClassVar[str] = "Optimus: each GPU to the job whose remaining time falls most; knows job lengths; elastic"
    event_driven: ClassVar[bool] = False
    capabilities: ClassVar[Capabilities] = Capabilities()

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        capacity = Capacity(snap)
        order = sorted((job for job in snap.jobs if job.remaining_work > 0), key=arrival_key)
        allocations, reasons = grant_in_order(snap, order, capacity, backfill=True, ahead="earlier")
        _grow(snap, order, allocations, capacity)
        reasons = {job_id: why for job_id, why in reasons.items() if allocations[job_id] == 0}
        for job in order:
            note = resize_note(job, allocations[job.id], "largest remaining-time reduction per GPU")
            if note and allocations[job.id] > 0:
                reasons[job.id] = note
        for job in snap.jobs:
            if job.remaining_work <= 0:
                allocations[job.id] = 0
                reasons[job.id] = "finished: no work left"
        return PolicyResult(allocations=allocations, reasons=reasons)


def remaining_times(job: JobInfo, speeds: NDArray) -> NDArray:
    """Seconds to finish at 0..max_gpus GPUs; ``_NEVER`` where the job cannot progress."""
    with np.errstate(divide="ignore"):
        return np.where(speeds > 0, job.remaining_work / np.where(speeds > 0, speeds, 1.0), _NEVER)


def best_step(times: NDArray, gpus: int, top: int) -> tuple[float, int]:
    """(remaining-time reduction per GPU, GPUs to add) of the best step from ``gpus`` up to ``top``."""
    if top <= gpus:
        return 0.0, 0
    per_gpu = (times[gpus] - times[gpus + 1 : top + 1]) / np.arange(1, top - gpus + 1)
    best = int(np.argmax(per_gpu))
    return float(per_gpu[best]), best + 1


def _grow(snap: ClusterSnapshot, order: list[JobInfo], allocations: dict[str, int], capacity: Capacity) -> None:
    """Hand out the GPUs left after admission, step by step, to the largest remaining-time gain."""
    memo = SpeedMemo(snap)
    times = {job.id: remaining_times(job, memo.table(job)) for job in order if allocations[job.id] > 0}
    node = {job.id: gpus_per_node(snap, job.gpu_type) for job in order}

    def step(job: JobInfo) -> tuple[float, int]:
        gpus = allocations[job.id]
        top = min(job.max_gpus, gpus + node[job.id], gpus + capacity.free_for(job))
        return best_step(times[job.id], gpus, top)

    heap: list[tuple[float, int, int]] = []
    for rank, job in enumerate(order):
        gain, add = step(job) if job.id in times else (0.0, 0)
        if gain > 0:
            heap.append((-gain, rank, add))
    heapq.heapify(heap)
    while heap:  # (−gain, arrival rank, GPUs to add): the largest gain first, ties to the earlier job
        neg_gain, rank, add = heapq.heappop(heap)
        job = order[rank]
        gain, now_add = step(job)
        if (gain, now_add) == (-neg_gain, add):
            capacity.take(job, add)
            allocations[job.id] += add
            gain, now_add = step(job)
        if gain > 0:
            heapq.heappush(heap, (-gain, rank, now_add))
