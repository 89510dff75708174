"""A real Celery worker SIGKILLed in the middle of scheduling rounds, twenty times, on a 1,024-GPU cluster.

The worker runs ``scheduler.run_round`` sent through a real Redis against the test's
database. The test watches the round's lease: when the worker holds it (it is inside
a round), the test waits a random part of a round (seeded) and SIGKILLs the worker's
process group; every fourth kill instead lands the moment the round's transaction is
visible, while the worker tells the executor. Then it checks the database by query,
restarts the worker, and checks that the next round completes, resends the launches the
dead worker never acknowledged, and leaves every invariant intact. With ``-s`` it prints
where each kill landed.
"""

from __future__ import annotations

import random
import re
import socket
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from celery import Celery
from django.db.models import Count, Max, Sum
from django.utils import timezone

from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.speed import job_speed
from scheduler.core.types import ClusterSnapshot, GpuSlot, JobInfo, NodeInfo
from scheduler.live.config import ROUND_TASK
from scheduler.live.round import ROUND_LEASE
from scheduler.models import (
    FINISHED_STATES,
    Gpu,
    Job,
    JobState,
    Lease,
    Node,
    RoundStatus,
    SchedulerSettings,
    SchedulingRound,
    Tenant,
)

from ..round_invariants import problems, unlaunched_jobs
from .processes import Service, celery_worker, service_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

KILLS = 20
LEASE_SECONDS = 2
SPEEDUP = 100.0
NODES, GPUS_PER_NODE, JOBS = 128, 8, 1000
MODELS = {"a100": "NVIDIA A100-SXM4-80GB", "v100": "Tesla V100-SXM2-32GB"}
PROFILES = sorted(FITTED_PROFILES)


@dataclass
class KillRecord:
    """What one SIGKILL hit: inside a round (the lease still names the dead worker) or not, and where."""

    number: int
    mid_round: bool
    committed: bool  # the killed round's transaction had committed (it died telling the executor)
    unacknowledged: int  # launches left unacknowledged by the dead worker
    lease_held_s: float  # from seeing the lease taken to the kill
    typical_s: float  # the median round so far, which the random delay is a part of


@dataclass
class Campaign:
    rng: random.Random
    env: dict[str, str]
    jobs: set[int]
    round_seconds: list[float] = field(default_factory=list)  # lease-held time of rounds watched to the end
    records: list[KillRecord] = field(default_factory=list)
    progress: dict[int, float] = field(default_factory=dict)  # as last checked
    finished: set[int] = field(default_factory=set)  # as last checked


def test_sigkilled_worker_mid_round_twenty_times_loses_nothing(redis_celery_app: Celery, tmp_path: Path) -> None:
    jobs = seed_cluster(random.Random(20261129))
    campaign = Campaign(random.Random(7), service_env(tmp_path, redis_celery_app.conf.broker_url,
                        ROUND_LEASE_SECONDS=str(LEASE_SECONDS)), jobs)
    redis_celery_app.control.purge()
    worker = None
    try:
        for number in range(1, KILLS + 1):
            worker = celery_worker(f"kill{number}", campaign.env, tmp_path)
            recovery_round(redis_celery_app, campaign, worker, after_kill=number - 1)
            kill_inside_a_round(redis_celery_app, campaign, worker, number)
            worker = None
        worker = celery_worker("final", campaign.env, tmp_path)
        recovery_round(redis_celery_app, campaign, worker, after_kill=KILLS)
    finally:
        if worker:
            worker.stop()
    report(campaign)
    mid_round = sum(record.mid_round for record in campaign.records)
    # Most kills must land inside a round, or the test proves little; a busy machine may let a few miss.
    assert mid_round > KILLS // 2, f"only {mid_round} of {KILLS} kills landed inside a round: {campaign.records}"
    ok_rounds = SchedulingRound.objects.filter(status=RoundStatus.OK).count()
    assert ok_rounds >= KILLS + 1, f"{ok_rounds} rounds completed, expected at least one after every kill"
    finished = Job.objects.filter(state=JobState.SUCCEEDED).count()
    assert finished >= 50, f"only {finished} jobs finished: the cluster did not turn over during the test"


# --- the cluster --------------------------------------------------------------------


