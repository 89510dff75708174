"""The console's start estimates beside Slurm's own (``squeue --start``), on a real Slurm queue.

A backtest for the lab (``manage.py slurm_forecast_backtest``). Its workload is what Slurm users do
(Tsafrir, Etsion and Feitelson, IEEE TPDS 2007): each user runs a few kinds of job again and again — the same
script under the same name, GPUs and time limit, running about as long each time — and asks for a time limit far
longer than the job needs. Per seed:

1. **history**: each user's kinds each run once (``sbatch`` as that user, through slurmrestd), to the end;
2. **burst**: ``jobs`` more runs of those kinds, in a random order, more GPUs than there are;
3. once Slurm's backfill has planned them (``settle_seconds``), both forecasts of every job still waiting are
   taken at one moment: Slurm's expected start (what ``squeue --start`` prints) and the console's (observing:
   ``slurm-observer``; its forecast models Slurm's backfill by the time limits, with each job's run predicted from
   its owner's finished runs of that name);
4. when every job has started, each estimate is compared with the real start: the median absolute error of each,
   over the jobs both estimated, in seconds.
"""

from __future__ import annotations

import random
import statistics
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from scheduler.backends.slurm.client import JobSpec, SlurmClient
from scheduler.forecasting import forecasts
from scheduler.live.config import update_settings
from scheduler.live.round import run_round
from scheduler.models import ExecutorKind

GPU_TYPES = ("a100", "v100")
KINDS_PER_USER = 3
MODELS = ("bert", "resnet", "gpt", "vit", "yolo", "unet", "deeplab", "clip", "whisper", "swin", "detr", "mamba")
LIMIT_MINUTES = (1, 3)  # each kind's time limit
# What a kind really runs, as a share of its limit: users ask for 1.4–5 times what their jobs need (Tsafrir et
# al. measured a median of about 3 on production logs); and each run of a kind varies by this much around it.
USED_SHARE = (0.2, 0.7)
RUN_JITTER = 0.1
OBSERVE_SECONDS = 5.0  # between the observer's rounds while the backtest waits
SETTLE_SECONDS = 35.0  # Slurm's backfill plans every 30 s (bf_interval): its estimates exist after one pass


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


@dataclass(frozen=True)
class Kind:
    """A job a user runs again and again: its name, account, GPUs and limit, and how long it runs."""

    user: str
    account: str
    name: str
    gres: str
    limit_minutes: int
    typical_seconds: float

    def run_seconds(self, chance: random.Random) -> int:
        """One run's length: about its typical length, never past its limit (it would be killed)."""
        seconds = self.typical_seconds * chance.uniform(1 - RUN_JITTER, 1 + RUN_JITTER)
        return max(5, min(round(seconds), self.limit_minutes * 60 - 5))


def seed_tag(seed: int) -> str:
    """The seed in letters, so that runs of one kind share a name across its runs but not across seeds (the
    runtime predictor folds digits: ``bert-7`` and ``bert-8`` would be one name)."""
    letters, tag = string.ascii_lowercase, ""
    while True:
        seed, digit = divmod(seed, 26)
        tag = letters[digit] + tag
        if seed == 0:
            return tag


