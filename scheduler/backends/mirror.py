"""The cluster's own jobs as console rows: what every observer back-end (Slurm's, Kubernetes') writes each round.

An observer reads its cluster's jobs into ``ObservedJob`` records, in the console's words; ``mirror_jobs`` makes one
console ``Job`` of each — its tenant created when new, its state, the reason it waits, its start and end, GPU time
charged as the cluster ran it, and open ``Allocation`` rows on its nodes' GPUs while it runs — so the dashboards,
fairness, reports, accounting and forecasts read any cluster as they read the console's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from scheduler.backends import charge_gpu_time
from scheduler.bounds import MAX_EXPECTED_SECONDS, MAX_TOTAL_WORK
from scheduler.bulk import update_many
from scheduler.models import FINISHED_STATES, Allocation, Gpu, Job, JobState, Tenant

MIRRORED_NAME_LENGTH = 200
TENANT_NAME_LENGTH = 100
USER_NAME_LENGTH = 64
BATCH = 1_000  # rows a query reads or writes at once
# A running process is charged up to this long ago: the cluster reports an end within it, so one that ended just
# before a round is never charged past its end.
REPORT_LAG = timedelta(seconds=2)
# What a round brings up to date of a mirrored job; a row is written only when one of them changed.
MIRRORED_FIELDS = ("state", "pending_reason", "cluster_priority", "started_at", "finished_at", "attained_gpu_seconds",
                   "accounted_at", "progress", "total_work")


Run = tuple[int, datetime, datetime | None]  # a process of a job: GPUs, start, end (None: still running)


@dataclass(frozen=True)
class ObservedJob:
    """One job as the cluster's scheduler has it."""

    key: str  # the cluster's own id of it (``Job.cluster_job_id``)
    name: str
    tenant: str  # a Slurm account, a Kubernetes namespace
    user: str
    state: str  # the console's ``JobState``: pending, running, or how it ended
    running: bool  # on its GPUs now: its GPU time counts up to now
    reason: str  # why it waits, in the cluster's words ("" unless pending)
    gpus_per_node: Mapping[str, int]  # what it holds on each node while running
    requested_gpus: int  # what it asks for in all
    gpu_type: str
    submitted_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    priority: int | None = None  # the cluster's own, where it has one (higher starts first)
    time_limit_seconds: float | None = None
    # Where the cluster tells each of its processes' times (Kubernetes' pods): (GPUs, start, end or None while it
    # runs) each, and GPU time is charged from them; None: from the job's own start and end (Slurm).
    runs: tuple[Run, ...] | None = None

    @property
    def gpus(self) -> int:
        return sum(self.gpus_per_node.values()) or self.requested_gpus

    @property
    def ended(self) -> bool:
        return self.state in FINISHED_STATES


def mirror_jobs(observed: Sequence[ObservedJob], now: datetime) -> int:
    """Create or update one console job per observed job, with its allocations (in the caller's transaction);
    returns how many. New jobs are written in bulk and known ones only where something changed: a queue of 10,000
    mostly still jobs costs a few writes a round, not 10,000."""
    tenants = {tenant.name: tenant for tenant in Tenant.objects.all()}
    known = _known(observed)
    gpus_by_node = _gpus_by_node()
    fresh: list[Job] = []
    changed: list[Job] = []
    started: list[tuple[Job, ObservedJob]] = []
    stopped: list[tuple[Job, datetime]] = []
    for seen in observed:
        name = (seen.tenant or "(none)")[:TENANT_NAME_LENGTH]
        tenant = tenants.get(name) or tenants.setdefault(name, Tenant.objects.get_or_create(name=name)[0])
        job = known.get(seen.key)
        before = _mirrored(job) if job is not None else None
        job = job or _new_job(seen, tenant)
        was_running = job.state == JobState.RUNNING
        job.state, job.pending_reason = seen.state, seen.reason if seen.state == JobState.PENDING else ""
        if seen.priority is not None:
            job.cluster_priority = seen.priority  # it changes as the job ages and its owner's fair share moves
        job.started_at = seen.started_at or job.started_at
        job.finished_at = seen.ended_at if seen.ended else None
        _charge(job, seen, now)
        job.progress, job.total_work = _work(seen, now)
        if before is None:
            fresh.append(job)
        elif _mirrored(job) != before:
            changed.append(job)
        if seen.state == JobState.RUNNING and not was_running:
            started.append((job, seen))
        elif seen.state != JobState.RUNNING and was_running:
            stopped.append((job, seen.ended_at or now))
    Job.objects.bulk_create(fresh, batch_size=BATCH)  # their primary keys are set (SQLite ≥ 3.35, PostgreSQL)
    update_many(Job, MIRRORED_FIELDS, changed)
    for job, seen in started:
        _open_allocations(job, seen, gpus_by_node, now)
    for job, at in stopped:
        Allocation.objects.filter(job=job, ended_at__isnull=True).update(ended_at=at)
    return len(observed)