def seed_cluster(rng: random.Random) -> set[int]:
    """128 nodes × 8 GPUs (half A100, half V100), 3 tenants, 1,000 jobs; pollux, simulated executor, 100×."""
    nodes = Node.objects.bulk_create(Node(hostname=f"node-{n:03d}") for n in range(NODES))
    Gpu.objects.bulk_create(
        Gpu(node=node, index=i, uuid=f"GPU-{node.hostname}-{i}", model=MODELS["a100" if n % 2 == 0 else "v100"],
            memory_mib=32768, power_limit_w=300)
        for n, node in enumerate(nodes) for i in range(GPUS_PER_NODE)
    )
    tenants = [Tenant.objects.create(name=name, gpu_quota=quota, fair_share_weight=weight)
               for name, quota, weight in [("vision", 400, 1.0), ("language", 400, 1.0), ("research", 224, 0.5)]]
    now, rate = timezone.now(), one_gpu_rates()
    rows = []
    for number in range(JOBS):
        profile, low = rng.choice(PROFILES), rng.choice([1, 1, 1, 2, 2, 4, 8])
        seconds = rng.uniform(5, 90)  # wall seconds at its minimum GPUs, at SPEEDUP
        rows.append(Job(
            tenant=rng.choice(tenants), name=f"{profile}-{number}", workload_profile=profile,
            total_work=rate[profile] * low * seconds * SPEEDUP, min_gpus=low, max_gpus=low * rng.choice([1, 2, 4]),
            gpu_type=rng.choice(["", "", "a100", "v100"]), submitted_at=now - timedelta(seconds=rng.uniform(0, 3600)),
        ))
    Job.objects.bulk_create(rows)
    SchedulerSettings.objects.update_or_create(pk=1, defaults=dict(
        policy="pollux", round_seconds=60, simulated_speedup=SPEEDUP, restart_seconds=30.0))
    return set(Job.objects.values_list("pk", flat=True))


def one_gpu_rates() -> dict[str, float]:
    """Work units per second of each profile on one A100 (the goodput models' own speed): sizes jobs in seconds."""
    nodes = (NodeInfo("n", "a100", (GpuSlot("g"),)),)
    rates = {}
    for profile in PROFILES:
        job = JobInfo(id="1", tenant="t", submit_time=0.0, min_gpus=1, max_gpus=1, total_work=1.0, profile=profile)
        rates[profile] = job_speed(job, ClusterSnapshot(0.0, nodes, (job,), (), FITTED_PROFILES), 1)
    return rates


# --- one kill -----------------------------------------------------------------------


def lease() -> tuple[str, datetime | None]:
    row = Lease.objects.filter(name=ROUND_LEASE).values_list("holder", "expires_at").first()
    return row or ("", None)


def holder_prefix(worker: Service) -> str:
    return f"{socket.gethostname()}:{worker.pid}:"  # rounds.run_round's holder: host, pid (solo pool), nonce


def last_round_id() -> int:
    return SchedulingRound.objects.aggregate(last=Max("pk"))["last"] or 0


def recovery_round(app: Celery, campaign: Campaign, worker: Service, after_kill: int) -> None:
    """The first round on a fresh worker: it must complete and leave every launch acknowledged, the DB sound."""
    holder, expires = lease()
    while holder and expires and expires > timezone.now():  # the dead worker's lease: it expires by itself
        time.sleep(0.05)
        holder, expires = lease()
    before = last_round_id()
    app.send_task(ROUND_TASK)
    held = watch_round(worker, before, seconds=60)
    row = SchedulingRound.objects.filter(pk__gt=before).first()
    assert row is not None and row.status == RoundStatus.OK, (
        f"no round completed after kill {after_kill}: {row and (row.status, row.error)}\n{worker.tail()}")
    if held:
        campaign.round_seconds.append(held)
    assert_no_errors(worker, f"the round after kill {after_kill}")
    left = unlaunched_jobs()
    assert not left, f"after the round that followed kill {after_kill}, launches never acknowledged: {left[:20]}"
    check_database(campaign, f"after the round that followed kill {after_kill}")


