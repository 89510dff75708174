"""A small cluster with a day of history, for the Fairness, Jobs and Energy what-if pages and their tests.

Two tenants (vision: quota 8, weight 1; language: quota 8, weight 2), a node of 8 A100s and a node of 8 V100s;
finished jobs of both tenants over the last day with their allocations, usage hours and audit events; two running
jobs (one of each tenant) and one pending job waiting for A100s. Rows are written directly: this is history, not
something a round would decide now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler import inventory
from scheduler.models import Allocation, Gpu, Job, JobState, RescaleEvent, RescaleKind, Tenant
from telemetry.models import JobUsageHour
from telemetry.rollups import HOURS, floor

A100 = "NVIDIA A100-SXM4-80GB"
V100 = "Tesla V100-SXM2-32GB"
ROUGH_SPEED = {"cifar10": 195.0, "ncf": 13_000.0}  # iterations/s of a job on its fair share of these 16 GPUs


@dataclass
class History:
    now: datetime
    vision: Tenant
    language: Tenant
    a100: list[Gpu]
    v100: list[Gpu]
    finished: list[Job] = field(default_factory=list)
    running: list[Job] = field(default_factory=list)
    pending: Job | None = None


def gpus(host: str, model: str, watts: int) -> list[Gpu]:
    specs = [inventory.GpuSpec(i, f"GPU-{host}-{i}", model, 81920, watts) for i in range(8)]
    return list(inventory.register_node(host, specs).gpus.order_by("index"))


def seed_history(now: datetime, finished_per_tenant: int = 6) -> History:
    vision = Tenant.objects.get_or_create(name="vision", defaults={"gpu_quota": 8, "fair_share_weight": 1.0})[0]
    language = Tenant.objects.get_or_create(name="language", defaults={"gpu_quota": 8, "fair_share_weight": 2.0})[0]
    history = History(now, vision, language, gpus("node-a100", A100, 400), gpus("node-v100", V100, 300))
    for i in range(finished_per_tenant):
        for tenant, pool, profile in ((vision, history.a100, "cifar10"), (language, history.v100, "ncf")):
            submitted = now - timedelta(hours=20 - 3 * i, minutes=7 * (tenant == language))
            history.finished.append(finished_job(tenant, pool[:2 + i % 3], profile, submitted, i))
    history.running = [
        running_job(vision, "big-vision", history.a100[:6], now - timedelta(hours=3), now, priority=0, min_gpus=2),
        running_job(language, "lang-train", history.a100[6:] + history.v100[:4], now - timedelta(hours=2), now,
                    priority=1, min_gpus=1),
    ]
    history.pending = Job.objects.create(
        tenant=language, name="waiting-bert", workload_profile="bert", total_work=5000, min_gpus=4, max_gpus=8,
        gpu_type="a100", submitted_at=now - timedelta(minutes=40),
        pending_reason="waiting: needs 4 a100 GPUs, 0 free; 1 job ahead",
    )
    return history


def finished_job(tenant: Tenant, pool: list[Gpu], profile: str, submitted: datetime, i: int) -> Job:
    started = submitted + timedelta(minutes=10 + 5 * i)
    finished = started + timedelta(hours=1, minutes=30)
    # Work that takes roughly JCT ÷ ρ on a fair share, ρ from 0.6 to 3: a spread for the ρ histogram.
    work = ROUGH_SPEED[profile] * (finished - submitted).total_seconds() / (0.6 + 0.45 * i)
    job = Job.objects.create(
        tenant=tenant, name=f"{tenant.name}-{profile}-{i}", workload_profile=profile, total_work=work,
        min_gpus=1, max_gpus=4, state=JobState.SUCCEEDED, submitted_at=submitted, started_at=started,
        finished_at=finished, progress=work, attained_gpu_seconds=len(pool) * 5400.0,
    )
    middle = started + timedelta(minutes=45)
    hold(job, pool[:1], started, middle)
    event(job, started, RescaleKind.START, 0, 1, "started: first in arrival order")
    if i == 2 and tenant.name == "vision":  # preempted for a while, then restarted from its checkpoint
        back = middle + timedelta(minutes=20)
        event(job, middle, RescaleKind.PREEMPT, 1, 0,
              "preempted: GPUs reclaimed by tenant language (within its quota) from vision")
        hold(job, pool, back, finished)
        event(job, back, RescaleKind.START, 0, len(pool), f"resumed on {len(pool)} GPUs from its checkpoint")
    else:
        hold(job, pool, middle, finished)  # grew from 1 GPU to len(pool) half-way
        event(job, middle, RescaleKind.RESCALE, 1, len(pool), f"resized 1→{len(pool)} GPUs: spare GPUs")
    event(job, finished, RescaleKind.FINISH, len(pool), 0, "finished: all work done")
    return job


def running_job(tenant: Tenant, name: str, pool: list[Gpu], started: datetime, now: datetime, *, priority: int,
                min_gpus: int) -> Job:
    job = Job.objects.create(
        tenant=tenant, name=name, workload_profile="cifar10", total_work=50_000.0, min_gpus=min_gpus,
        max_gpus=len(pool), priority=priority, state=JobState.RUNNING, submitted_at=started - timedelta(minutes=5),
        started_at=started, progress=1000.0,
    )
    hold(job, pool, started, None, until=now)
    event(job, started, RescaleKind.START, 0, len(pool), "started: fits now")
    return job


def hold(job: Job, pool: list[Gpu], start: datetime, end: datetime | None, until: datetime | None = None) -> None:
    """Allocations of ``pool`` over [start, end) (open if no end) and their usage hours up to ``end`` or ``until``."""
    Allocation.objects.bulk_create(Allocation(job=job, gpu=gpu, started_at=start, ended_at=end) for gpu in pool)
    hour, stop = floor(start, HOURS.width), end or until or start
    while hour < stop:
        seconds = (min(stop, hour + HOURS.width) - max(start, hour)).total_seconds() * len(pool)
        if seconds > 0:
            row, _ = JobUsageHour.objects.get_or_create(job=job, start=hour)
            JobUsageHour.objects.filter(pk=row.pk).update(
                allocated_seconds=row.allocated_seconds + seconds, energy_j=row.energy_j + seconds * 300
            )
        hour += HOURS.width


def event(job: Job, at: datetime, kind: str, before: int, after: int, reason: str) -> None:
    RescaleEvent.objects.create(job=job, at=at, kind=kind, from_gpus=before, to_gpus=after, reason=reason)
