"""The demo cluster of ``make run``: inventory, tenants and a real trace arriving live.

Jobs come from the Pollux "realistic" workload (real submission times and requested
GPUs, from Philly) when ``TRACES_DIR`` has it; elsewhere from a seeded generator whose
application mix and GPU requests are those of the same eight workloads. The simulated
executor runs them under Pollux, ``DEMO_SPEEDUP`` times faster than the wall. Seeding is
idempotent: it only adds what is missing.
"""

from __future__ import annotations

import random
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from scheduler.core.types import TenantInfo
from scheduler.sim.records import WorkloadJob
from scheduler.sim.traces import TraceJob, load_pollux_workload
from scheduler.sim.workload import COMPLETION_PROGRESS, load_completion_progress
from telemetry.schedule import sync_simulated_schedule

from . import inventory
from .jobs import verbs
from .models import DemoFeed, Job, Node, Tenant


@dataclass(frozen=True)
class GpuType:
    prefix: str  # of its nodes' hostnames
    model: str
    memory_mib: int
    power_limit_w: int
    power_min_w: int  # the lowest limit NVML accepts on this board (its default and maximum: power_limit_w)


A100 = GpuType("a100", "NVIDIA A100-SXM4-80GB", 81920, 400, 100)
V100 = GpuType("v100", "Tesla V100-SXM2-32GB", 32768, 300, 150)
NODE_TYPES = [(A100, 8), (V100, 8)]  # 16 nodes × 8 GPUs
GPUS_PER_NODE = 8
TENANTS = [("vision", 48, 1.0), ("language", 48, 1.0), ("research", 32, 0.5)]

# (application, GPUs requested) → jobs, over pollux/workloads-realistic/workload-1..8.
REALISTIC_MIX = {
    ("ncf", 1): 495, ("cifar10", 1): 487, ("deepspeech2", 1): 105, ("bert", 1): 84,
    ("yolov3", 1): 28, ("yolov3", 4): 19, ("imagenet", 8): 17, ("yolov3", 8): 7,
    ("imagenet", 16): 7, ("ncf", 4): 6, ("cifar10", 4): 6, ("yolov3", 2): 4,
    ("deepspeech2", 4): 4, ("imagenet", 32): 2, ("deepspeech2", 8): 2, ("cifar10", 8): 2,
    ("bert", 4): 2, ("yolov3", 16): 1, ("ncf", 8): 1,
}
FIRST_WINDOW_SECONDS = 3600


# The demo runs the trace this many times faster than the wall, under an elastic policy,
# so that an operator sees jobs start, rescale and finish within minutes.
DEMO_SPEEDUP = 10.0
# The trace was written for Pollux's 64 T4 GPUs; our 128 A100/V100 would sit idle at its
# pace. Arrivals come this many times faster still, so GPUs are contended and rescaled.
DEMO_LOAD = 6.0
# The best policy measured on the demo's mixed A100 + V100 cluster with its trace at DEMO_LOAD (a replay through
# the simulator: average JCT 575 s under sia-profiled, 736 s sia, 792 s pollux, 4,364 s tiresias).
DEMO_POLICY = "sia-profiled"
FEED_TASK = "scheduler.feed_demo"
FEED_SCHEDULE_NAME = "demo-feed"
FEED_EVERY_SECONDS = 30
MAX_JOBS_PER_FEED = 50
ELASTIC_CAP = 32  # after a long stop the demo catches up gradually, not in one flood


def seed_demo(traces_dir: Path, now: datetime, seed: int = 0) -> dict[str, int]:
    """Create the demo inventory, tenants, scheduler settings and arrivals; returns what was added.

    The arrivals replay a trace (``DemoFeed``) whose first hour is submitted at once,
    already compressed ``DEMO_SPEEDUP × DEMO_LOAD`` times; beat's ``feed_demo`` submits the rest as
    the clock reaches them, looping the trace so the demo cluster never runs dry.
    """
    nodes = _seed_inventory()
    tenants = _seed_tenants()
    sync_simulated_schedule()  # no node agents here: beat simulates every GPU's telemetry
    jobs = 0
    if not DemoFeed.objects.exists() and not Job.objects.exists():
        trace = _trace_file(traces_dir)
        arrivals = DEMO_SPEEDUP * DEMO_LOAD
        started = now - timedelta(seconds=FIRST_WINDOW_SECONDS / arrivals)
        DemoFeed.objects.create(trace=str(trace or GENERATOR), started_at=started, speedup=arrivals)
        _configure_demo_scheduler()
        jobs = feed_demo(traces_dir, now, seed, limit=None)
    return {"nodes": nodes, "tenants": tenants, "jobs": jobs}


GENERATOR = "generator"


def _trace_file(traces_dir: Path) -> Path | None:
    workload = traces_dir / "pollux" / "workloads-realistic" / "workload-1.csv"
    return workload if workload.exists() else None


