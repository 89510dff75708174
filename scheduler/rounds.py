"""The live scheduling round: database rows → ``scheduler.core`` cycle → one transaction → executor.

A round runs under a lease (``Lease``), so only one runs at a time across all workers; a
worker killed mid-round leaves the lease to expire. Everything a round decides is written
in one transaction: allocations closed and opened, job states, a ``RescaleEvent`` with
its reason for every change, the ``SchedulingRound`` with timings and counts, and the
policy's state. A round killed before the commit writes nothing. The executor is told
only after the commit, and every round resends what an executor has not acknowledged
(``Job.generation`` ahead of ``Job.launched_generation``), so a launch lost to a crash is
repaired by the next round.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from .bulk import update_many
from .core.cycle import Action, CycleResult, Decision, run_cycle
from .core.fitted_profiles import FITTED_PROFILES
from .core.goodput import GoodputModel
from .core.gpu_types import gpu_type_key
from .core.policy import get_policy
from .core.types import ClusterSnapshot, GpuSlot, JobInfo, NodeInfo, TenantInfo
from .executors import GpuPlace, Launch, get_executor
from .models import (
    SCHEDULABLE_STATES,
    Allocation,
    Gpu,
    GpuHealth,
    Job,
    JobState,
    Lease,
    Node,
    PolicyState,
    RescaleEvent,
    RescaleKind,
    RoundStatus,
    SchedulerSettings,
    SchedulingRound,
    Tenant,
)
from .refit import job_models

logger = logging.getLogger(__name__)

ROUND_TASK = "scheduler.run_round"
ROUND_LEASE = "scheduling-round"


# --- the lease ------------------------------------------------------------------------


def take_lease(name: str, holder: str, seconds: float, now: datetime | None = None) -> bool:
    """Hold ``name`` for ``seconds`` unless someone else holds it unexpired; one UPDATE decides."""
    now = now or timezone.now()
    try:
        Lease.objects.get_or_create(name=name)
    except IntegrityError:  # created concurrently by another worker: fine, it exists now
        pass
    free = Q(expires_at__isnull=True) | Q(expires_at__lt=now) | Q(holder=holder)
    return bool(
        Lease.objects.filter(free, name=name).update(holder=holder, expires_at=now + timedelta(seconds=seconds))
    )


def release_lease(name: str, holder: str) -> None:
    Lease.objects.filter(name=name, holder=holder).update(holder="", expires_at=None)


# --- the snapshot ---------------------------------------------------------------------


@dataclass(frozen=True)
class LiveSnapshot:
    """The core's snapshot plus what the round needs to write its answer back."""

    snap: ClusterSnapshot
    gpu_pk: Mapping[str, int]  # GPU UUID → row id
    gpu_place: Mapping[str, GpuPlace]
    pending_reasons: Mapping[str, str] = field(default_factory=dict)  # job id → reason stored now


def scheduler_settings() -> SchedulerSettings:
    """The one settings row, created with the defaults (and ``ROUND_SECONDS``) on first use."""
    row, _ = SchedulerSettings.objects.get_or_create(pk=1, defaults={"round_seconds": settings.ROUND_SECONDS})
    return row


def build_snapshot(now: datetime) -> LiveSnapshot:
    """Read nodes, tenants and every job a round considers into a ``ClusterSnapshot``."""
    nodes, gpu_pk, gpu_place = _nodes()
    tenants = tuple(
        TenantInfo(name, quota, weight)
        for name, quota, weight in Tenant.objects.values_list("name", "gpu_quota", "fair_share_weight")
    )
    rows = list(
        Job.objects.filter(state__in=SCHEDULABLE_STATES).values(
            "pk", "tenant__name", "submitted_at", "min_gpus", "max_gpus", "total_work", "progress", "priority",
            "workload_profile", "gpu_type", "attained_gpu_seconds", "restarts", "batch_size", "last_throughput",
            "last_grad_noise_scale", "pending_reason", "fitted_model", "expected_seconds", "predicted_seconds",
        )
    )
    placements = _open_placements()
    profiles: dict[str, Mapping[str, GoodputModel]] = dict(FITTED_PROFILES)
    jobs = []
    for row in rows:
        profile = _profile_key(row, profiles)
        jobs.append(JobInfo(
            id=str(row["pk"]), tenant=row["tenant__name"], submit_time=row["submitted_at"].timestamp(),
            min_gpus=row["min_gpus"], max_gpus=row["max_gpus"], total_work=row["total_work"],
            progress=row["progress"], priority=row["priority"], profile=profile, gpu_type=row["gpu_type"] or None,
            placement=placements.get(row["pk"], ()), attained_gpu_seconds=row["attained_gpu_seconds"],
            restarts=row["restarts"], batch_size=row["batch_size"], throughput=row["last_throughput"],
            grad_noise_scale=row["last_grad_noise_scale"],
            # A length for policies without an oracle (qssf): the owner's estimate, else the forecast's prediction.
            expected_seconds=row["expected_seconds"] or row["predicted_seconds"] if profile is None else None,
        ))
    snap = ClusterSnapshot(now.timestamp(), nodes, tuple(jobs), tenants, profiles)
    reasons = {str(row["pk"]): row["pending_reason"] for row in rows}
    return LiveSnapshot(snap, gpu_pk, gpu_place, reasons)


