"""``bench_slurm``: live rounds and the observer's mirror against a real Slurm (the lab), timed.

Two figures, each in a throwaway database beside the configured one (``benchdb.throwaway_database``):

* **a live round with the console's queue held in Slurm**: ``jobs`` rigid console jobs (1–4 GPUs, an hour of
  ``sleep``) on the lab's nodes under the ``slurm`` back-end. The first rounds submit them held
  (``QUEUE_SUBMITS`` a round), a few start; then ``rounds`` more rounds are timed: reading Slurm's jobs and nodes,
  the snapshot, the policy, the writes and what the executor sends. A rigid policy (FIFO by default) resizes
  nothing, so no round waits for a requeue.
* **the observer's mirror**: ``mirror`` jobs in ``squeue`` (submitted held through slurmrestd, eight at a time)
  mirrored by one ``slurm-observer`` round, then again (each row updated); and ``mirror`` finished runs of
  ``sacct`` (one job array of that many tasks, each ``true``) read and mirrored as ``slurm_import_history`` does.

Every job it made is cancelled at the end. It refuses a lab that has jobs already: the figures would not be its own.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduler.backends.slurm.client import JobSpec, SlurmClient
from scheduler.backends.slurm.executor import ENDED
from scheduler.backends.slurm.observer import history_jobs, mirror_slurm_jobs
from scheduler.bounds import MAX_GPUS
from scheduler.live.config import update_settings
from scheduler.live.round import run_round
from scheduler.models import ExecutorKind, Job, JobState, SchedulingRound, Tenant

MIRROR_NAME = "bench-mirror"
HISTORY_NAME = "bench-history"
HISTORY_HOURS = 6  # the window of sacct read, and in which an earlier run's history is reused
SUBMITTERS = 8  # slurmrestd answers this many submissions at once


@contextmanager
def throwaway_job_dir() -> Iterator[Path]:
    """``JOB_DIR`` in a new folder under ``VAR_DIR`` (the lab's nodes see the checkout), removed afterwards."""
    saved = settings.JOB_DIR
    folder = Path(tempfile.mkdtemp(prefix="bench-slurm-jobs-", dir=settings.VAR_DIR))
    folder.chmod(0o755)  # the jobs' owners enter it
    settings.JOB_DIR = folder
    try:
        yield folder
    finally:
        settings.JOB_DIR = saved
        shutil.rmtree(folder, ignore_errors=True)


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def timed(step: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = step()
    return time.perf_counter() - started, result


def refuse_a_busy_lab(client: SlurmClient) -> None:
    """An idle lab only: jobs Slurm still lists, even ended ones (it forgets them ``MinJobAge`` after), would be
    mirrored and timed too."""
    listed = client.rest.jobs()
    if listed:
        raise RuntimeError(f"Slurm lists {len(listed)} jobs ({sum(job.state not in ENDED for job in listed)} not "
                           "ended): bench_slurm needs a lab that lists none (restart it, or wait until Slurm forgets "
                           "the ended ones)")


# --- a live round with the console's queue held in Slurm ---------------------------------------------------------


def seed_console_jobs(jobs: int, accounts: Iterable[str], seed: int) -> None:
    chance = random.Random(seed)
    tenants = [Tenant.objects.get_or_create(name=name)[0] for name in accounts]
    now = timezone.now()
    Job.objects.bulk_create((
        Job(tenant=chance.choice(tenants), name=f"bench-{number}", workload_profile="", total_work=3600.0,
            min_gpus=(gpus := chance.randint(1, 4)), max_gpus=gpus, expected_seconds=3600.0,
            command="sleep 3600", submitted_at=now - timedelta(seconds=jobs - number))
        for number in range(jobs)), batch_size=500)


def round_with_queue(client: SlurmClient, jobs: int, rounds: int, policy: str, seed: int) -> dict[str, Any]:
    update_settings(executor=ExecutorKind.SLURM, policy=policy)
    seed_console_jobs(jobs, sorted(client.rest.accounts() - {"root"}), seed)
    warm_up: list[float] = []
    while Job.objects.filter(state=JobState.PENDING, cluster_job_id="").exists() and len(warm_up) < jobs:
        warm_up.append(timed(run_round)[0])
    held = sum(1 for job in client.rest.jobs() if job.held)
    walls, rows = [], []
    for _ in range(rounds):
        wall, row = timed(run_round)
        walls.append(wall)
        rows.append(row)
    ok = [row for row in rows if row is not None]
    return {
        "jobs": jobs, "held_in_slurm": held, "running": Job.objects.filter(state=JobState.RUNNING).count(),
        "submitting_rounds": len(warm_up), "submitting_s": round(sum(warm_up), 1),
        "rounds": rounds, "median_ms": ms(statistics.median(walls)), "max_ms": ms(max(walls)),
        "snapshot_ms": round(statistics.median(row.snapshot_ms or 0 for row in ok), 1),
        "policy_ms": round(statistics.median(row.policy_ms or 0 for row in ok), 1),
        "write_ms": round(statistics.median(row.write_ms or 0 for row in ok), 1),
    }


# --- the observer's mirror ---------------------------------------------------------------------------------------


def submit_held(client: SlurmClient, count: int, account: str) -> float:
    """``count`` held one-GPU jobs, eight submissions at a time; the seconds it took."""
    spec = JobSpec(name=MIRROR_NAME, account=account, script="#!/bin/sh\ntrue\n", comment="", working_directory="/tmp",
                   output="/dev/null", gres="gpu:1", time_limit_minutes=10)
    started = time.perf_counter()
    with ThreadPoolExecutor(SUBMITTERS) as pool:
        list(pool.map(lambda _: client.rest.submit(spec), range(count)))
    return time.perf_counter() - started


def run_history(client: SlurmClient, count: int, account: str, timeout: float = 3600.0) -> float | None:
    """``count`` finished runs in ``sacct``: one array of that many one-GPU ``true`` tasks, waited for; the seconds
    it took, or None when the lab's accounting holds them already (from an earlier run of the bench)."""
    since = timezone.now() - timedelta(hours=HISTORY_HOURS)
    if _accounted(client, since) >= count:
        return None
    started = time.perf_counter()
    client.commands.run("sbatch", "--parsable", "-A", account, "-J", HISTORY_NAME, f"--array=0-{count - 1}",
                        "--gres=gpu:1", "--time=1", "-o", "/dev/null", "--wrap", "true")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Ended, and in the accounting: slurmctld sends the records to slurmdbd behind the jobs' ends.
        if _accounted(client, since) >= count:
            return time.perf_counter() - started
        time.sleep(5)
    raise RuntimeError(f"the {count} history runs did not end within {timeout:g} s")


def _accounted(client: SlurmClient, since: datetime) -> int:
    """Runs of the bench's history that ``sacct`` has as completed since ``since``."""
    lines = client.commands.run("sacct", "-X", "-n", "-P", "--name", HISTORY_NAME, "-S",
                                since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"), "-o", "State").split()
    return sum(1 for state in lines if state == "COMPLETED")


def mirror(client: SlurmClient, count: int) -> dict[str, Any]:
    account = sorted(client.rest.accounts() - {"root"})[0]
    update_settings(executor=ExecutorKind.SLURM_OBSERVER)
    submitted = submit_held(client, count, account)
    first, _ = timed(run_round)
    again, _ = timed(run_round)
    mirrored = Job.objects.filter(name=MIRROR_NAME).count()
    cancel_named(client, MIRROR_NAME)
    history_made = run_history(client, count, account)
    since = timezone.now() - timedelta(hours=HISTORY_HOURS)
    read, runs = timed(lambda: client.commands.accounting(since, timezone.now()))
    jobs = [job for job in history_jobs(runs) if job.name == HISTORY_NAME and 0 < job.gpus <= MAX_GPUS
            and job.started_at is not None]
    Job.objects.all().delete()
    stored, _ = timed(lambda: _mirror_all(jobs))
    return {
        "squeue_jobs": count, "submitting_s": round(submitted, 1), "mirrored": mirrored,
        "first_round_ms": ms(first), "next_round_ms": ms(again),
        "sacct_runs": len(jobs),
        "running_history_s": None if history_made is None else round(history_made, 1), "sacct_read_ms": ms(read),
        "history_mirror_ms": ms(stored), "history_total_ms": ms(read + stored),
    }


def _mirror_all(jobs: list[Any]) -> int:
    with transaction.atomic():
        return mirror_slurm_jobs(jobs, timezone.now())


def cancel_named(client: SlurmClient, name: str) -> None:
    client.commands.run("scancel", "-n", name)


def cancel_console_jobs(client: SlurmClient) -> None:
    ids = [job.id for job in client.rest.jobs() if job.console_job_id is not None and job.state not in ENDED]
    for start in range(0, len(ids), 500):
        client.commands.run("scancel", *map(str, ids[start:start + 500]))


def clear() -> None:
    for model in (SchedulingRound, Job):
        model.objects.all().delete()
