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

from ..models import Job
from .client import COMMENT_PREFIX, AccountedRun, SlurmClient


@dataclass(frozen=True)
class JobAccount:
    slurm_ids: tuple[int, ...]  # a job moved to another GPU type ran as several Slurm jobs
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


def console_jobs_of(runs: Iterable[AccountedRun]) -> dict[int, int]:
    """Slurm job id → the console job it ran (its comment), for the jobs the console submitted."""
    return {run.job_id: int(run.comment.removeprefix(COMMENT_PREFIX)) for run in runs
            if run.comment.startswith(COMMENT_PREFIX) and run.comment.removeprefix(COMMENT_PREFIX).isdigit()}


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
    """Group the runs by console job (their comment, else the console's stored Slurm id) and compare."""
    by_slurm_id = slurm_gpu_seconds(runs, now)
    owner = console_jobs_of(runs)
    stored = dict(Job.objects.filter(cluster_job_id__in=[str(i) for i in by_slurm_id]).values_list("cluster_job_id",
                                                                                                   "pk"))
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for slurm_id in sorted(by_slurm_id):
        console_id = owner.get(slurm_id) or stored.get(str(slurm_id))
        groups[("console", console_id) if console_id else ("slurm", slurm_id)].append(slurm_id)
    jobs = Job.objects.select_related("tenant", "owner").in_bulk([key for kind, key in groups if kind == "console"])
    accounts = []
    for (kind, key), slurm_ids in groups.items():
        job = jobs.get(key) if kind == "console" else None
        mine = [run for run in runs if run.job_id in slurm_ids]
        started = min((run.started_at for run in mine if run.started_at), default=None)
        accounts.append(JobAccount(
            slurm_ids=tuple(slurm_ids), console_id=job.pk if job else None,
            user=job.owner.username if job and job.owner else mine[0].user,
            tenant=job.tenant.name if job else mine[0].account,
            console_gpu_seconds=job.attained_gpu_seconds if job else None,
            slurm_gpu_seconds=sum(by_slurm_id[i] for i in slurm_ids),
            partial=any(run.ended_at is None for run in mine) or (started is not None and started < start),
        ))
    return Reconciliation(start, end, tuple(accounts))