def _profile_key(row: Mapping, profiles: dict[str, Mapping[str, GoodputModel]]) -> str | None:
    """A job's own refitted model when it has one, else its named profile, else None (a rigid job).

    The refit replaces the model of the GPU type the job ran on only: on the other types the job keeps its
    profile's models (speed is priced on the type it would hold).
    """
    if row["fitted_model"]:
        key = f"job:{row['pk']}"
        profiles[key] = {**profiles.get(row["workload_profile"], {}), **job_models(row["fitted_model"])}
        return key
    return row["workload_profile"] if row["workload_profile"] in profiles else None


_NODES_CACHE: dict[tuple, tuple[NodeInfo, ...]] = {}


def _nodes() -> tuple[tuple[NodeInfo, ...], dict[str, int], dict[str, GpuPlace]]:
    gpus = _whole_gpus(
        Gpu.objects.order_by("node__hostname", "index").values_list(
            "pk", "uuid", "index", "model", "health", "node__hostname", "node__schedulable", "mig_parent_uuid"
        )
    )
    by_node: dict[str, list[tuple]] = {}
    for gpu in gpus:
        by_node.setdefault(gpu[5], []).append(gpu)
    key = tuple(gpus)
    nodes = _NODES_CACHE.get(key)
    if nodes is None:  # the same inventory as last round: reuse the tuple, so the core's index is reused too
        nodes = tuple(_node_info(hostname, members) for hostname, members in by_node.items())
        _NODES_CACHE.clear()
        _NODES_CACHE[key] = nodes
    gpu_pk = {uuid_: pk for pk, uuid_, *_ in gpus}
    gpu_place = {uuid_: GpuPlace(host, index, uuid_) for _, uuid_, index, _, _, host, _ in gpus}
    return nodes, gpu_pk, gpu_place


def _whole_gpus(rows: Iterable[tuple]) -> list[tuple]:
    """The GPUs a job can be given whole, without their MIG column: not MIG instances, and not GPUs split into
    them.

    A MIG-enabled GPU runs work only inside its instances, and an instance is a fraction of a GPU that the
    goodput models do not describe; offering either would also let two jobs share one physical GPU. Both stay in
    the inventory and in telemetry.
    """
    rows = list(rows)
    split = {parent for *_, parent in rows if parent}
    return [row[:-1] for row in rows if not row[-1] and row[1] not in split]


def _node_info(hostname: str, gpus: list[tuple]) -> NodeInfo:
    types = [gpu_type_key(model) for _, _, _, model, *_ in gpus]
    node_type = max(sorted(set(types)), key=types.count)  # one type per node; a mixed node counts as its majority
    slots = tuple(GpuSlot(uuid_, healthy=health != GpuHealth.LOST) for _, uuid_, _, _, health, _, _ in gpus)
    return NodeInfo(hostname, node_type, slots, schedulable=gpus[0][6])


def _open_placements() -> dict[int, tuple[str, ...]]:
    held: dict[int, list[str]] = {}
    rows = Allocation.objects.filter(ended_at__isnull=True).order_by("gpu__node__hostname", "gpu__index")
    for job_id, gpu_uuid in rows.values_list("job_id", "gpu__uuid"):
        held.setdefault(job_id, []).append(gpu_uuid)
    return {job_id: tuple(gpus) for job_id, gpus in held.items()}


# --- the round ------------------------------------------------------------------------


