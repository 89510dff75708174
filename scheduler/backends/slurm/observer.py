"""Slurm schedules, the console watches: every Slurm job with GPUs mirrored into the console's rows.

Nothing is ever sent to Slurm but reads. Each round the inventory is refreshed and each job ``squeue`` knows
(and the recently ended ones it still lists) becomes or updates one console ``Job``: its account as the tenant
(created when new), its GPUs and type from GRES, its state, Slurm's pending reason, its start and end, and
open ``Allocation`` rows on its nodes' GPUs while it runs — so the dashboards, fairness, reports, accounting
and forecasts read a Slurm cluster as they read any other. GPU time is charged as Slurm ran it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from django.db import transaction
from django.db.models import Q

from scheduler.backends import register_backend
from scheduler.backends.slurm import submission
from scheduler.backends.slurm.accounting import sacct_comparison
from scheduler.backends.slurm.client import AccountedRun, SlurmError, SlurmJob
from scheduler.backends.slurm.executor import ENDED, RUNNING, SlurmReader, charge_slurm_time, ending
from scheduler.backends.slurm.fairness import read_fairness
from scheduler.bounds import MAX_EXPECTED_SECONDS, MAX_GPUS, MAX_TOTAL_WORK
from scheduler.bulk import update_many
from scheduler.core.config import SchedulingConfig
from scheduler.core.types import ClusterSnapshot
from scheduler.models import Allocation, ClusterFairness, Gpu, Job, JobState, Tenant

MIRRORED_NAME_LENGTH = 200
TENANT_NAME_LENGTH = 100
USER_NAME_LENGTH = 64
BATCH = 1_000  # rows a query reads or writes at once
VANISHED_LOOKBACK = timedelta(days=31)  # how far back sacct is read for jobs that left the queue unseen
# What a round brings up to date of a mirrored job; a row is written only when one of them changed.
MIRRORED_FIELDS = ("state", "pending_reason", "cluster_priority", "started_at", "finished_at", "attained_gpu_seconds",
                   "accounted_at", "progress", "total_work")
SLURM_SCHEDULING_SECONDS = 2.0  # a forecast of Slurm decides within this of a job's end (its sched_min_interval)


@dataclass
class SlurmObserver(SlurmReader):
    """The round's executor when Slurm decides (``SchedulerSettings.executor == "slurm-observer"``)."""

    name: ClassVar[str] = "slurm-observer"
    decides: ClassVar[bool] = False

    def observe(self, snap: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        with transaction.atomic():
            mirrored = mirror_jobs([job for job in self.slurm_jobs.values() if 0 < job.gpus <= MAX_GPUS], now)
        self.notes.append(f"observing Slurm: {mirrored} jobs with GPUs mirrored")
        self._settle_vanished(now)
        self._read_fairness(now)
        return snap  # as read before the mirror: no policy runs on it

    def _settle_vanished(self, now: datetime) -> None:
        """Mirrored jobs still waiting or running here that ``squeue`` no longer lists — they ended while the
        console was not looking (Slurm forgets an ended job after ``MinJobAge``) — are ended as ``sacct`` says;
        one that ``sacct`` does not know either is marked failed, and the round says so. Never left active."""
        active = Job.objects.filter(state__in=[JobState.PENDING, JobState.RUNNING]).exclude(cluster_job_id="")
        listed = {str(job_id) for job_id in self.slurm_jobs}
        vanished = {job.cluster_job_id: job for job in active.only("pk", "cluster_job_id", "submitted_at")
                    if job.cluster_job_id not in listed}
        if not vanished:
            return
        assert self.client is not None  # refresh_inventory connected
        since = max(min(job.submitted_at for job in vanished.values()), now - VANISHED_LOOKBACK)
        try:
            ended = [job for job in history_jobs(self.client.commands.accounting(since, now))
                     if str(job.id) in vanished and job.state in ENDED]
        except SlurmError as error:
            self.notes.append(f"{len(vanished)} mirrored jobs left Slurm's queue; sacct not read: {error}")
            return
        with transaction.atomic():
            mirror_jobs(ended, now)
            unknown = [vanished[key] for key in vanished.keys() - {str(job.id) for job in ended}]
            Job.objects.filter(pk__in=[job.pk for job in unknown]).update(
                state=JobState.FAILED, finished_at=now, pending_reason="",
                error="no longer known to Slurm: neither squeue nor sacct lists it")
            Allocation.objects.filter(job__in=unknown, ended_at__isnull=True).update(ended_at=now)
        self.notes.append(f"{len(vanished)} mirrored jobs had left Slurm's queue: {len(ended)} ended as sacct "
                          f"says, {len(unknown)} unknown to sacct marked failed")

    def _read_fairness(self, now: datetime) -> None:
        """Slurm's fair share and priority factors, kept for the Fairness page; a failed read is noted, not fatal."""
        assert self.client is not None  # refresh_inventory connected
        try:
            reading = read_fairness(self.client.commands)
        except SlurmError as error:
            self.notes.append(f"Slurm's fair share not read: {error}")
            return
        ClusterFairness.objects.update_or_create(pk=1, defaults={"read_at": now, "data": reading.as_json()})

    def launch(self, launches: object, now: datetime) -> None:
        """An observer launches nothing."""


def mirror_jobs(slurm_jobs: list[SlurmJob], now: datetime) -> int:
    """Create or update one console job per Slurm job, with its allocations; returns how many. New jobs are
    written in bulk and known ones only where something changed: a queue of 10,000 mostly still jobs costs a few
    writes a round, not 10,000."""
    tenants = {tenant.name: tenant for tenant in Tenant.objects.all()}
    known = _known(slurm_jobs)
    gpus_by_node = _gpus_by_node()
    fresh: list[Job] = []
    changed: list[Job] = []
    started: list[tuple[Job, SlurmJob]] = []
    stopped: list[tuple[Job, datetime]] = []
    for slurm_job in slurm_jobs:
        account = (slurm_job.account or "(no account)")[:TENANT_NAME_LENGTH]
        tenant = tenants.get(account) or tenants.setdefault(account, Tenant.objects.get_or_create(name=account)[0])
        job = known.get(str(slurm_job.id))
        before = _mirrored(job) if job is not None else None
        job = job or _new_job(slurm_job, tenant)
        was_running = job.state == JobState.RUNNING
        job.state, job.pending_reason = _state(slurm_job), slurm_job.reason if slurm_job.state == "PENDING" else ""
        job.cluster_priority = slurm_job.priority  # it changes as the job ages and its owner's fair share moves
        job.started_at = slurm_job.started_at or job.started_at
        job.finished_at = slurm_job.ended_at if slurm_job.state in ENDED else None
        charge_slurm_time(job, slurm_job, now)
        job.progress, job.total_work = _work(slurm_job, now)
        if before is None:
            fresh.append(job)
        elif _mirrored(job) != before:
            changed.append(job)
        if slurm_job.state in RUNNING and not was_running:
            started.append((job, slurm_job))
        elif slurm_job.state not in RUNNING and was_running:
            stopped.append((job, slurm_job.ended_at or now))
    Job.objects.bulk_create(fresh, batch_size=BATCH)  # their primary keys are set (SQLite ≥ 3.35, PostgreSQL)
    update_many(Job, MIRRORED_FIELDS, changed)
    for job, slurm_job in started:
        _open_allocations(job, slurm_job, gpus_by_node, now)
    for job, at in stopped:
        Allocation.objects.filter(job=job, ended_at__isnull=True).update(ended_at=at)
    return len(slurm_jobs)


def _known(slurm_jobs: Sequence[SlurmJob]) -> dict[str, Job]:
    """The console's rows of these Slurm jobs, locked, read ``BATCH`` ids at a time (a query's parameters are
    bounded)."""
    ids = [str(slurm_job.id) for slurm_job in slurm_jobs]
    known: dict[str, Job] = {}
    for start in range(0, len(ids), BATCH):
        rows = Job.objects.select_for_update().filter(cluster_job_id__in=ids[start:start + BATCH])
        known.update((job.cluster_job_id, job) for job in rows)
    return known


def _mirrored(job: Job) -> tuple[object, ...]:
    return tuple(getattr(job, name) for name in MIRRORED_FIELDS)


def _new_job(slurm_job: SlurmJob, tenant: Tenant) -> Job:
    return Job(
        tenant=tenant, name=(slurm_job.name or f"slurm {slurm_job.id}")[:MIRRORED_NAME_LENGTH],
        workload_profile="", total_work=0.0, min_gpus=slurm_job.gpus, max_gpus=slurm_job.gpus,
        gpu_type=slurm_job.gpu_type, submitted_at=slurm_job.submitted_at, cluster_job_id=str(slurm_job.id),
        cluster_user=slurm_job.user[:USER_NAME_LENGTH], time_limit_seconds=_limit(slurm_job),
    )


def _limit(slurm_job: SlurmJob) -> float | None:
    """Its time limit as the console keeps one (at most a year); None: none, or longer."""
    limit = slurm_job.time_limit_seconds
    return limit if limit is not None and 1 <= limit <= MAX_EXPECTED_SECONDS else None


def _work(slurm_job: SlurmJob, now: datetime) -> tuple[float, float]:
    """(progress, total work) in the unit of a job without a profile, seconds at its GPUs: what it has run, and
    what it will run — all of it once ended (so the what-ifs replay its real length), else its time limit."""
    ran = max(((slurm_job.ended_at or now) - slurm_job.started_at).total_seconds(), 0.0) if slurm_job.started_at \
        else 0.0
    ran = min(ran, MAX_TOTAL_WORK)
    if slurm_job.state in ENDED:
        return ran, ran
    return ran, max(ran, _limit(slurm_job) or 0.0)


def history_jobs(runs: Sequence[AccountedRun]) -> list[SlurmJob]:
    """``sacct``'s runs as the jobs they were (a requeued job: first start, last end), for ``mirror_jobs``."""
    by_job: dict[int, list[AccountedRun]] = {}
    for run in runs:
        by_job.setdefault(run.job_id, []).append(run)
    jobs = []
    for job_id, mine in sorted(by_job.items()):
        last = max(mine, key=lambda run: run.ended_at or run.started_at or run.submitted_at)
        starts = [run.started_at for run in mine if run.started_at]
        jobs.append(SlurmJob(
            id=job_id, name=last.name, comment=last.comment, account=last.account, user=last.user,
            state=last.state.split()[0] if last.state else "UNKNOWN", reason="", nodes=(), gpus_per_node={},
            gpu_type="", submitted_at=min(run.submitted_at for run in mine), started_at=min(starts) if starts else None,
            ended_at=last.ended_at, restarts=len(mine) - 1, requested_gpus=max(run.gpus for run in mine),
        ))
    return jobs


def _state(slurm_job: SlurmJob) -> str:
    if slurm_job.state in RUNNING or slurm_job.state == "COMPLETING":
        return JobState.RUNNING
    if slurm_job.state in ENDED:
        return ending(slurm_job)[0]  # the executor's one reading of how Slurm ended a job
    return JobState.PENDING


def _gpus_by_node() -> dict[str, list[int]]:
    """Free GPU row ids per node (no open allocation), lowest index first."""
    taken = Allocation.objects.filter(ended_at__isnull=True).values("gpu_id")
    free: dict[str, list[int]] = {}
    for pk, hostname in Gpu.objects.filter(~Q(pk__in=taken)).order_by("node__hostname", "index").values_list(
            "pk", "node__hostname"):
        free.setdefault(hostname, []).append(pk)
    return free


def _open_allocations(job: Job, slurm_job: SlurmJob, free: Mapping[str, list[int]], now: datetime) -> None:
    rows = []
    for node, count in slurm_job.gpus_per_node.items():
        available = free.get(node, [])
        rows += [Allocation(job=job, gpu_id=pk, started_at=slurm_job.started_at or now) for pk in available[:count]]
        del available[:count]
    Allocation.objects.bulk_create(rows)


def slurm_model(config: SchedulingConfig) -> SchedulingConfig:
    """Slurm's own scheduling as a forecast runs it: its backfill by priority and time limits
    (``scheduler/core/policies/slurm_backfill.py``), deciding as soon as a job ends (Slurm schedules on every
    completion), not on the console's round interval."""
    return dataclasses.replace(config, policy="slurm-backfill", policy_config={},
                               round_seconds=SLURM_SCHEDULING_SECONDS)


register_backend("slurm-observer", lambda config: SlurmObserver(),
                 label="Slurm observer (Slurm schedules, the console watches)",
                 check_submission=submission.check_script, compare_accounting=sacct_comparison,
                 forecast_model=slurm_model)