def kinds_of(users: Sequence[tuple[str, str]], seed: int) -> list[Kind]:
    """``KINDS_PER_USER`` kinds for each ``(user, account)``, drawn from ``seed``."""
    chance = random.Random(seed)
    models = chance.sample(MODELS, len(users) * KINDS_PER_USER)
    kinds = []
    for number, model in enumerate(models):
        user, account = users[number // KINDS_PER_USER]
        limit = chance.randint(*LIMIT_MINUTES)
        kinds.append(Kind(user, account, f"{model}-{seed_tag(seed)}", f"gpu:{chance.choice(GPU_TYPES)}:"
                          f"{chance.randint(1, 4)}", limit, limit * 60 * chance.uniform(*USED_SHARE)))
    return kinds


def burst_of(kinds: Sequence[Kind], jobs: int, seed: int) -> list[tuple[Kind, int]]:
    """``jobs`` runs of the kinds in a random order: (kind, seconds it runs)."""
    chance = random.Random(seed * 7919 + 1)
    return [(kind, kind.run_seconds(chance)) for kind in (chance.choice(kinds) for _ in range(jobs))]


def backtest_users(client: SlurmClient) -> list[tuple[str, str]]:
    """``(user, account)`` pairs the burst submits as: the lab's users (``SLURM_DEMO_OWNERS``), each in its first
    account by name; else the console's own Slurm user in the first account Slurm has."""
    pairs = []
    for user in settings.SLURM_DEMO_OWNERS:
        accounts = sorted(account for account, _ in client.rest.associations(user))
        if accounts:
            pairs.append((user, accounts[0]))
    return pairs or [("", sorted(client.rest.accounts())[0])]


def submit(client: SlurmClient, kind: Kind, seconds: int) -> int:
    """One run of ``kind`` as its user: submitted held through slurmrestd (as the console submits), released."""
    spec = JobSpec(name=kind.name, account=kind.account, script=f"#!/bin/sh\nsleep {seconds}\n", comment="",
                   working_directory="/tmp", output="/dev/null", gres=kind.gres, time_limit_minutes=kind.limit_minutes,
                   user=kind.user)
    job_id = client.rest.submit(spec)
    client.rest.release(job_id)
    return job_id


def backtest(client: SlurmClient, jobs: int, seed: int, settle_seconds: float = SETTLE_SECONDS,
             say: Callable[[str], None] = print) -> list[Compared]:
    """One seed's backtest (module docstring)."""
    update_settings(executor=ExecutorKind.SLURM_OBSERVER)
    kinds = kinds_of(backtest_users(client), seed)
    say(f"history: {len(kinds)} kinds of job, each run once")
    chance = random.Random(-seed)
    history = [submit(client, kind, kind.run_seconds(chance)) for kind in kinds]
    _wait_for_ends(client, history)
    run_round()  # the observer mirrors the finished runs: the predictor's history
    ids = [submit(client, kind, seconds) for kind, seconds in burst_of(kinds, jobs, seed)]
    time.sleep(settle_seconds)  # Slurm starts what fits, and plans the rest
    run_round()  # mirror the queue
    slurm_estimates = {job_id: job.expected_start for job_id, job in client.jobs_by_id(ids).items()
                       if job.state == "PENDING"}
    made = forecasts.refresh(timezone.now(), force=True)
    rows = made.job_forecasts.select_related("job") if made else []
    console = {int(row.job.cluster_job_id): row.estimated_start for row in rows}
    say(f"{len(slurm_estimates)} of {jobs} jobs waiting; waiting until every one has started")
    started = _wait_for_starts(client, list(slurm_estimates))
    _wait_for_ends(client, ids)  # the next seed starts on an empty cluster
    run_round()  # ... and its history is mirrored
    return [Compared(job_id, started[job_id], slurm_estimates[job_id], console.get(job_id))
            for job_id in sorted(slurm_estimates) if job_id in started]


def _wait_for_ends(client: SlurmClient, ids: list[int], timeout: float = 1800.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(job.state not in {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED"}
               for job in client.jobs_by_id(ids).values()):
            return
        _observe_a_while()


def _observe_a_while() -> None:
    """The observer's rounds go on meanwhile, as the beat runs them live: the console sees each job end."""
    run_round()
    time.sleep(OBSERVE_SECONDS)


def _wait_for_starts(client: SlurmClient, ids: list[int], timeout: float = 1800.0) -> dict[int, datetime]:
    started: dict[int, datetime] = {}
    deadline = time.monotonic() + timeout
    while len(started) < len(ids) and time.monotonic() < deadline:
        for job_id, job in client.jobs_by_id(ids).items():
            if job.state != "PENDING" and job.started_at and job_id not in started:
                started[job_id] = job.started_at
        _observe_a_while()
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