def _configure_demo_scheduler() -> None:
    from .live.config import update_settings

    update_settings(
        policy=DEMO_POLICY, round_seconds=settings.DEMO_ROUND_SECONDS, simulated_speedup=DEMO_SPEEDUP
    )
    every, _ = IntervalSchedule.objects.get_or_create(every=FEED_EVERY_SECONDS, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.update_or_create(
        name=FEED_SCHEDULE_NAME, defaults={"task": FEED_TASK, "interval": every, "args": "[]"}
    )


def feed_demo(traces_dir: Path, now: datetime, seed: int = 0, limit: int | None = MAX_JOBS_PER_FEED) -> int:
    """Submit the demo trace's jobs whose (sped-up) arrival time has come; returns how many."""
    with transaction.atomic():
        feed = DemoFeed.objects.select_for_update().first()
        if feed is None:
            return 0
        trace, progress = _demo_trace(traces_dir, feed.trace, seed)
        span = trace[-1].submit_seconds + 60.0  # one loop of the trace, in trace seconds
        elapsed = (now - feed.started_at).total_seconds() * feed.speedup
        tenants = {tenant.name: tenant for tenant in Tenant.objects.all()}
        added = 0
        while limit is None or added < limit:
            loop, job = divmod(feed.submitted, len(trace))
            arrival = loop * span + trace[job].submit_seconds
            if arrival >= elapsed:  # the first hour is [0, 3600): an arrival exactly now waits
                break
            at = feed.started_at + timedelta(seconds=arrival / feed.speedup)
            _submit(trace[job], loop, tenants[_tenant_for(trace[job].name)], progress[trace[job].application], at)
            feed.submitted, added = feed.submitted + 1, added + 1
        feed.save(update_fields=["submitted"])
    return added


def wall_clock_replay(traces_dir: Path, seed: int = 0) -> tuple[list[WorkloadJob], tuple[TenantInfo, ...]]:
    """One loop of the demo's jobs and its tenants as the simulator can replay them on the demo's wall clock, the
    one its rounds run on: arriving ``DEMO_SPEEDUP × DEMO_LOAD`` times faster than the trace, with
    1/``DEMO_SPEEDUP`` of their work (the simulated executor runs jobs that much faster), elastic and split over
    tenants as ``feed_demo`` submits them. Restart delays shrink alike (``live.config.scheduling_config``)."""
    trace = _trace_file(traces_dir)
    jobs, progress = _demo_trace(traces_dir, str(trace or GENERATOR), seed)
    arrivals = DEMO_SPEEDUP * DEMO_LOAD
    workload = [
        WorkloadJob(job.name, job.submit_seconds / arrivals, _tenant_for(job.name), 1, elastic_limit(job.num_gpus),
                    progress[job.application] / DEMO_SPEEDUP, job.application)
        for job in jobs
    ]
    return workload, tuple(TenantInfo(name, quota, weight) for name, quota, weight in TENANTS)


def _demo_trace(traces_dir: Path, trace: str, seed: int) -> tuple[list[TraceJob], Mapping[str, float]]:
    progress: Mapping[str, float]
    if trace != GENERATOR and Path(trace).exists():
        jobs, progress = load_pollux_workload(Path(trace)), load_completion_progress(traces_dir)
    else:
        jobs, progress = generate_jobs(seed), COMPLETION_PROGRESS
    return sorted(jobs, key=lambda job: (job.submit_seconds, job.name)), progress


def _seed_inventory() -> int:
    existing = set(Node.objects.values_list("hostname", flat=True))
    seeded = set()
    for gpu_type, count in NODE_TYPES:
        for number in range(count):
            hostname = f"{gpu_type.prefix}-{number:02d}"
            inventory.register_node(hostname, [_gpu_spec(hostname, i, gpu_type) for i in range(GPUS_PER_NODE)])
            seeded.add(hostname)
    return len(seeded - existing)


def _gpu_spec(hostname: str, index: int, gpu_type: GpuType) -> inventory.GpuSpec:
    # Stable UUIDs so that re-seeding updates rather than duplicates.
    stable = uuid.uuid5(uuid.NAMESPACE_DNS, f"{hostname}.gpu{index}.cluster-ops.demo")
    limit = gpu_type.power_limit_w
    return inventory.GpuSpec(index, f"GPU-{stable}", gpu_type.model, gpu_type.memory_mib, limit,
                            power_min_w=gpu_type.power_min_w, power_max_w=limit, power_default_w=limit)


def _seed_tenants() -> int:
    created = 0
    for name, quota, weight in TENANTS:
        _, was_created = Tenant.objects.get_or_create(
            name=name, defaults={"gpu_quota": quota, "fair_share_weight": weight}
        )
        created += was_created
    return created


def _submit(job: TraceJob, loop: int, tenant: Tenant, total_work: float, at: datetime) -> None:
    verbs.submit_job(
        tenant=tenant, name=job.name if loop == 0 else f"{job.name}~{loop}", workload_profile=job.application,
        total_work=total_work, min_gpus=1, max_gpus=elastic_limit(job.num_gpus), submitted_at=at,
    )


def elastic_limit(requested: int) -> int:
    """Every demo job is elastic, as in Pollux's evaluation: from 1 GPU up to 4× its request (≤ 32)."""
    return min(4 * requested, ELASTIC_CAP)


def _tenant_for(job_name: str) -> str:
    """A stable, seed-free split of jobs over tenants, weighted by quota."""
    bucket = zlib.crc32(job_name.encode()) % sum(quota for _, quota, _ in TENANTS)
    for name, quota, _ in TENANTS:
        if bucket < quota:
            return name
        bucket -= quota
    raise AssertionError("unreachable: buckets cover the quota sum")


def generate_jobs(seed: int, count: int = 160, span_seconds: float = 8 * 3600) -> list[TraceJob]:
    """Jobs with the realistic workloads' application mix and requests, Poisson arrivals."""
    rng = random.Random(seed)
    kinds, weights = zip(*REALISTIC_MIX.items(), strict=True)
    arrivals = sorted(rng.uniform(0, span_seconds) for _ in range(count))
    return [
        TraceJob(name=f"{app}-{i}", submit_seconds=round(t), application=app, num_gpus=gpus)
        for i, (t, (app, gpus)) in enumerate(zip(arrivals, rng.choices(kinds, weights, k=count), strict=True))
    ]
