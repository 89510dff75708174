"""Data of the Jobs page: completion and queueing times, the allocation timeline with its events, goodput vs GPUs.

Everything is scoped through ``Job.objects.visible_to(user)``. Figures come from their single homes: percentiles
from ``scheduler.sim.metrics``; speeds from ``scheduler.core.speed.speed_table`` on the live round's snapshot
(``scheduler.live.snapshot.build_snapshot``), with a job's refitted model read by
``scheduler.live.refit.job_models`` exactly as a round reads it. Times are in seconds; the page picks display units.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Max, Q, Value
from django.db.models.functions import Coalesce

from scheduler.core.gpu_types import gpu_type_key
from scheduler.core.speed import job_speed, model_for, speed_table, type_preference
from scheduler.core.types import ClusterSnapshot, JobInfo
from scheduler.live.refit import job_models
from scheduler.live.snapshot import build_snapshot
from scheduler.models import ACTIVE_STATES, Allocation, Job, JobState, RescaleEvent
from scheduler.sim.metrics import mean, percentile

Viewer = User | AnonymousUser


# --- completion and queueing times --------------------------------------------------------------


@dataclass(frozen=True)
class Distribution:
    """Sorted values (seconds) and their summary; None where there are no values."""

    values: list[float]
    mean: float | None
    p50: float | None
    p99: float | None

    @classmethod
    def of(cls, values: Iterable[float]) -> Distribution:
        data = sorted(values)
        return cls(data, mean(data), percentile(data, 50), percentile(data, 99))


@dataclass(frozen=True)
class CompletionTimes:
    jct: Distribution  # jobs that succeeded in the range: finish − submit
    queueing: Distribution  # jobs first started in the range: first start − submit


def visible_jobs(user: Viewer, tenant: str | None = None) -> Any:
    """The jobs ``user`` may see, of one tenant if given (a tenant the user may not see gives none)."""
    jobs = Job.objects.visible_to(user)
    return jobs.filter(tenant__name=tenant) if tenant else jobs


def completion_times(user: Viewer, start: datetime, end: datetime, tenant: str | None = None) -> CompletionTimes:
    jobs = visible_jobs(user, tenant)
    finished = jobs.filter(state=JobState.SUCCEEDED, finished_at__gte=start, finished_at__lt=end)
    started = jobs.filter(started_at__gte=start, started_at__lt=end)
    return CompletionTimes(
        Distribution.of((f - s).total_seconds() for s, f in finished.values_list("submitted_at", "finished_at")),
        Distribution.of((b - s).total_seconds() for s, b in started.values_list("submitted_at", "started_at")),
    )


# --- the allocation timeline ------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A stretch of time over which a job held a constant number of GPUs (> 0)."""

    job_id: int
    start: datetime
    end: datetime
    gpus: int


@dataclass(frozen=True)
class Marker:
    """A RescaleEvent: what happened to the job's GPUs, and why."""

    job_id: int
    at: datetime
    kind: str
    from_gpus: int
    to_gpus: int
    reason: str


@dataclass(frozen=True)
class Timeline:
    rows: dict[int, str]  # job id → label, most recently active first
    segments: list[Segment]
    markers: list[Marker]
    left_out: int  # jobs active in the range beyond ``limit``


