"""Slurm schedules, the console watches: every Slurm job with GPUs mirrored into the console's rows.

Nothing is ever sent to Slurm but reads. Each round the inventory is refreshed and each job ``squeue`` knows
(and the recently ended ones it still lists) becomes or updates one console ``Job``: its account as the tenant
(created when new), its GPUs and type from GRES, its state, Slurm's pending reason, its start and end, and
open ``Allocation`` rows on its nodes' GPUs while it runs — so the dashboards, fairness, reports, accounting
and forecasts read a Slurm cluster as they read any other. GPU time is charged as Slurm ran it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from django.db import transaction

from scheduler.backends import register_backend
from scheduler.backends.mirror import ObservedJob, mirror_jobs
from scheduler.backends.slurm import submission
from scheduler.backends.slurm.accounting import sacct_comparison
from scheduler.backends.slurm.client import AccountedRun, SlurmClient, SlurmError, SlurmJob
from scheduler.backends.slurm.executor import ENDED, RUNNING, SlurmReader, ending
from scheduler.backends.slurm.fairness import read_fairness
from scheduler.bounds import MAX_GPUS
from scheduler.core.config import SchedulingConfig
from scheduler.core.types import ClusterSnapshot
from scheduler.models import Allocation, ClusterFairness, Job, JobState

VANISHED_LOOKBACK = timedelta(days=31)  # how far back sacct is read for jobs that left the queue unseen
SLURM_SCHEDULING_SECONDS = 2.0  # a forecast of Slurm decides within this of a job's end (its sched_min_interval)


@dataclass
class SlurmObserver(SlurmReader):
    """The round's executor when Slurm decides (``SchedulerSettings.executor == "slurm-observer"``)."""

    name: ClassVar[str] = "slurm-observer"
    decides: ClassVar[bool] = False

    def read_jobs(self, client: SlurmClient) -> dict[int, SlurmJob]:
        """Every job, read as fast as the cluster's size needs (``SlurmClient.queue``)."""
        return client.queue()

    def observe(self, snap: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        with transaction.atomic():
            mirrored = mirror_slurm_jobs([job for job in self.slurm_jobs.values() if 0 < job.gpus <= MAX_GPUS], now)
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
            mirror_slurm_jobs(ended, now)
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


def mirror_slurm_jobs(slurm_jobs: Sequence[SlurmJob], now: datetime) -> int:
    """``mirror_jobs`` of Slurm's jobs; returns how many."""
    return mirror_jobs([observed_job(job) for job in slurm_jobs], now)


def observed_job(slurm_job: SlurmJob) -> ObservedJob:
    """A Slurm job in the console's words: its account as the tenant, Slurm's reason and priority."""
    return ObservedJob(
        key=str(slurm_job.id), name=slurm_job.name or f"slurm {slurm_job.id}", tenant=slurm_job.account,
        user=slurm_job.user, state=_state(slurm_job), running=slurm_job.state in RUNNING,
        reason=slurm_job.reason if slurm_job.state == "PENDING" else "", gpus_per_node=slurm_job.gpus_per_node,
        requested_gpus=slurm_job.requested_gpus, gpu_type=slurm_job.gpu_type, submitted_at=slurm_job.submitted_at,
        started_at=slurm_job.started_at, ended_at=slurm_job.ended_at if slurm_job.state in ENDED else None,
        priority=slurm_job.priority, time_limit_seconds=slurm_job.time_limit_seconds,
    )


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
