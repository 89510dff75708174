"""AFS-L: Apathetic Future Share with known job lengths.

Hwang et al., "Elastic Resource Sharing for Distributed Deep Learning", NSDI'21, §3–4.
AFS hands GPUs out one at a time, each to the job whose *completion rate* rises the most,
judging each job only by what it would get now ("apathetic" to the share it might get
later, which greedy schedulers overestimate). It balances short-job priority (a short job's
rate rises a lot per GPU) against resource efficiency (a job that scales badly gains little).

Inputs: each job's ``remaining_work`` (AFS-L is the variant that knows job lengths), its
fitted speed at every GPU count (speed.py), ``min_gpus``..``max_gpus``, ``gpu_type``.
Outputs: a GPU count per job (0 or within its bounds) and a reason for each job waiting
or resized.

Rule (the AFS-L comparison, written for many jobs): a job j on k GPUs finishes at rate
1 / T_j(k) = speed_j(k) / remaining_work_j. The next step goes to the job with the largest

    (speed_j(k') − speed_j(k)) / ((k' − k) · remaining_work_j)

— the rise of its completion rate per GPU. For two jobs A and B this says: give the GPU
to A iff ΔW_A / l_A > ΔW_B / l_B (throughput gain over remaining length), so a short job
wins unless the long one scales much better. Steps and assumptions:
- A job's first step is 0 → ``min_gpus`` (its rate rises from 0): waiting and running jobs
  compete under the one rule, so admission favours short, efficient jobs (as AFS does) and
  a job that cannot progress at ``min_gpus`` never starts.
- Later steps add k' − k ≤ one node of GPUs (the largest node of the job's GPU type), so
  the dip in speed when a job spills onto another node is looked past.
- Stop when no step raises any job's rate or no GPU is left. Ties go to the earlier
  arrival ``(submit_time, id)``. Jobs with no work left get nothing. Deterministic, no state.
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
from ._ordering import SpeedMemo, arrival_key, gpus_text, resize_note, unschedulable


@register
class AfsPolicy:
    name: ClassVar[str] = "afs"
    summary: ClassVar[str] = "AFS-L: each GPU to the job whose completion rate rises most; knows job lengths; elastic"
    event_driven: ClassVar[bool] = False
    capabilities: ClassVar[Capabilities] = Capabilities()

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        order = sorted((job for job in snap.jobs if job.remaining_work > 0), key=arrival_key)
        capacity = Capacity(snap)
        allocations = _share(snap, order, capacity)
        reasons = _reasons(snap, order, allocations, capacity)
        for job in snap.jobs:
            if job.remaining_work <= 0:
                allocations[job.id] = 0
                reasons[job.id] = "finished: no work left"
        return PolicyResult(allocations=allocations, reasons=reasons)


def best_step(rates: NDArray, gpus: int, low: int, top: int) -> tuple[float, int]:
    """(completion-rate rise per GPU, GPUs to add) of the best step from ``gpus`` up to ``top``.

    ``rates`` are 1/T at 0..max_gpus GPUs. From 0 the only step is to ``low`` (``min_gpus``).
    """
    if gpus == 0:
        return (float(rates[low]) / low, low) if low <= top else (0.0, 0)
    if top <= gpus:
        return 0.0, 0
    per_gpu = (rates[gpus + 1 : top + 1] - rates[gpus]) / np.arange(1, top - gpus + 1)
    best = int(np.argmax(per_gpu))
    return float(per_gpu[best]), best + 1


def _share(snap: ClusterSnapshot, order: list[JobInfo], capacity: Capacity) -> dict[str, int]:
    """Give out GPUs step by step to the largest completion-rate rise per GPU (lazy max-heap)."""
    memo = SpeedMemo(snap)
    rates = [memo.table(job) / job.remaining_work for job in order]
    node = [gpus_per_node(snap, job.gpu_type) for job in order]
    gpus = [0] * len(order)

    def step(rank: int) -> tuple[float, int]:
        job = order[rank]
        top = min(job.max_gpus, gpus[rank] + node[rank], gpus[rank] + capacity.free_for(job))
        return best_step(rates[rank], gpus[rank], job.min_gpus, top)

    heap = [(-gain, rank, add) for rank, (gain, add) in enumerate(map(step, range(len(order)))) if gain > 0]
    heapq.heapify(heap)
    while heap:  # (−gain, arrival rank, GPUs to add): the largest gain first, ties to the earlier job
        neg_gain, rank, add = heapq.heappop(heap)
        gain, now_add = step(rank)
        if (gain, now_add) == (-neg_gain, add):
            capacity.take(order[rank], add)
            gpus[rank] += add
            gain, now_add = step(rank)
        if gain > 0:
            heapq.heappush(heap, (-gain, rank, now_add))
    return {job.id: count for job, count in zip(order, gpus, strict=True)}


def _reasons(
    snap: ClusterSnapshot, order: list[JobInfo], allocations: dict[str, int], left: Capacity
) -> dict[str, str]:
    empty = Capacity(snap)
    reasons: dict[str, str] = {}
    for job in order:
        gpus = allocations[job.id]
        if gpus == 0:
            verb = "preempted" if job.running else "waiting"
            reasons[job.id] = unschedulable(empty, job) or (
                f"{verb}: {gpus_text(job, job.min_gpus)} needed, {left.free_for(job)} free; "
                "shorter or better-scaling jobs gain more per GPU"
            )
        elif note := resize_note(job, gpus, "largest completion-rate rise per GPU"):
            reasons[job.id] = note
    return reasons
