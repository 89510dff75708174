"""Helpers shared by the order-based policies (FIFO, SRTF, Tiresias, Themis, heSRPT).

No paper of its own. ``grant_in_order`` walks jobs in the order a policy wants them
served and hands each its ``min_gpus`` from a ``Capacity`` ledger, with or without
backfilling, writing an operator-readable reason for every job left waiting.
``SpeedMemo`` shares speed tables between the jobs of one ``allocate`` call that have the
same workload model, GPU type, noise scale and bounds: one model evaluation (~0.1 ms)
per distinct kind of job rather than per job.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter

from numpy.typing import NDArray

from ..capacity import Capacity
from ..speed import held_type, speed_tables, type_preference
from ..types import ClusterSnapshot, JobInfo

Grants = tuple[dict[str, int], dict[str, str]]


# Arrival order with an explicit tie-break: earlier submit first, then job id. A C-level
# getter (the same tuple a function would build): it is the sort key of every FIFO round.
arrival_key: Callable[[JobInfo], tuple[float, str]] = attrgetter("submit_time", "id")


def gpus_text(job: JobInfo, count: int | float) -> str:
    kind = f" {job.gpu_type}" if job.gpu_type else ""
    return f"{count:g}{kind} GPU{'' if count == 1 else 's'}"


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def unschedulable(cluster: Capacity, job: JobInfo) -> str | None:
    """Why ``job`` cannot run even on the empty ``cluster`` (a fresh ledger), or None when it could."""
    usable = cluster.free_for(job)
    if job.min_gpus <= usable:
        return None
    return f"unschedulable: needs {gpus_text(job, job.min_gpus)}, the cluster has {usable} usable"


def resize_note(job: JobInfo, gpus: int, why: str) -> str | None:
    """A reason for a running job whose count changes, or None when it keeps its GPUs."""
    if not job.running or gpus == job.gpus:
        return None
    if gpus == 0:
        return f"preempted: {why}"
    return f"resized {job.gpus}→{gpus} GPUs: {why}"


def grant_in_order(
    snap: ClusterSnapshot, order: Iterable[JobInfo], capacity: Capacity, *, backfill: bool, ahead: str
) -> Grants:
    """Give each job in ``order`` its ``min_gpus`` while they fit; the rest wait.

    Without backfilling the first job that does not fit blocks every job behind it. A job
    that could not run even on an empty cluster never blocks anyone. ``ahead`` names the
    jobs in front ("earlier", "shorter") in the reasons. The GPUs handed out are taken
    from ``capacity``.
    """
    order = tuple(order)
    if _all_fit(order, capacity):  # the walk would grant every job in turn: skip it
        return _grant_all(order, capacity)
    tally = _Tally(snap, capacity)
    allocations: dict[str, int] = {}
    reasons: dict[str, str] = {}
    ahead_of_it, blocked = 0, False  # schedulable jobs before this one, started or waiting
    for job in order:
        need = job.min_gpus
        usable, free = tally.limits(job)
        if need > usable:  # could not run even on an empty cluster: blocks nobody
            allocations[job.id] = 0
            reasons[job.id] = f"unschedulable: needs {gpus_text(job, need)}, the cluster has {usable} usable"
            continue
        if not blocked and need <= free:
            tally.take(job, need)
            allocations[job.id] = need
            if job.placement and len(job.placement) != need:  # the common case, unchanged, costs no call
                note = resize_note(job, need, "this policy runs every job at its min_gpus")
                if note:
                    reasons[job.id] = note
        else:
            allocations[job.id] = 0
            reasons[job.id] = _waiting_text(job, free, ahead_of_it, ahead, blocked)
            blocked = blocked or not backfill
        ahead_of_it += 1
    tally.book()
    return allocations, reasons


def _all_fit(jobs: Sequence[JobInfo], capacity: Capacity) -> bool:
    """Whether every job's ``min_gpus`` fits ``capacity`` at once: in total, and per GPU type for typed jobs.

    Then no job can block or be unschedulable, and walking them would hand each its
    request: the usual round on a cluster with room to spare, where summing costs less.
    """
    if sum(job.min_gpus for job in jobs) > capacity.total_free:
        return False
    if len(capacity.types) > 1 and any(job.gpu_type is None for job in jobs):
        return False  # each untyped job must fit on one type: the walk books them
    typed: dict[str, int] = {}
    for job in jobs:
        if job.gpu_type is not None:
            typed[job.gpu_type] = typed.get(job.gpu_type, 0) + job.min_gpus
            if typed[job.gpu_type] > capacity.free_for(job):
                return False
    return True


def _grant_all(jobs: Sequence[JobInfo], capacity: Capacity) -> Grants:
    """Each job its ``min_gpus``, taken from ``capacity``; a note for each running job that this resizes."""
    allocations: dict[str, int] = {}
    reasons: dict[str, str] = {}
    # Untyped jobs count only towards the total: their GPUs are booked at once, on any one of them.
    untyped_gpus, an_untyped_job = 0, None
    for job in jobs:
        need = allocations[job.id] = job.min_gpus
        if job.gpu_type is None:
            untyped_gpus += need
            an_untyped_job = job
        else:
            capacity.take(job, need)
        if job.placement and len(job.placement) != need:
            note = resize_note(job, need, "this policy runs every job at its min_gpus")
            if note:
                reasons[job.id] = note
    if an_untyped_job is not None:
        capacity.take(an_untyped_job, untyped_gpus)
    return allocations, reasons


class _Tally:
    """What one ``grant_in_order`` call hands out, as exact running totals booked on ``capacity`` at the end.

    A hot path (every job, every simulated round), so it asks ``capacity`` once per GPU type
    instead of once per job. A typed job draws from its type and from the total, an untyped
    one from the total only: what a job can still get is min(its type's free GPUs at the
    start less what this call gave that type, the total free at the start less all it gave).
    On a cluster of several GPU types a job never spans types, so an untyped job can get only
    what one type has free: each is booked on one, the type it holds if that has room, else the
    fastest for it with room (``speed.type_preference``), as placement will put it.
    """

    def __init__(self, snap: ClusterSnapshot, capacity: Capacity) -> None:
        self.snap, self.capacity, self.empty_cluster = snap, capacity, Capacity(snap)
        self.total_at_start = self.total_free = capacity.total_free
        self.typed_at_start: dict[str, int] = {}  # GPU type → its free GPUs when first met
        self.typed_free: dict[str, int] = {}  # GPU type → its free GPUs, counting down
        self.usable: dict[str | None, int] = {}  # GPU type (None: any) → usable on the empty cluster
        self.sample: dict[str | None, JobInfo] = {}  # GPU type → a job of it, to book GPUs with
        self.mixed = len(capacity.types) > 1
        self.free_on = {t: capacity.free_on(t) for t in capacity.types} if self.mixed else {}
        self.untyped_on: dict[str, int] = {}  # GPU type → GPUs booked there for untyped jobs (mixed clusters)

    def limits(self, job: JobInfo) -> tuple[int, int]:
        """(GPUs usable on the empty cluster, GPUs still free) for ``job``'s type."""
        gpu_type = job.gpu_type
        if gpu_type not in self.usable:
            mixed_untyped = self.mixed and gpu_type is None
            self.usable[gpu_type] = self.empty_cluster.one_type_most if mixed_untyped else (
                self.empty_cluster.free_for(job))
            self.sample[gpu_type] = job
            if gpu_type is not None:
                self.typed_at_start[gpu_type] = self.typed_free[gpu_type] = self.capacity.free_for(job)
        if gpu_type is None:
            free = min(max(self.free_on.values()), self.total_free) if self.mixed else self.total_free
        else:
            free = min(self.typed_free[gpu_type], self.total_free)
            if self.mixed:
                free = min(free, self.free_on[gpu_type])
        return self.usable[gpu_type], free

    def take(self, job: JobInfo, gpus: int) -> None:
        self.total_free -= gpus
        if job.gpu_type is not None:
            self.typed_free[job.gpu_type] -= gpus
        if self.mixed:
            where = job.gpu_type or self._type_for(job, gpus)
            self.free_on[where] -= gpus
            if job.gpu_type is None:
                self.untyped_on[where] = self.untyped_on.get(where, 0) + gpus

    def _type_for(self, job: JobInfo, gpus: int) -> str:
        held = held_type(job, self.snap) if job.placement else None
        if held is not None and self.free_on.get(held, 0) >= gpus:
            return held
        return next(t for t in type_preference(job, self.snap) if self.free_on.get(t, 0) >= gpus)

    def book(self) -> None:
        """Take everything handed out from ``capacity``, as job-by-job ``take`` calls would have."""
        untyped = self.total_at_start - self.total_free
        for gpu_type, left in self.typed_free.items():
            given = self.typed_at_start[gpu_type] - left
            if given:
                self.capacity.take(self.sample[gpu_type], given)
                untyped -= given
        for gpu_type, given in self.untyped_on.items():
            self.capacity.take(self.sample[None], given, on_type=gpu_type)
            untyped -= given
        if untyped:
            self.capacity.take(self.sample[None], untyped)


