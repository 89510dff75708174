"""The console's GPU-hours against Slurm's own accounting (``sacct``, gres/gpu), per job, user and tenant.

Slurm counts a job's GPUs × the time each of its runs held them (``--duplicates``: a requeued job has one row
per start); the executor charges the console's ``attained_gpu_seconds`` the same way, from Slurm's start and end
times, so the two agree up to the seconds between a requeue and the moment its job left its nodes. A job is
compared over its whole life; one that began before the period or still runs is marked ``partial``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from ..models import Job
from .client import AccountedRun, SlurmClient


@dataclass(frozen=True)
class JobAccount:
    slurm_id: int
    console_id: int | None  # None: a Slurm job the console did not run (observer mode mirrors them)
    user: str
    tenant: str
    console_gpu_seconds: float | None
    slurm_gpu_seconds: float
    partial: bool  # began before the period, or still running: compared over what both have counted so far

    @property
    def difference(self) -> float | None:
        return None if self.console_gpu_seconds is None else self.console_gpu_seconds - self.slurm_gpu_seconds


@dataclass(frozen=True)
class Reconciliation:
    start: datetime
    end: datetime
    jobs: tuple[JobAccount, ...]

    def totals(self, key: str) -> dict[str, tuple[float, float]]:
        """``key`` ("user" or "tenant") → (console GPU-seconds, sacct GPU-seconds), over jobs both know."""
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for job in self.jobs:
            if job.console_gpu_seconds is not None:
                sums[getattr(job, key)][0] += job.console_gpu_seconds
                sums[getattr(job, key)][1] += job.slurm_gpu_seconds
        return {name: (console, slurm) for name, (console, slurm) in sorted(sums.items())}


def slurm_gpu_seconds(runs: Iterable[AccountedRun], now: datetime) -> dict[int, float]:
    """GPU-seconds per Slurm job: each run's GPUs × the time it held them (a run still going: until ``now``)."""
    seconds: dict[int, float] = defaultdict(float)
    for run in runs:
        if run.started_at is not None and run.gpus > 0:
            seconds[run.job_id] += run.gpus * max(((run.ended_at or now) - run.started_at).total_seconds(), 0.0)
    return dict(seconds)


def reconcile(client: SlurmClient, start: datetime, end: datetime, now: datetime) -> Reconciliation:
    runs = client.commands.accounting(start, end)
    return reconcile_runs(runs, start, end, now)


def reconcile_runs(runs: Sequence[AccountedRun], start: datetime, end: datetime, now: datetime) -> Reconciliation:
    by_job = slurm_gpu_seconds(runs, now)
    first = {run.job_id: run for run in sorted(runs, key=lambda r: r.started_at or now, reverse=True)}
    console = {int(job.cluster_job_id): job for job in Job.objects.select_related("tenant", "owner").filter(
        Q(cluster_job_id__in=[str(job_id) for job_id in by_job]))}
    accounts = []
    for slurm_id, gpu_seconds in sorted(by_job.items()):
        run, job = first[slurm_id], console.get(slurm_id)
        started = min((r.started_at for r in runs if r.job_id == slurm_id and r.started_at), default=None)
        running = any(r.ended_at is None for r in runs if r.job_id == slurm_id)
        accounts.append(JobAccount(
            slurm_id=slurm_id, console_id=job.pk if job else None,
            user=(job.owner.username if job and job.owner else run.user), tenant=job.tenant.name if job else run.account,
            console_gpu_seconds=job.attained_gpu_seconds if job else None, slurm_gpu_seconds=gpu_seconds,
            partial=running or (started is not None and started < start),
        ))
    return Reconciliation(start, end, tuple(accounts))