def _known(observed: Sequence[ObservedJob]) -> dict[str, Job]:
    """The console's rows of these jobs, locked, read ``BATCH`` ids at a time (a query's parameters are bounded)."""
    keys = [seen.key for seen in observed]
    known: dict[str, Job] = {}
    for start in range(0, len(keys), BATCH):
        rows = Job.objects.select_for_update().filter(cluster_job_id__in=keys[start:start + BATCH])
        known.update((job.cluster_job_id, job) for job in rows)
    return known


def _mirrored(job: Job) -> tuple[object, ...]:
    return tuple(getattr(job, name) for name in MIRRORED_FIELDS)


def _new_job(seen: ObservedJob, tenant: Tenant) -> Job:
    return Job(
        tenant=tenant, name=(seen.name or f"job {seen.key}")[:MIRRORED_NAME_LENGTH], workload_profile="",
        total_work=0.0, min_gpus=seen.gpus, max_gpus=seen.gpus, gpu_type=seen.gpu_type,
        submitted_at=seen.submitted_at, cluster_job_id=seen.key, cluster_user=seen.user[:USER_NAME_LENGTH],
        time_limit_seconds=_limit(seen),
    )


def _limit(seen: ObservedJob) -> float | None:
    """Its time limit as the console keeps one (at most a year); None: none, or longer."""
    limit = seen.time_limit_seconds
    return limit if limit is not None and 1 <= limit <= MAX_EXPECTED_SECONDS else None


def _charge(job: Job, seen: ObservedJob, now: datetime) -> None:
    """Add the GPU time the cluster ran it since last counted: its GPUs while running, up to now or its end."""
    if seen.runs is not None:
        charge_runs(job, seen.runs, seen.ended, now)
        return
    if seen.started_at is None or seen.gpus <= 0:
        return
    until = now if seen.running else seen.ended_at if seen.ended else None
    if until is None:
        return
    since = max(job.accounted_at or seen.started_at, seen.started_at)
    if until > since:
        job.accounted_at = since
        charge_gpu_time(job, seen.gpus, until)


def charge_runs(job: Job, runs: Sequence[Run], ended: bool, now: datetime) -> None:
    """Each run's GPUs × the time it ran between the job's last count and ``REPORT_LAG`` ago (once the job ended,
    every end is known: up to now), so a job is charged exactly what its processes ran, however the rounds fall
    (row not saved)."""
    since, until = job.accounted_at, now if ended else now - REPORT_LAG
    if not runs or since is not None and until <= since:
        return  # nothing ran (a waiting job), or counted already
    for gpus, started, ended_at in runs:
        begin = max(since, started) if since else started
        end = min(ended_at, until) if ended_at else until
        job.attained_gpu_seconds += gpus * max((end - begin).total_seconds(), 0.0)
    job.accounted_at = until


def _work(seen: ObservedJob, now: datetime) -> tuple[float, float]:
    """(progress, total work) in the unit of a job without a profile, seconds at its GPUs: what it has run, and
    what it will run — all of it once ended (so the what-ifs replay its real length), else its time limit."""
    ran = max(((seen.ended_at or now) - seen.started_at).total_seconds(), 0.0) if seen.started_at else 0.0
    ran = min(ran, MAX_TOTAL_WORK)
    if seen.ended:
        return ran, ran
    return ran, max(ran, _limit(seen) or 0.0)


def _gpus_by_node() -> dict[str, list[int]]:
    """Free GPU row ids per node (no open allocation), lowest index first."""
    taken = Allocation.objects.filter(ended_at__isnull=True).values("gpu_id")
    free: dict[str, list[int]] = {}
    for pk, hostname in Gpu.objects.filter(~Q(pk__in=taken)).order_by("node__hostname", "index").values_list(
            "pk", "node__hostname"):
        free.setdefault(hostname, []).append(pk)
    return free


def _open_allocations(job: Job, seen: ObservedJob, free: Mapping[str, list[int]], now: datetime) -> None:
    rows = []
    for node, count in seen.gpus_per_node.items():
        available = free.get(node, [])
        rows += [Allocation(job=job, gpu_id=pk, started_at=seen.started_at or now) for pk in available[:count]]
        del available[:count]
    Allocation.objects.bulk_create(rows)