def _waiting_text(job: JobInfo, free: int, before: int, ahead: str, blocked: bool) -> str:
    verb = "preempted" if job.running else "waiting"
    queue = f"{plural(before, ahead + ' job')} ahead" if before else "first in line"
    if blocked and job.min_gpus <= free:
        return f"{verb}: {gpus_text(job, job.min_gpus)} would fit ({free} free) but {queue} (no backfilling)"
    return f"{verb}: {gpus_text(job, job.min_gpus)} needed, {free} free; {queue}"


class SpeedMemo:
    """Speed tables (0..max_gpus) of every job of one ``allocate`` call, priced in one batched pass.

    Created inside ``allocate`` and dropped with it: no memory survives the call.
    """

    def __init__(self, snap: ClusterSnapshot, adaptive_batch: bool = False) -> None:
        self._snap = snap
        self._adaptive = adaptive_batch  # True for policies that choose batch sizes (Pollux)
        self._tables: dict[str, NDArray] | None = None

    def table(self, job: JobInfo) -> NDArray:
        if self._tables is None:
            self._tables = speed_tables(self._snap.jobs, self._snap, self._adaptive)
        return self._tables[job.id]

    def speed(self, job: JobInfo, gpus: int) -> float:
        return float(self.table(job)[gpus]) if 0 <= gpus <= job.max_gpus else 0.0

    def remaining_time(self, job: JobInfo, gpus: int) -> float:
        """Seconds to finish at ``gpus`` GPUs (oracle knowledge of the remaining work); inf if it cannot run."""
        if job.remaining_work <= 0:
            return 0.0
        speed = self.speed(job, gpus)
        return job.remaining_work / speed if speed > 0 else math.inf
