"""The demo cluster of ``make run``: inventory, tenants and the first hour of a real trace.

Jobs come from the Pollux "realistic" workload (real submission times and requested
GPUs, from Philly) when ``TRACES_DIR`` has it; elsewhere from a seeded generator whose
application mix and GPU requests are those of the same eight workloads. Seeding is
idempotent: it only adds what is missing.
"""

from __future__ import annotations

import logging
import random
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.db import transaction

from scheduler.sim.traces import TraceJob, load_pollux_workload
from scheduler.sim.workload import COMPLETION_PROGRESS, load_completion_progress

from . import services
from .models import Job, Node, Tenant

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GpuType:
    prefix: str  # of its nodes' hostnames
    model: str
    memory_mib: int
    power_limit_w: int


A100 = GpuType("a100", "NVIDIA A100-SXM4-80GB", 81920, 400)
V100 = GpuType("v100", "Tesla V100-SXM2-32GB", 32768, 300)
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


def seed_demo(traces_dir: Path, now: datetime, seed: int = 0) -> dict[str, int]:
    """Create the demo inventory, tenants and jobs; returns what was added."""
    nodes = _seed_inventory()
    tenants = _seed_tenants()
    jobs = 0 if Job.objects.exists() else _seed_jobs(traces_dir, now, seed)
    return {"nodes": nodes, "tenants": tenants, "jobs": jobs}


def _seed_inventory() -> int:
    existing = set(Node.objects.values_list("hostname", flat=True))
    seeded = set()
    for gpu_type, count in NODE_TYPES:
        for number in range(count):
            hostname = f"{gpu_type.prefix}-{number:02d}"
            services.register_node(hostname, [_gpu_spec(hostname, i, gpu_type) for i in range(GPUS_PER_NODE)])
            seeded.add(hostname)
    return len(seeded - existing)


def _gpu_spec(hostname: str, index: int, gpu_type: GpuType) -> services.GpuSpec:
    # Stable UUIDs so that re-seeding updates rather than duplicates.
    stable = uuid.uuid5(uuid.NAMESPACE_DNS, f"{hostname}.gpu{index}.cluster-ops.demo")
    return services.GpuSpec(index, f"GPU-{stable}", gpu_type.model, gpu_type.memory_mib, gpu_type.power_limit_w)


def _seed_tenants() -> int:
    created = 0
    for name, quota, weight in TENANTS:
        _, was_created = Tenant.objects.get_or_create(
            name=name, defaults={"gpu_quota": quota, "fair_share_weight": weight}
        )
        created += was_created
    return created


def _seed_jobs(traces_dir: Path, now: datetime, seed: int) -> int:
    workload = traces_dir / "pollux" / "workloads-realistic" / "workload-1.csv"
    progress: Mapping[str, float]
    if workload.exists():
        trace, progress = load_pollux_workload(workload), load_completion_progress(traces_dir)
        logger.info("demo jobs from %s", workload)
    else:
        trace, progress = generate_jobs(seed), COMPLETION_PROGRESS
        logger.info("demo jobs from the seeded generator (%s not found)", workload)
    first_hour = [job for job in trace if job.submit_seconds < FIRST_WINDOW_SECONDS]
    start = now - timedelta(seconds=FIRST_WINDOW_SECONDS)
    tenants = {tenant.name: tenant for tenant in Tenant.objects.all()}
    with transaction.atomic():
        for job in first_hour:
            _submit(job, tenants[_tenant_for(job.name)], progress[job.application], start)
    return len(first_hour)


def _submit(job: TraceJob, tenant: Tenant, total_work: float, start: datetime) -> None:
    services.submit_job(
        tenant=tenant, name=job.name, workload_profile=job.application, total_work=total_work,
        # The user's request is the upper bound; a single-GPU request stays rigid.
        min_gpus=1, max_gpus=job.num_gpus, submitted_at=start + timedelta(seconds=job.submit_seconds),
    )


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
