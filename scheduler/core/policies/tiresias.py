"""Tiresias: discretised two-dimensional least-attained-service (2D-LAS).

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI'19, §4.
A job's priority is its attained service in GPU-time (GPUs × seconds run: both
dimensions, hence 2D), discretised into K queues; no prior knowledge of job length.

Inputs: each job's ``attained_gpu_seconds``, ``submit_time``, ``min_gpus``, ``gpu_type``;
the previous round's ``state``; ``snap.now``.
Outputs: ``min_gpus`` or 0 per job; reasons; ``state``; ``wake_at``.

Rules:
- Queue k holds jobs whose attained service since their last promotion lies in
  [threshold[k-1], threshold[k]). Default thresholds (3250, 7200) GPU-seconds, three
  queues: the values of the authors' simulator (SymbioticLab/Tiresias, simulator/jobs.py,
  ``queue_limit``). New jobs start in queue 0.
- Queue 0 first, then queue 1, …; within a queue FIFO by (submit_time, id). Preemptive
  between queues; a job that does not fit is skipped and later jobs still start (the
  simulator's greedy walk). Every job runs at ``min_gpus`` (Tiresias schedules rigid jobs).
- Starvation guard (the paper's promotion knob, done as the simulator does it): a job
  below queue 0 that has waited, since it last ran, at least ``starvation_factor`` × the
  time it ran since its last promotion goes back to queue 0, its attained service counted
  from zero again. Run time is estimated as service / ``min_gpus``, exact for jobs this
  policy ran. ``starvation_factor`` defaults to 8 (our choice: the simulator sweeps
  0.5–1000 and runs without the guard by default).
- ``state`` remembers, per job, the attained service at its last promotion (``base``) and
  since when this policy has kept it waiting (``waiting_since``); lost state forgets
  promotions and restarts the waiting clocks. ``wake_at``: the earliest time a job it
  runs crosses its queue's threshold (service grows by its GPU count per second) or a
  waiting job is due for promotion.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..capacity import Capacity
from ..policy import register
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import grant_in_order

DEFAULT_THRESHOLDS = (3250.0, 7200.0)  # GPU-seconds
EPSILON = 1e-6  # GPU-seconds/seconds: absorbs float drift when the simulator wakes us exactly on time


@dataclass(frozen=True)
class Memory:
    """What the policy remembers of one job between rounds."""

    base: float = 0.0  # attained GPU-seconds at its last promotion
    waiting_since: float | None = None  # since when this policy has kept it waiting


@register
class TiresiasPolicy:
    name: ClassVar[str] = "tiresias"
    event_driven: ClassVar[bool] = True

    def __init__(self, thresholds: Sequence[float] = DEFAULT_THRESHOLDS, starvation_factor: float = 8.0) -> None:
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError("queue thresholds must be positive and increasing")
        if starvation_factor <= 0:
            raise ValueError("starvation_factor must be > 0")
        self.thresholds = tuple(float(t) for t in thresholds)
        self.starvation_factor = float(starvation_factor)

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        memory = {job.id: recall(state, job) for job in snap.jobs}
        promoted = {job.id for job in snap.jobs if self._starved(job, memory[job.id], snap.now)}
        memory = {job.id: promote(job, memory[job.id], job.id in promoted) for job in snap.jobs}
        service = {job.id: job.attained_gpu_seconds - memory[job.id].base for job in snap.jobs}
        queue = {job_id: self.queue_of(s) for job_id, s in service.items()}
        order = sorted(snap.jobs, key=lambda job: (queue[job.id], job.submit_time, job.id))
        allocations, reasons = grant_in_order(snap, order, Capacity(snap), backfill=True, ahead="higher-priority")
        for job_id in sorted(set(reasons) | promoted):
            why = reasons.get(job_id, "runs")
            starved = "; promoted by the starvation guard" if job_id in promoted else ""
            reasons[job_id] = f"{why} [queue {queue[job_id]}, {service[job_id]:.0f} GPU-s attained{starved}]"
        memory = {job.id: remember(memory[job.id], allocations[job.id] > 0, queue[job.id] > 0, snap.now)
                  for job in snap.jobs}
        return PolicyResult(
            allocations=allocations,
            reasons=reasons,
            state={"jobs": {job_id: vars(m) for job_id, m in sorted(memory.items()) if m != Memory()}},
            wake_at=self._wake_at(snap, memory, service, allocations),
        )

    def queue_of(self, service: float) -> int:
        return bisect.bisect_right(self.thresholds, service + EPSILON)

    def _starved(self, job: JobInfo, memory: Memory, now: float) -> bool:
        due = self._promotion_due(job, memory.base, memory.waiting_since)
        return due is not None and now + EPSILON >= due

    def _promotion_due(self, job: JobInfo, base: float, waiting_since: float | None) -> float | None:
        service = job.attained_gpu_seconds - base
        if waiting_since is None or self.queue_of(service) == 0:
            return None
        return waiting_since + self.starvation_factor * service / job.min_gpus

    def _wake_at(
        self, snap: ClusterSnapshot, memory: Mapping[str, Memory], service: Mapping[str, float],
        allocations: Mapping[str, int],
    ) -> float | None:
        times = [self._next_change(job, memory[job.id], service[job.id], allocations[job.id], snap.now)
                 for job in snap.jobs]
        future = [t for t in times if t is not None and t > snap.now]
        return min(future) if future else None

    def _next_change(self, job: JobInfo, memory: Memory, service: float, gpus: int, now: float) -> float | None:
        """When this job would change queue with nothing else happening: demoted running, promoted waiting."""
        if gpus == 0:
            return self._promotion_due(job, memory.base, memory.waiting_since)
        queue = self.queue_of(service)
        if queue >= len(self.thresholds):
            return None
        return now + (self.thresholds[queue] - service) / gpus


def promote(job: JobInfo, memory: Memory, starved: bool) -> Memory:
    """Count service afresh from now for a starved job; otherwise keep the base (never above attained)."""
    base = job.attained_gpu_seconds if starved else min(memory.base, job.attained_gpu_seconds)
    return Memory(base=base, waiting_since=memory.waiting_since)


def remember(memory: Memory, runs: bool, demoted: bool, now: float) -> Memory:
    """Start the clock for a demoted job that begins waiting; forget the wait of one that runs.

    Jobs in queue 0 cannot starve into promotion (they already are on top), so their
    waits are not recorded.
    """
    if runs or not demoted:
        return Memory(base=memory.base)
    return Memory(base=memory.base, waiting_since=now if memory.waiting_since is None else memory.waiting_since)


def recall(state: PolicyState | None, job: JobInfo) -> Memory:
    """This job's memory from the previous round's state (JSON round-tripped), tolerant of gaps.

    A job that holds GPUs is not waiting, whatever was decided last round (the round may
    have kept it running, or the executor not yet stopped it).
    """
    jobs: Any = (state or {}).get("jobs", {})
    entry = jobs.get(job.id) if isinstance(jobs, Mapping) else None
    if not isinstance(entry, Mapping):
        return Memory()
    base, since = entry.get("base", 0.0), entry.get("waiting_since")
    finite = isinstance(base, int | float) and math.isfinite(base)
    waiting = float(since) if isinstance(since, int | float) and not job.running else None
    return Memory(base=float(base) if finite else 0.0, waiting_since=waiting)
