"""Slurm's own scheduling: jobs in priority order, backfilled against their time limits.

How ``sched/backfill`` with ``priority/multifactor`` decides (Slurm's ``backfill.c``; Lifka, "The ANL/IBM SP
scheduling system", JSSPP'95, for EASY backfilling; Mu'alem and Feitelson, IEEE TPDS 2001, for the conservative
variant Slurm runs), so that the console can forecast a cluster whose scheduler is Slurm: the live forecast of an
observed Slurm cluster runs this policy, with each job's run time predicted from its owner's history instead of
its time limit (``scheduler.sim.runtimes``) — what makes it closer than Slurm's own ``squeue --start``.

Inputs: each job's ``priority`` (Slurm's, mirrored), ``submit_time`` and ``id`` (ties), ``min_gpus``,
``gpu_type``, whether and where it holds GPUs and what it has served; its ``time_limit`` (None: none). Nothing
about how long jobs really run: Slurm plans with the limits.
Outputs: ``min_gpus`` or 0 per job, the GPU type planned for an untyped job, a reason for each job left waiting.

Rules:
- Non-preemptive: running jobs keep their GPUs (an elastic one at its ``min_gpus``) and are planned to hold them
  until start + time limit. One that lost a GPU (its node drained or failed) is requeued, as Slurm requeues a
  job of a failed node, and planned again in its priority place.
- The first ``PLANNED_JOBS`` waiting jobs by ``(-priority, submit_time, id)`` (Slurm's ``bf_max_job_test``) are
  planned in turn: each at the earliest time some node of its type has its GPUs free for its whole time limit,
  given the running jobs and the plans of the jobs before it (a job larger than one node takes whole nodes). A job
  planned for now starts; the others keep their reservation, which no later job may delay (conservative
  backfilling). Jobs beyond the planned ones wait for their turn.
- A job larger than every usable GPU of its type is reported unschedulable and reserves nothing.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from typing import ClassVar

from ..policy import Capabilities, register
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import gpus_text

PLANNED_JOBS = 500  # Slurm's default bf_max_job_test: how deep backfill plans into the queue
NO_LIMIT = math.inf


class _Node:
    """One node's free GPUs over time, a step function: ``free[i]`` GPUs are free from ``times[i]`` until
    ``times[i + 1]`` (the last step: for ever), after the running jobs and the reservations made so far."""

    def __init__(self, name: str, gpu_type: str, usable: int, now: float) -> None:
        self.name, self.gpu_type, self.usable = name, gpu_type, usable
        self.times, self.free = [now], [usable]

    def _split(self, at: float) -> int:
        """The index of the step that starts at ``at``, made if needed (``at`` ≥ the first step)."""
        index = bisect.bisect_left(self.times, at)
        if index < len(self.times) and self.times[index] == at:
            return index
        self.times.insert(index, at)
        self.free.insert(index, self.free[index - 1])
        return index

    def take(self, start: float, end: float, gpus: int) -> None:
        """Hold ``gpus`` over ``[start, end)`` (``end`` may be inf)."""
        first = self._split(start)
        last = self._split(end) if end < NO_LIMIT else len(self.times)
        for index in range(first, last):
            self.free[index] -= gpus

    def earliest(self, gpus: int, duration: float, not_after: float = NO_LIMIT) -> float | None:
        """The earliest time from which ``gpus`` stay free for ``duration``; None when none is ``not_after``."""
        since = None
        for index, free in enumerate(self.free):
            if free < gpus:
                since = None
                continue
            if since is None:
                since = self.times[index]
                if since > not_after:
                    return None
            step_end = self.times[index + 1] if index + 1 < len(self.times) else NO_LIMIT
            if step_end - since >= duration:
                return since
        return None

    def whole_during(self, start: float, end: float) -> bool:
        """Whether every usable GPU is free over ``[start, end)``."""
        first = bisect.bisect_right(self.times, start) - 1
        last = bisect.bisect_left(self.times, end) if end < NO_LIMIT else len(self.times)
        return all(free == self.usable for free in self.free[max(first, 0):max(last, first + 1)])


def _priority_key(job: JobInfo) -> tuple[int, float, str]:
    return -job.priority, job.submit_time, job.id


def _limit(job: JobInfo) -> float:
    return job.time_limit if job.time_limit is not None else NO_LIMIT


@register
class SlurmBackfillPolicy:
    name: ClassVar[str] = "slurm-backfill"
    summary: ClassVar[str] = (
        "Slurm's backfill: priority order; a later job starts only if no reservation by time limits slips"
    )
    capabilities: ClassVar[Capabilities] = Capabilities(
        count_rule="which slurm-backfill gives every job (it does not scale jobs)",
    )
    event_driven: ClassVar[bool] = True

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        running = [job for job in snap.jobs if _keeps_running(job, snap)]
        nodes = _nodes(snap, running)
        allocations = {job.id: job.min_gpus for job in running}  # rigid: an elastic job runs at its request
        reasons: dict[str, str] = {}
        gpu_types: dict[str, str] = {}
        waiting = sorted((job for job in snap.jobs if job.id not in allocations), key=_priority_key)
        for rank, job in enumerate(waiting):
            allocations[job.id] = 0
            if rank >= PLANNED_JOBS:
                reasons[job.id] = f"waits: backfill plans the first {PLANNED_JOBS} jobs by priority; it is {rank + 1}th"
                continue
            candidates = [node for node in nodes if job.gpu_type in (None, node.gpu_type)]
            most = max(_usable_by_type(candidates).values(), default=0)
            if job.min_gpus > most:
                reasons[job.id] = f"unschedulable: needs {gpus_text(job, job.min_gpus)}, the cluster has {most} usable"
                continue
            start, chosen = _earliest(job, candidates, snap.now)
            _reserve(chosen, start, start + _limit(job))
            if start <= snap.now:
                allocations[job.id] = job.min_gpus
                gpu_types[job.id] = next(iter(chosen))[0].gpu_type
            else:
                lost = "preempted (a GPU it held is no longer usable), requeued: " if job.placement else ""
                reasons[job.id] = f"{lost}waits: planned to start in {start - snap.now:.0f} s on " \
                                  f"{', '.join(sorted({node.name for node, _ in chosen}))} (by the time limits)"
        return PolicyResult(allocations=allocations, reasons=reasons, gpu_types=gpu_types)


def _keeps_running(job: JobInfo, snap: ClusterSnapshot) -> bool:
    """Whether a job holds GPUs that are all still usable, of its type, and at least its request."""
    index = snap.index
    return (len(job.placement) >= job.min_gpus and index.usable.issuperset(job.placement)
            and (job.gpu_type is None or all(index.type_of[gpu] == job.gpu_type for gpu in job.placement)))


def _nodes(snap: ClusterSnapshot, running: Iterable[JobInfo]) -> list[_Node]:
    """The usable nodes, each with its running jobs planned until start + time limit."""
    index = snap.index
    nodes = {name: _Node(name, index.node_type[name], len(gpus), snap.now)
             for name, gpus in index.usable_by_node.items() if gpus}
    for job in running:
        held: dict[str, int] = {}
        for gpu in job.placement:
            held[index.node_of[gpu]] = held.get(index.node_of[gpu], 0) + 1
        served = job.attained_gpu_seconds / max(job.gpus, 1) if job.profile else job.progress
        end = snap.now + max(_limit(job) - served, 0.0)
        for name, count in held.items():
            if name in nodes and end > snap.now:
                nodes[name].take(snap.now, end, count)
    return list(nodes.values())


def _usable_by_type(nodes: Iterable[_Node]) -> dict[str, int]:
    usable: dict[str, int] = {}
    for node in nodes:
        usable[node.gpu_type] = usable.get(node.gpu_type, 0) + node.usable
    return usable


def _earliest(job: JobInfo, candidates: Sequence[_Node], now: float) -> tuple[float, list[tuple[_Node, int]]]:
    """The earliest start of ``job`` and the GPUs it takes on each node. One node when a node of its type can hold
    it (of those free earliest, the first by name: Slurm takes nodes in their order), else whole nodes of one
    type."""
    duration = _limit(job)
    if job.min_gpus <= max((node.usable for node in candidates), default=0):
        best: tuple[float, str, _Node] | None = None
        for node in candidates:
            if node.usable < job.min_gpus:
                continue
            start = node.earliest(job.min_gpus, duration, best[0] if best else NO_LIMIT)
            if start is not None and (best is None or (start, node.name) < best[:2]):
                best = (start, node.name, node)
        if best is not None:
            return best[0], [(best[2], job.min_gpus)]
    return _earliest_whole_nodes(job, candidates, now, duration)


def _earliest_whole_nodes(job: JobInfo, candidates: Sequence[_Node], now: float,
                          duration: float) -> tuple[float, list[tuple[_Node, int]]]:
    """A job larger than any one node: the earliest time enough whole nodes of one type are free for it."""
    times = sorted({now, *(at for node in candidates for at in node.times if at >= now)})
    for start in times:
        by_type: dict[str, list[_Node]] = {}
        for node in candidates:
            if node.whole_during(start, start + duration):
                by_type.setdefault(node.gpu_type, []).append(node)
        for free_nodes in by_type.values():
            chosen, left = [], job.min_gpus
            for node in sorted(free_nodes, key=lambda n: (-n.usable, n.name)):
                if left <= 0:
                    break
                chosen.append((node, min(node.usable, left)))
                left -= node.usable
            if left <= 0:
                return start, chosen
    return NO_LIMIT, []  # unreachable for a schedulable job: once every plan has ended, its type is free


def _reserve(chosen: Sequence[tuple[_Node, int]], start: float, end: float) -> None:
    for node, count in chosen:
        node.take(start, end, count)

