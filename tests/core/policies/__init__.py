"""Hand-worked tests of the built-in policies, one module per policy.

The builders below make the small clusters and jobs those tests work out by hand.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.types import ClusterSnapshot, GpuSlot, JobInfo, NodeInfo, TenantInfo


def cluster(*sizes: int, gpu_type: str = "a100", unhealthy: int = 0, prefix: str = "n") -> tuple[NodeInfo, ...]:
    """Nodes ``<prefix>0``, ``<prefix>1``… of the given sizes (GPU ids ``<node>-g<i>``).

    The last ``unhealthy`` GPUs of the first node are lost.
    """
    nodes = []
    for n, size in enumerate(sizes):
        bad = unhealthy if n == 0 else 0
        gpus = tuple(GpuSlot(f"{prefix}{n}-g{i}", healthy=i < size - bad) for i in range(size))
        nodes.append(NodeInfo(f"{prefix}{n}", gpu_type, gpus))
    return tuple(nodes)


def job(job_id: str, gpus: int = 1, *, submit: float = 0.0, work: float = 100.0, done: float = 0.0,
        holds: int = 0, on: str = "n0", first_gpu: int = 0, **fields: Any) -> JobInfo:
    """A rigid job of ``gpus`` GPUs (min_gpus/max_gpus make it elastic) holding ``holds`` GPUs of node ``on``."""
    placement = tuple(f"{on}-g{i}" for i in range(first_gpu, first_gpu + holds))
    bounds = {"min_gpus": gpus, "max_gpus": gpus} | {k: fields.pop(k) for k in ("min_gpus", "max_gpus") if k in fields}
    return JobInfo(id=job_id, tenant=fields.pop("tenant", "t"), submit_time=submit, total_work=work, progress=done,
                   placement=placement, **bounds, **fields)


def snapshot(nodes: tuple[NodeInfo, ...], *jobs: JobInfo, now: float = 100.0,
             tenants: tuple[TenantInfo, ...] = (), profiles: dict[str, Any] | None = None) -> ClusterSnapshot:
    return ClusterSnapshot(now=now, nodes=nodes, jobs=jobs, tenants=tenants, profiles=profiles or {})
