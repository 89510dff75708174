"""Seeded synthetic clusters and job sets: for benchmarks and for demos without a trace.

A cluster of nodes with 8 GPUs each (half A100, half V100), and jobs drawn over the
given workload profiles with Pollux-like requests (mostly 1 GPU, some 2–16), a third of
them elastic, and as many running as fit — placed node by node as a scheduler would have.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from scheduler.core.types import ClusterSnapshot, GpuSlot, JobInfo, NodeInfo, TenantInfo

GPU_REQUESTS = [1] * 12 + [2] * 3 + [4] * 3 + [8] * 2 + [16]
TENANTS = (TenantInfo("vision", 0, 1.0), TenantInfo("language", 0, 1.0), TenantInfo("research", 0, 0.5))


def synthetic_cluster(gpus: int, gpus_per_node: int = 8) -> tuple[NodeInfo, ...]:
    count = max(1, gpus // gpus_per_node)
    return tuple(
        NodeInfo(f"node{n:04d}", "a100" if n < count / 2 else "v100",
                 tuple(GpuSlot(f"node{n:04d}-gpu{i}") for i in range(gpus_per_node)))
        for n in range(count)
    )


def synthetic_snapshot(
    jobs: int, gpus: int, profiles: Mapping[str, Mapping[str, Any]], seed: int = 0, now: float = 86_400.0
) -> ClusterSnapshot:
    """A busy cluster: ``jobs`` jobs over ``gpus`` GPUs, the earliest running where they fit."""
    rng = random.Random(seed)
    nodes = synthetic_cluster(gpus)
    free = [gpu.id for node in nodes for gpu in node.gpus]
    names = sorted(profiles)
    made = []
    for j, submit in enumerate(sorted(rng.uniform(0, now) for _ in range(jobs))):
        made.append(_job(rng, f"job{j:05d}", submit, names, free))
        free = free[made[-1].gpus:]
    return ClusterSnapshot(now, nodes, tuple(made), TENANTS, profiles)


def _job(rng: random.Random, jid: str, submit: float, profiles: list[str], free: list[str]) -> JobInfo:
    request = rng.choice(GPU_REQUESTS)
    elastic = rng.random() < 1 / 3
    low, high = (1, max(request * 2, 4)) if elastic else (request, request)
    total = rng.lognormvariate(9, 1.5)
    running = len(free) >= low and rng.random() < 0.8
    return JobInfo(
        id=jid, tenant=rng.choice(TENANTS).name, submit_time=submit, min_gpus=low, max_gpus=high,
        total_work=total, progress=rng.uniform(0, total) if running else 0.0,
        profile=rng.choice(profiles) if profiles else None, placement=tuple(free[:low]) if running else (),
        attained_gpu_seconds=rng.uniform(0, 3600) * low if running else 0.0,
        grad_noise_scale=rng.choice([None, rng.lognormvariate(7, 1.5)]),
    )