def watch_round(worker: Service, after: int, seconds: float) -> float | None:
    """Wait until ``worker`` has written a round after round ``after`` and let go of the lease.

    Returns how long it was seen holding the lease (None if the round was too quick to see).
    """
    prefix, deadline = holder_prefix(worker), time.monotonic() + seconds
    taken = None
    while time.monotonic() < deadline:
        mine = lease()[0].startswith(prefix)
        if mine and taken is None:
            taken = time.monotonic()
        elif not mine and last_round_id() > after:
            return time.monotonic() - taken if taken is not None else None
        assert worker.alive(), f"the worker died by itself\n{worker.tail()}"
        time.sleep(0.002)
    raise AssertionError(f"the worker did not finish a round within {seconds} s\n{worker.tail()}")


def kill_inside_a_round(app: Celery, campaign: Campaign, worker: Service, number: int) -> None:
    """Start a round and SIGKILL the worker inside it, then check the database.

    Most kills come a random part of a typical round after the worker took the lease;
    every fourth comes the moment the round's transaction is visible, to hit the short
    stretch where the round has committed but not yet told the executor.
    """
    prefix, typical = holder_prefix(worker), statistics.median(campaign.round_seconds or [0.3])
    after_commit = number % 4 == 0
    # Up to 0.7 of the median: it is measured on each worker's first round, and later rounds run warmer.
    delay = 0.0 if after_commit else campaign.rng.uniform(0.0, 0.7) * typical
    before = last_round_id()
    app.send_task(ROUND_TASK)
    deadline = time.monotonic() + 60
    while not lease()[0].startswith(prefix):
        assert time.monotonic() < deadline and worker.alive(), f"kill {number}: no round started\n{worker.tail()}"
        time.sleep(0.002)
    taken = time.monotonic()
    while after_commit and last_round_id() == before and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(delay)
    worker.kill()
    holder = lease()[0]
    record = KillRecord(number, holder.startswith(prefix), last_round_id() > before, len(unlaunched_jobs()),
                        round(time.monotonic() - taken, 3), round(typical, 3))
    campaign.records.append(record)
    assert_no_errors(worker, f"kill {number}")
    check_database(campaign, f"after kill {number} ({record})")


def assert_no_errors(worker: Service, when: str) -> None:
    """Nothing logged at ERROR or worse (Django's and Celery's formats), and no traceback."""
    error = re.search(r"\b(ERROR|CRITICAL)\b|Traceback", worker.log.read_text(errors="replace"))
    assert error is None, f"{when}: the worker logged {error and error.group()}\n{worker.tail()}"


def check_database(campaign: Campaign, when: str) -> None:
    """The invariants, plus: no job's progress went backwards and no finished job came back."""
    found = problems(campaign.jobs)
    rows = dict(Job.objects.values_list("pk", "progress"))
    found += [f"job {pk} progress went back from {old} to {rows[pk]}" for pk, old in campaign.progress.items()
              if rows.get(pk, old) < old - 1e-6]
    finished = set(Job.objects.filter(state__in=FINISHED_STATES).values_list("pk", flat=True))
    came_back = campaign.finished - finished
    found += [f"job {pk} was finished and is {Job.objects.get(pk=pk).state} again" for pk in sorted(came_back)]
    campaign.progress, campaign.finished = rows, finished
    assert not found, f"{when}: {len(found)} problem(s):\n" + "\n".join(found[:30])


def report(campaign: Campaign) -> None:
    """One line for the test log (-rA or -s): how the kills landed and what a round cost."""
    records = campaign.records
    done = SchedulingRound.objects.filter(status=RoundStatus.OK).aggregate(
        rounds=Count("pk"), starts=Sum("starts"), rescales=Sum("rescales"), preemptions=Sum("preemptions"),
        finished=Sum("finished"))
    print(
        f"\n{len(records)} kills: {sum(r.mid_round for r in records)} inside a round "
        f"({sum(r.mid_round and not r.committed for r in records)} before its commit, "
        f"{sum(r.mid_round and r.committed for r in records)} after it, while telling the executor); "
        f"{sum(r.unacknowledged for r in records)} launches left unacknowledged and resent; "
        f"round (lease held) median {statistics.median(campaign.round_seconds):.2f} s, "
        f"max {max(campaign.round_seconds):.2f} s; "
        f"{done['rounds']} rounds completed with {done['starts']} starts, {done['rescales']} rescales, "
        f"{done['preemptions']} preemptions; {Job.objects.filter(state=JobState.SUCCEEDED).count()} jobs finished"
    )
    for record in records:
        print(f"  {record}")