def run_round(now: datetime | None = None, holder: str | None = None) -> SchedulingRound | None:
    """Run one round; None when rounds are paused or another worker holds the round's lease."""
    config = scheduler_settings()
    if config.paused:
        return None
    holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    if not take_lease(ROUND_LEASE, holder, settings.ROUND_LEASE_SECONDS):
        logger.info("round skipped: another worker holds the round's lease")
        return None
    try:
        return _run_round(config, now or timezone.now())
    finally:
        release_lease(ROUND_LEASE, holder)


@dataclass
class _Timings:
    started: float = field(default_factory=time.perf_counter)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, name: str) -> None:
        self.marks[name] = time.perf_counter()

    def ms(self, start: str | None, end: str) -> float:
        begin = self.marks[start] if start else self.started
        return round((self.marks[end] - begin) * 1000, 3)


def _run_round(config: SchedulerSettings, now: datetime) -> SchedulingRound:
    timings = _Timings()
    policy = get_policy(config.policy)
    executor = get_executor(config)
    live = build_snapshot(now)
    before = {job.id for job in live.snap.jobs}
    observed = executor.observe(live.snap, now)
    finished = len(before - {job.id for job in observed.jobs})
    live = LiveSnapshot(observed, live.gpu_pk, live.gpu_place, live.pending_reasons)
    timings.mark("snapshot")
    stored = PolicyState.objects.filter(policy=policy.name).values_list("state", flat=True).first()
    try:
        result = run_cycle(live.snap, policy, stored)
    except Exception as exc:  # a broken policy must not touch the cluster; the round says why
        logger.exception("policy %s failed", policy.name)
        return SchedulingRound.objects.create(
            policy=policy.name, started_at=now, finished_at=timezone.now(), status=RoundStatus.FAILED,
            jobs_considered=len(live.snap.jobs), finished=finished, executor=executor.name,
            error=f"{type(exc).__name__}: {exc}",
        )
    timings.mark("policy")
    round_row = apply_round(live, result, policy.name, now, executor.name, finished, timings)
    executor.launch(unlaunched(live.gpu_place), now)
    return round_row


def apply_round(
    live: LiveSnapshot, result: CycleResult, policy: str, now: datetime, executor: str, finished: int,
    timings: _Timings,
) -> SchedulingRound:
    """Write one round's decisions in one transaction; decisions about jobs that changed meanwhile are dropped."""
    with transaction.atomic():
        applied, skipped = _still_valid(result.changes)
        round_row = SchedulingRound.objects.create(
            policy=policy, started_at=now, status=RoundStatus.RUNNING, jobs_considered=len(live.snap.jobs),
            finished=finished, skipped=skipped, executor=executor,
        )
        _move_allocations(applied, live.gpu_pk, now)
        _update_jobs(applied, now)
        _record_events(applied, round_row, now)
        _store_pending_reasons(result.decisions.values(), live.pending_reasons)
        PolicyState.objects.update_or_create(policy=policy, defaults={"state": result.state, "round": round_row})
        timings.mark("write")
        counts = {action: sum(d.action == action for d in applied) for action in Action}
        SchedulingRound.objects.filter(pk=round_row.pk).update(
            status=RoundStatus.OK, finished_at=timezone.now(), decisions=len(applied),
            starts=counts[Action.START], rescales=counts[Action.RESCALE], preemptions=counts[Action.PREEMPT],
            snapshot_ms=timings.ms(None, "snapshot"), policy_ms=timings.ms("snapshot", "policy"),
            write_ms=timings.ms("policy", "write"), duration_ms=timings.ms(None, "write"),
        )
    round_row.refresh_from_db()
    return round_row


def _still_valid(changes: Sequence[Decision]) -> tuple[list[Decision], int]:
    """The decisions whose job is still schedulable and holds what the snapshot said; and how many were not.

    Between the snapshot and this transaction an operator may have cancelled a job, or an
    executor finished one. Such a job's decision is dropped (the next round reconsiders
    it), and so is any decision that would then take a GPU still held by another job.
    """
    jobs = Job.objects.select_for_update().filter(pk__in=[int(d.job_id) for d in changes])
    state = dict(jobs.values_list("pk", "state"))
    holder = {gpu: job for job, gpu in Allocation.objects.filter(ended_at__isnull=True).values_list(
        "job_id", "gpu__uuid")}
    held_by: dict[int, set[str]] = {}
    for gpu, job in holder.items():
        held_by.setdefault(job, set()).add(gpu)
    valid = [d for d in changes if state.get(int(d.job_id)) in SCHEDULABLE_STATES
             and held_by.get(int(d.job_id), set()) == set(d.previous)]
    for decision in valid:  # GPUs these decisions give up are free for the others
        for gpu in set(decision.previous) - set(decision.gpus):
            holder.pop(gpu, None)
    applied = []
    for decision in valid:
        job = int(decision.job_id)
        if all(holder.get(gpu, job) == job for gpu in decision.gpus):
            applied.append(decision)
            holder.update(dict.fromkeys(decision.gpus, job))
    return applied, len(changes) - len(applied)


