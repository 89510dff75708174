"""The console's start estimates beside Slurm's own (``squeue --start``), on a real Slurm queue.

A backtest for the lab (``manage.py slurm_forecast_backtest``): it submits a burst of jobs with ``sbatch`` — time
limits of one to three minutes, real run times a random part of them, more GPUs than there are — lets Slurm
schedule them (the console observes: ``slurm-observer``), and at one moment takes both forecasts of every job
still waiting: Slurm's expected start (what ``squeue --start`` prints) and the console's (``forecasts.refresh``
under the given policy, which knows only the time limits, as Slurm does). Then it waits until every job has
started and compares each estimate with the real start: the median absolute error of each, in seconds.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from scheduler.backends.slurm.client import SlurmClient
from scheduler.forecasting import forecasts
from scheduler.live.config import update_settings
from scheduler.live.round import run_round
from scheduler.models import ExecutorKind

GPU_TYPES = ("a100", "v100")


@dataclass(frozen=True)
class Compared:
    slurm_id: int
    started_at: datetime
    slurm_estimate: datetime | None
    console_estimate: datetime | None

    def errors(self) -> tuple[float | None, float | None]:
        return (_seconds(self.slurm_estimate, self.started_at), _seconds(self.console_estimate, self.started_at))


def _seconds(estimate: datetime | None, actual: datetime) -> float | None:
    return abs((estimate - actual).total_seconds()) if estimate else None


def submit_burst(client: SlurmClient, jobs: int, seed: int, account: str = "research") -> list[int]:
    """``jobs`` sbatch jobs of 1–4 GPUs of one type, limits of 1–3 min, each running 30–100 % of its limit."""
    chance = random.Random(seed)
    ids = []
    for _ in range(jobs):
        limit_minutes = chance.randint(1, 3)
        runs = round(limit_minutes * 60 * chance.uniform(0.3, 1.0))
        gres = f"gpu:{chance.choice(GPU_TYPES)}:{chance.randint(1, 4)}"
        out = client.commands.run("sbatch", "--parsable", "-A", account, f"--gres={gres}",
                                  f"--time={limit_minutes}", "-o", "/dev/null", "--wrap", f"sleep {runs}")
        ids.append(int(out.strip().split(";")[0]))
    return ids


def backtest(client: SlurmClient, jobs: int, seed: int, policy: str, settle_seconds: float = 10.0,
             say: Callable[[str], None] = print) -> list[Compared]:
    update_settings(executor=ExecutorKind.SLURM_OBSERVER, policy=policy)
    ids = submit_burst(client, jobs, seed)
    time.sleep(settle_seconds)  # Slurm starts what fits, and computes its estimates for the rest
    run_round()  # mirror the queue
    slurm_estimates = {job_id: job.expected_start for job_id, job in client.jobs_by_id(ids).items()
                       if job.state == "PENDING"}
    made = forecasts.refresh(timezone.now(), force=True)
    rows = made.job_forecasts.select_related("job") if made else []
    console = {int(row.job.cluster_job_id): row.estimated_start for row in rows}
    say(f"{len(slurm_estimates)} of {jobs} jobs waiting; waiting until every one has started")
    started = _wait_for_starts(client, list(slurm_estimates))
    _wait_for_ends(client, ids)  # the next seed starts on an empty cluster
    return [Compared(job_id, started[job_id], slurm_estimates[job_id], console.get(job_id))
            for job_id in sorted(slurm_estimates) if job_id in started]


def _wait_for_ends(client: SlurmClient, ids: list[int], timeout: float = 1800.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(job.state not in {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED"}
               for job in client.jobs_by_id(ids).values()):
            return
        time.sleep(2)


def _wait_for_starts(client: SlurmClient, ids: list[int], timeout: float = 1800.0) -> dict[int, datetime]:
    started: dict[int, datetime] = {}
    deadline = time.monotonic() + timeout
    while len(started) < len(ids) and time.monotonic() < deadline:
        for job_id, job in client.jobs_by_id(ids).items():
            if job.state != "PENDING" and job.started_at and job_id not in started:
                started[job_id] = job.started_at
        time.sleep(2)
    return started


def scored(compared: list[Compared]) -> list[tuple[float, float]]:
    """``(Slurm's error, the console's error)`` of each job both estimated: the two are scored on the same jobs."""
    pairs = (row.errors() for row in compared)
    return [(slurm, console) for slurm, console in pairs if slurm is not None and console is not None]


def median_errors(compared: list[Compared]) -> tuple[float | None, float | None]:
    """The median absolute start error of ``squeue --start`` and of the console, over the jobs both estimated."""
    pairs = scored(compared)
    if not pairs:
        return None, None
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