def timeline(user: Viewer, start: datetime, end: datetime, tenant: str | None = None, limit: int = 30) -> Timeline:
    """Allocations of the jobs ``user`` sees over [start, end) as GPU-count segments, with their events; the
    ``limit`` jobs most recently active (latest holding) only."""
    held = Allocation.objects.filter(job__in=visible_jobs(user, tenant), started_at__lt=end).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=start)
    )
    latest = held.values("job_id").annotate(last=Max(Coalesce("ended_at", Value(end)))).order_by("-last", "-job_id")
    chosen = list(latest.values_list("job_id", flat=True)[:limit])
    intervals: dict[int, list[tuple[datetime, datetime]]] = {job_id: [] for job_id in chosen}
    for job_id, began, ended in held.filter(job_id__in=chosen).order_by().values_list("job_id", "started_at",
                                                                                        "ended_at"):
        intervals[job_id].append((max(began, start), min(ended or end, end)))
    types = held_gpu_types(held.filter(job_id__in=chosen))
    labels = {pk: f"{name} #{pk} on {types.get(pk, '?')} ({tenant_name})" for pk, name, tenant_name in
              Job.objects.filter(pk__in=chosen).values_list("pk", "name", "tenant__name")}
    segments = [segment for job_id in chosen for segment in gpu_segments(job_id, intervals[job_id])]
    events = RescaleEvent.objects.filter(job_id__in=chosen, at__gte=start, at__lt=end).order_by("at", "id")
    markers = [Marker(*row) for row in events.values_list("job_id", "at", "kind", "from_gpus", "to_gpus", "reason")]
    left_out = max(0, latest.count() - limit) if len(chosen) == limit else 0
    return Timeline({pk: labels[pk] for pk in chosen}, segments, markers, left_out)


def held_gpu_types(allocations: Any) -> dict[int, str]:
    """Job id → the GPU types of ``allocations`` (an Allocation queryset), "a100" or, for a job moved between
    types, "v100/a100"."""
    found: dict[int, list[str]] = {}
    # "id" breaks ties between GPUs taken at the same instant: without it PostgreSQL returns them in any order.
    for job_id, model in allocations.order_by("started_at", "id").values_list("job_id", "gpu__model"):
        kinds = found.setdefault(job_id, [])
        if gpu_type_key(model) not in kinds:
            kinds.append(gpu_type_key(model))
    return {job_id: "/".join(kinds) for job_id, kinds in found.items()}


def gpu_segments(job_id: int, intervals: Sequence[tuple[datetime, datetime]]) -> list[Segment]:
    """One job's per-GPU holding intervals → stretches of constant GPU count > 0, in time order."""
    changes: dict[datetime, int] = {}
    for began, ended in intervals:
        if ended > began:
            changes[began] = changes.get(began, 0) + 1
            changes[ended] = changes.get(ended, 0) - 1
    segments: list[Segment] = []
    count, previous = 0, None
    for at in sorted(changes):
        if previous is not None and count > 0:
            segments.append(Segment(job_id, previous, at, count))
        count, previous = count + changes[at], at
    return _merge(segments)


def _merge(segments: list[Segment]) -> list[Segment]:
    merged: list[Segment] = []
    for segment in segments:
        last = merged[-1] if merged else None
        if last and last.gpus == segment.gpus and last.end == segment.start:
            merged[-1] = dataclasses.replace(last, end=segment.end)
        else:
            merged.append(segment)
    return merged


# --- goodput vs GPUs --------------------------------------------------------------------------


@dataclass(frozen=True)
class SpeedCurve:
    label: str
    speeds: list[float]  # work units per second at 0, 1, … GPUs


@dataclass(frozen=True)
class Goodput:
    job_id: int
    title: str
    unit: str  # of the speeds
    min_gpus: int
    max_gpus: int
    gpus_now: int
    curves: list[SpeedCurve]


def job_choices(user: Viewer, tenant: str | None = None, limit: int = 300) -> list[tuple[int, str]]:
    """(id, label) of the jobs to pick from: running ones first, then the most recently submitted."""
    jobs = visible_jobs(user, tenant).order_by("-submitted_at", "-id")
    fields = ("pk", "name", "tenant__name", "state")
    running = list(jobs.filter(state__in=ACTIVE_STATES).values_list(*fields)[:limit])
    others = list(jobs.exclude(state__in=ACTIVE_STATES).values_list(*fields)[: max(0, limit - len(running))])
    return [(pk, f"{name} #{pk} ({tenant_name}, {state})") for pk, name, tenant_name, state in running + others]


