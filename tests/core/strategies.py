"""Hypothesis strategies for clusters and job sets, shared by the core property tests."""

from __future__ import annotations

from hypothesis import strategies as st

from scheduler.core.goodput import GoodputModel, PerfParams
from scheduler.core.types import ClusterSnapshot, GpuSlot, JobInfo, NodeInfo, TenantInfo

GPU_TYPES = ("a100", "v100")
TENANTS = ("vision", "language", "research")

SYNTHETIC_MODEL = GoodputModel(
    PerfParams(alpha_c=0.02, beta_c=0.0005, alpha_n=0.004, beta_n=0.0005, alpha_r=0.02, beta_r=0.003, gamma=1.5),
    init_batch_size=128, max_batch_size=4096, min_local_bsz=16, max_local_bsz=512, noise_scale=800.0,
)
SMALL_NOISE_MODEL = GoodputModel(
    PerfParams(alpha_c=0.01, beta_c=0.001, alpha_n=0.003, beta_n=0.0004, alpha_r=0.015, beta_r=0.002, gamma=2.0),
    init_batch_size=64, max_batch_size=1024, min_local_bsz=8, max_local_bsz=256, noise_scale=50.0,
)
PROFILES = {
    "wide": {"a100": SYNTHETIC_MODEL, "v100": SYNTHETIC_MODEL},
    "narrow": {"a100": SMALL_NOISE_MODEL},
}


@st.composite
def nodes(draw: st.DrawFn, max_nodes: int = 6) -> tuple[NodeInfo, ...]:
    count = draw(st.integers(1, max_nodes))
    result = []
    for n in range(count):
        size = draw(st.sampled_from([1, 2, 4, 8]))
        health = draw(st.lists(st.booleans().map(lambda bad: not bad) | st.just(True), min_size=size, max_size=size))
        gpus = tuple(GpuSlot(f"n{n}-g{i}", healthy) for i, healthy in enumerate(health))
        result.append(NodeInfo(f"n{n}", draw(st.sampled_from(GPU_TYPES)), gpus, draw(st.booleans() | st.just(True))))
    return tuple(result)


@st.composite
def jobs(draw: st.DrawFn, cluster: tuple[NodeInfo, ...], now: float, max_jobs: int = 12) -> tuple[JobInfo, ...]:
    """Jobs, some running on GPUs they hold (never two jobs on one GPU)."""
    free = [gpu.id for node in cluster for gpu in node.gpus]
    result = []
    for j in range(draw(st.integers(0, max_jobs))):
        low = draw(st.integers(1, 8))
        high = draw(st.sampled_from([low, low, low * 2, low + 3]))
        held = draw(st.sampled_from([0, low, high])) if len(free) >= high else 0
        placement = tuple(free[:held])
        free = free[held:]
        total = draw(st.floats(1, 1e5))
        result.append(JobInfo(
            id=f"j{j}", tenant=draw(st.sampled_from(TENANTS)), submit_time=draw(st.floats(0, now)),
            min_gpus=low, max_gpus=high, total_work=total, progress=draw(st.floats(0, total)),
            priority=draw(st.integers(0, 2)), profile=draw(st.sampled_from([None, "wide", "narrow"])),
            gpu_type=draw(st.sampled_from([None, None, *GPU_TYPES])), placement=placement,
            attained_gpu_seconds=draw(st.floats(0, 1e6)), grad_noise_scale=draw(st.none() | st.floats(1, 1e5)),
            # Some running jobs still restoring their checkpoint (Sia keeps them where they are).
            restart_until=draw(st.sampled_from([0.0, now + 60.0])) if placement else 0.0,
        ))
    return tuple(result)


@st.composite
def snapshots(draw: st.DrawFn) -> ClusterSnapshot:
    now = draw(st.floats(10, 1e6))
    cluster = draw(nodes())
    tenants = tuple(TenantInfo(name, draw(st.integers(0, 16)), draw(st.sampled_from([0.5, 1.0, 2.0])))
                    for name in TENANTS)
    return ClusterSnapshot(now=now, nodes=cluster, jobs=draw(jobs(cluster, now)), tenants=tenants,
                           profiles=PROFILES)
