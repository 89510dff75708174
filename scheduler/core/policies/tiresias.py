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
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..capacity import Capacity
from ..policy import Capabilities, register
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import grant_in_order

DEFAULT_THRESHOLDS = (3250.0, 7200.0)  # GPU-seconds
EPSILON = 1e-6  # GPU-seconds/seconds: absorbs float drift when the simulator wakes us exactly on time


@dataclass
class _Levels:
    """Per job, in snapshot order: where it stands in the queues this round."""

    bases: list[float] = field(default_factory=list)  # attained GPU-seconds at its last promotion
    waits: list[float | None] = field(default_factory=list)  # since when this policy kept it waiting
    services: list[float] = field(default_factory=list)  # attained since its last promotion
    queues: list[int] = field(default_factory=list)
    promoted: set[str] = field(default_factory=set)  # by the starvation guard, this round


@register
class TiresiasPolicy:
    name: ClassVar[str] = "tiresias"
    summary: ClassVar[str] = "Tiresias: least attained GPU-time first, in discrete queues; needs no job lengths; rigid"
    capabilities: ClassVar[Capabilities] = Capabilities(
        count_rule="which tiresias gives every job (it does not scale jobs)",
    )
    event_driven: ClassVar[bool] = True

    def __init__(self, thresholds: Sequence[float] = DEFAULT_THRESHOLDS, starvation_factor: float = 8.0) -> None:
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError("queue thresholds must be positive and increasing")
        if starvation_factor <= 0:
            raise ValueError("starvation_factor must be > 0")
        self.thresholds = tuple(float(t) for t in thresholds)
        self.starvation_factor = float(starvation_factor)

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        # The per-job loops below use locals rather than a call per job: the simulator runs
        # this every round with hundreds of jobs, and that halved the policy's share of a round.
        levels = self._levels(snap, state)
        keys = [(queue, job.submit_time, job.id) for queue, job in zip(levels.queues, snap.jobs, strict=True)]
        order = [snap.jobs[i] for i in sorted(range(len(snap.jobs)), key=keys.__getitem__)]
        allocations, reasons = grant_in_order(snap, order, Capacity(snap), backfill=True, ahead="higher-priority")
        _annotate(reasons, snap.jobs, levels)
        memory, wake_at = self._remember(snap, levels, allocations)
        return PolicyResult(allocations=allocations, reasons=reasons, state={"jobs": memory}, wake_at=wake_at)

    def _levels(self, snap: ClusterSnapshot, state: PolicyState | None) -> _Levels:
        """Each job's queue, after recalling its memory and applying the starvation guard."""
        thresholds, factor, now, levels = self.thresholds, self.starvation_factor, snap.now, _Levels()
        remembered: Any = (state or {}).get("jobs", {})
        entry_of: Any = remembered.get if isinstance(remembered, Mapping) else {}.get
        for job in snap.jobs:
            attained, entry = job.attained_gpu_seconds, entry_of(job.id)
            if entry is None:  # nothing remembered, as for most jobs: base 0, not kept waiting
                base, waiting = 0.0, None
            else:
                base, waiting = _recall(entry, job)
                if waiting is not None and bisect.bisect_right(thresholds, attained - base + EPSILON):
                    if now + EPSILON >= waiting + factor * (attained - base) / job.min_gpus:
                        levels.promoted.add(job.id)
                        base = attained  # promoted: its service counts afresh
                base = min(base, attained)  # never above what it attained (lost or foreign state)
            service = attained - base
            levels.bases.append(base)
            levels.waits.append(waiting)
            levels.services.append(service)
            levels.queues.append(bisect.bisect_right(thresholds, service + EPSILON))
        return levels

    def _remember(
        self, snap: ClusterSnapshot, levels: _Levels, allocations: Mapping[str, int]
    ) -> tuple[dict[str, dict[str, Any]], float | None]:
        """Memory for the next round, and the earliest time a job changes queue (``wake_at``)."""
        thresholds, factor, now = self.thresholds, self.starvation_factor, snap.now
        memory: dict[str, dict[str, Any]] = {}
        wake_at: float | None = None
        rows = zip(snap.jobs, levels.bases, levels.waits, levels.services, levels.queues, strict=True)
        for job, base, waiting, service, queue in rows:
            gpus = allocations[job.id]
            # A demoted job left waiting keeps (or starts) its clock; the others forget it.
            waiting = (now if waiting is None else waiting) if gpus == 0 and queue > 0 else None
            if waiting is not None or base != 0.0:
                memory[job.id] = {"base": base, "waiting_since": waiting}
            if gpus:  # it runs: demoted when its service crosses its queue's threshold
                change = now + (thresholds[queue] - service) / gpus if queue < len(thresholds) else None
            else:  # it waits: promoted when it has waited long enough (queue 0 never is)
                change = None if waiting is None else waiting + factor * service / job.min_gpus
            if change is not None and change > now and (wake_at is None or change < wake_at):
                wake_at = change
        return dict(sorted(memory.items())), wake_at


def _recall(entry: object, job: JobInfo) -> tuple[float, float | None]:
    """(base, waiting_since) from last round's state; lost or malformed state counts as none."""
    if not isinstance(entry, Mapping):
        return 0.0, None
    base, since = entry.get("base", 0.0), entry.get("waiting_since")
    base = float(base) if isinstance(base, (int, float)) and math.isfinite(base) else 0.0
    waiting = float(since) if isinstance(since, (int, float)) and not job.placement else None
    return base, waiting


def _annotate(reasons: dict[str, str], jobs: Sequence[JobInfo], levels: _Levels) -> None:
    """Add each explained job's queue and attained service to its reason."""
    if not reasons and not levels.promoted:
        return
    position = {job.id: i for i, job in enumerate(jobs)}
    for job_id in sorted(set(reasons) | levels.promoted):
        i = position[job_id]
        starved = "; promoted by the starvation guard" if job_id in levels.promoted else ""
        why = reasons.get(job_id, "runs")
        reasons[job_id] = f"{why} [queue {levels.queues[i]}, {levels.services[i]:.0f} GPU-s attained{starved}]"