def _move_allocations(applied: Sequence[Decision], gpu_pk: Mapping[str, int], now: datetime) -> None:
    released = [gpu_pk[gpu] for d in applied for gpu in set(d.previous) - set(d.gpus)]
    for chunk in _chunks(released):  # before the opens: one open allocation per GPU is a constraint
        Allocation.objects.filter(gpu_id__in=chunk, ended_at__isnull=True).update(ended_at=now)
    Allocation.objects.bulk_create(
        Allocation(job_id=int(d.job_id), gpu_id=gpu_pk[gpu], started_at=now)
        for d in applied for gpu in d.gpus if gpu not in set(d.previous)
    )


_NEW_STATE = {Action.START: JobState.RUNNING, Action.RESCALE: JobState.RESCALING, Action.PREEMPT: JobState.PREEMPTED}


def _update_jobs(applied: Sequence[Decision], now: datetime) -> None:
    jobs = Job.objects.in_bulk([int(d.job_id) for d in applied])
    for decision in applied:
        job = jobs[int(decision.job_id)]
        job.state = _NEW_STATE[decision.action]
        job.generation += 1
        job.pending_reason = decision.reason if decision.action == Action.PREEMPT else ""
        if decision.action == Action.START:
            job.started_at = job.started_at or now
            job.accounted_at = now
        if decision.action == Action.RESCALE or (decision.action == Action.START and job.progress > 0):
            job.restarts += 1  # it reloads its checkpoint
    update_many(Job, ["state", "generation", "pending_reason", "started_at", "accounted_at", "restarts"], jobs.values())


_EVENT_KIND = {
    Action.START: RescaleKind.START, Action.RESCALE: RescaleKind.RESCALE, Action.PREEMPT: RescaleKind.PREEMPT,
}


def _record_events(applied: Sequence[Decision], round_row: SchedulingRound, now: datetime) -> None:
    RescaleEvent.objects.bulk_create(
        (RescaleEvent(job_id=int(d.job_id), round=round_row, at=now, kind=_EVENT_KIND[d.action],
                      from_gpus=len(d.previous), to_gpus=len(d.gpus), reason=d.reason) for d in applied),
        batch_size=500,
    )


def _store_pending_reasons(decisions: Iterable[Decision], stored: Mapping[str, str]) -> None:
    """Keep each waiting job's "why am I pending" current; only rows whose reason changed are written."""
    changed = [Job(pk=int(d.job_id), pending_reason=d.reason[:255]) for d in decisions
               if d.action == Action.WAIT and stored.get(d.job_id) != d.reason[:255]]
    update_many(Job, ["pending_reason"], changed)


def _chunks(items: list[int], size: int = 500) -> Iterable[list[int]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


# --- telling the executor -------------------------------------------------------------


def unlaunched(gpu_place: Mapping[str, GpuPlace] | None = None) -> list[Launch]:
    """A launch for every job whose allocation the executor has not acknowledged yet, in job order."""
    jobs = list(Job.objects.filter(generation__gt=F("launched_generation")).order_by("pk").values_list(
        "pk", "generation", "progress", "restarts"))
    if not jobs:
        return []
    if gpu_place is None:
        gpu_place = _nodes()[2]
    held: dict[int, list[GpuPlace]] = {}
    open_rows = Allocation.objects.filter(ended_at__isnull=True, job_id__in=[pk for pk, *_ in jobs])
    for job_id, gpu_uuid in open_rows.order_by("gpu__node__hostname", "gpu__index").values_list(
            "job_id", "gpu__uuid"):
        held.setdefault(job_id, []).append(gpu_place[gpu_uuid])
    return [Launch(pk, generation, tuple(held.get(pk, ())), restart=progress > 0 or restarts > 0)
            for pk, generation, progress, restarts in jobs]


def node_hostnames() -> list[str]:
    return list(Node.objects.values_list("hostname", flat=True))
