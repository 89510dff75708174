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

from scheduler.backends.slurm.client import AccountedRun, SlurmClient, SlurmError, comment_job_id, connect, job_comment
from scheduler.models import Job


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
    """Slurm job id → the console job it ran, for the runs whose comment is exactly that job's (``job_comment``)."""
    runs = list(runs)
    claimed = {job_id for job_id in (comment_job_id(run.comment) for run in runs) if job_id is not None}
    comments = {job_comment(pk, token): pk for pk, token in Job.objects.filter(pk__in=claimed).values_list(
        "pk", "report_token")}
    return {run.job_id: comments[run.comment] for run in runs if run.comment in comments}


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


def gpu_seconds_by_tenant(runs: Iterable[AccountedRun], start: datetime, end: datetime) -> dict[str, float]:
    """sacct's GPU-seconds in [start, end) per tenant: each run clipped to the period (one still going: to ``end``),
    a console job's runs under its tenant, any other under its Slurm account."""
    runs = list(runs)
    owner = console_jobs_of(runs)
    tenant_of = dict(Job.objects.filter(pk__in=set(owner.values())).values_list("pk", "tenant__name"))
    seconds: dict[str, float] = defaultdict(float)
    for run in runs:
        if run.started_at is None or run.gpus <= 0:
            continue
        overlap = (min(end, run.ended_at or end) - max(start, run.started_at)).total_seconds()
        if overlap > 0:
            seconds[tenant_of.get(owner.get(run.job_id, -1)) or run.account] += run.gpus * overlap
    return dict(seconds)


def sacct_comparison(console_by_tenant: dict[str, float], start: datetime, end: datetime,
                     only: str | None = None) -> list[str]:
    """A report's words on its GPU-hours beside Slurm's accounting for the same period, tenant by tenant
    (``only``: that tenant's line alone)."""
    try:
        slurm = gpu_seconds_by_tenant(connect().commands.accounting(start, end), start, end)
    except SlurmError as error:
        return [f"Slurm's accounting (sacct) could not be read for this period: {error}"]
    lines = []
    for tenant in sorted(set(console_by_tenant) | set(slurm)):
        if only is not None and tenant != only:
            continue
        here, there = console_by_tenant.get(tenant, 0.0) / 3600, slurm.get(tenant, 0.0) / 3600
        if max(here, there) < 0.005:
            continue
        gap = f"{(here - there) / there:+.1%}" if there else "not in sacct"
        lines.append(f"{tenant} {here:.2f} here, {there:.2f} in sacct ({gap})")
    if not lines:
        return ["Slurm's accounting (sacct) shows no GPU time in this period either."]
    return ["GPU-hours beside Slurm's accounting (sacct, gres/gpu) for the same period: " + "; ".join(lines) + "."]