def goodput(user: Viewer, job_id: int, now: datetime) -> Goodput | None:
    """Speed at 0…N GPUs of a job the user sees: by its profile's model and, once refitted, by its own model.

    N is the job's ``max_gpus``, at least 8, so that a rigid job still shows its curve's shape. None if the user may
    not see the job.
    """
    job = visible_jobs(user).filter(pk=job_id).values(*INFO_FIELDS, "name", "fitted_model").first()
    if job is None:
        return None
    snap = speed_snapshot(now)
    top = max(job["max_gpus"], 8)
    profile, fitted = job["workload_profile"], job["fitted_model"]
    curves = []
    if profile in snap.profiles:
        info = job_info(job)
        for gpu_type in _types_for(info, snap):  # one curve per GPU type it could run on: speed is type-true
            model = model_for(info, snap, gpu_type)
            estimated = " (estimated)" if model is not None and model.estimated_from else ""
            curves.append(SpeedCurve(f"profile {profile} on {gpu_type}{estimated}",
                                     _speeds(info, snap, top, gpu_type)))
    if fitted:
        key = f"job:{job_id}"
        refitted = dataclasses.replace(snap, profiles={**snap.profiles, key: job_models(fitted)})
        reports = fitted.get("reports", "?")
        curves.append(SpeedCurve(f"refitted from {reports} reports", _speeds(job_info(job, key), refitted, top)))
    if not curves:
        curves.append(SpeedCurve("rigid: linear from min GPUs", _speeds(job_info(job), snap, top)))
    unit = "iterations/s" if profile in snap.profiles else "× speed at min GPUs"
    gpus_now = Allocation.objects.filter(job_id=job_id, ended_at__isnull=True).count()
    return Goodput(job_id, f"{job['name']} #{job_id} ({job['tenant__name']})", unit, job["min_gpus"],
                   job["max_gpus"], gpus_now, curves)


def _speeds(info: JobInfo, snap: ClusterSnapshot, top: int, gpu_type: str | None = None) -> list[float]:
    return [float(v) for v in speed_table(info, snap, up_to=top, gpu_type=gpu_type)]


def _types_for(info: JobInfo, snap: ClusterSnapshot) -> list[str | None]:
    """The GPU types the job may run on, fastest first; [None] on a cluster without GPUs."""
    if info.gpu_type:
        return [info.gpu_type]
    return list(type_preference(info, snap)) or [None]


def speed_snapshot(now: datetime) -> ClusterSnapshot:
    """The live round's nodes and profiles (no jobs): what ``job_speed`` and ``speed_table`` need."""
    return dataclasses.replace(build_snapshot(now).snap, jobs=())


# The columns ``job_info`` reads: what ``live.snapshot.build_snapshot`` reads for a job's speed (progress and placement
# do not matter here). Query them with ``.values(*INFO_FIELDS)``: building model instances costs more than the rest.
INFO_FIELDS = ("pk", "tenant__name", "submitted_at", "min_gpus", "max_gpus", "total_work", "priority",
               "workload_profile", "gpu_type", "batch_size", "last_throughput", "last_grad_noise_scale")


def job_info(row: Mapping[str, Any], profile: str | None = None) -> JobInfo:
    """A job (its ``INFO_FIELDS``) as the core sees it, with ``profile`` (default: its named profile; a profile
    the snapshot does not know makes it a rigid job)."""
    return JobInfo(
        id=str(row["pk"]), tenant=row["tenant__name"], submit_time=row["submitted_at"].timestamp(),
        min_gpus=row["min_gpus"], max_gpus=row["max_gpus"], total_work=row["total_work"], priority=row["priority"],
        profile=profile or row["workload_profile"] or None, gpu_type=row["gpu_type"] or None,
        batch_size=row["batch_size"], throughput=row["last_throughput"],
        grad_noise_scale=row["last_grad_noise_scale"],
    )


def speed_memo(snap: ClusterSnapshot) -> Callable[[JobInfo, int], float]:
    """``job_speed`` on ``snap``, remembered per kind of job: jobs of one profile, GPU type, batch and noise scale
    (and, rigid, min GPUs) have the same speed at the same GPU count."""
    memo: dict[tuple[Any, ...], float] = {}

    def speed(info: JobInfo, gpus: int) -> float:
        key = (info.profile, info.gpu_type, info.batch_size, info.grad_noise_scale, info.min_gpus, gpus)
        if key not in memo:
            memo[key] = job_speed(info, snap, gpus)
        return memo[key]

    return speed
