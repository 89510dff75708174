"""``bench_round``: time full live rounds (snapshot + policy + writes) on a seeded busy cluster.

The cluster and jobs are ``scheduler.sim.synthetic``'s (the same ones ``bench_policies``
times the policies alone on), written to the database as rows: nodes of 8 A100 or V100,
jobs mostly of 1 GPU with some up to 16, a third elastic, the earliest running with open
allocations. Each timed round is ``live.round.run_round`` on the simulated executor, one
minute of cluster time after the previous one, so jobs progress, finish and start.
"""

from __future__ import annotations

import statistics
import time
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.types import ClusterSnapshot
from scheduler.live import round as rounds
from scheduler.models import Allocation, Gpu, Job, JobState, Node, SchedulerSettings, SchedulingRound, Tenant
from scheduler.sim.synthetic import synthetic_snapshot

GPU_MODELS = {"a100": "NVIDIA A100-SXM4-80GB", "v100": "Tesla V100-SXM2-32GB"}


def seed_cluster(jobs: int, gpus: int, seed: int, now: datetime) -> ClusterSnapshot:
    """Write the synthetic busy cluster to the (empty) database; returns the snapshot it came from."""
    snap = synthetic_snapshot(jobs, gpus, FITTED_PROFILES, seed=seed, now=86_400.0)
    epoch = now - timedelta(seconds=snap.now)
    with transaction.atomic():
        tenants = {t.name: Tenant.objects.create(name=t.name, gpu_quota=t.quota, fair_share_weight=t.weight)
                   for t in snap.tenants}
        Node.objects.bulk_create(Node(hostname=node.name) for node in snap.nodes)
        hosts = dict(Node.objects.values_list("hostname", "pk"))
        Gpu.objects.bulk_create(
            Gpu(node_id=hosts[node.name], index=i, uuid=gpu.id, model=GPU_MODELS[node.gpu_type],
                memory_mib=81920, power_limit_w=400)
            for node in snap.nodes for i, gpu in enumerate(node.gpus)
        )
        Job.objects.bulk_create((_job_row(info, tenants, epoch, now) for info in snap.jobs), batch_size=500)
        job_pk = dict(Job.objects.values_list("name", "pk"))
        gpu_pk = dict(Gpu.objects.values_list("uuid", "pk"))
        Allocation.objects.bulk_create(
            (Allocation(job_id=job_pk[info.id], gpu_id=gpu_pk[gpu], started_at=now)
             for info in snap.jobs for gpu in info.placement), batch_size=500,
        )
    return snap


def _job_row(info, tenants: dict[str, Tenant], epoch: datetime, now: datetime) -> Job:  # type: ignore[no-untyped-def]
    running = bool(info.placement)
    return Job(
        tenant=tenants[info.tenant], name=info.id, workload_profile=info.profile or "", total_work=info.total_work,
        min_gpus=info.min_gpus, max_gpus=info.max_gpus, submitted_at=epoch + timedelta(seconds=info.submit_time),
        state=JobState.RUNNING if running else JobState.PENDING, progress=info.progress,
        attained_gpu_seconds=info.attained_gpu_seconds, last_grad_noise_scale=info.grad_noise_scale,
        started_at=now if running else None, accounted_at=now if running else None,
        generation=1 if running else 0, launched_generation=1 if running else 0,
    )


def time_rounds(policy: str, count: int, now: datetime) -> dict[str, float]:
    """Run ``count`` rounds a minute apart under ``policy``; wall times in ms (median, max, and parts)."""
    SchedulerSettings.objects.update_or_create(pk=1, defaults={"policy": policy, "simulated_speedup": 1.0})
    walls, rows = [], []
    for minute in range(count):
        started = time.perf_counter()
        row = rounds.run_round(now=now + timedelta(minutes=minute + 1))
        walls.append((time.perf_counter() - started) * 1000)
        if row is None:
            raise RuntimeError("the round did not run: is another worker holding the round's lease?")
        rows.append(row)
    ok = [row for row in rows if row.status == "ok"]
    return {
        "rounds": count, "failed": count - len(ok),
        "median_ms": round(statistics.median(walls), 1), "max_ms": round(max(walls), 1),
        "snapshot_ms": round(statistics.median(r.snapshot_ms or 0 for r in ok), 1),
        "policy_ms": round(statistics.median(r.policy_ms or 0 for r in ok), 1),
        "write_ms": round(statistics.median(r.write_ms or 0 for r in ok), 1),
        "decisions": sum(r.decisions for r in ok),
    }


def bench(jobs: int, gpus: int, policies: list[str], count: int, seed: int) -> dict[str, dict[str, float]]:
    """Seed once per policy (each starts from the same busy cluster) and time its rounds."""
    results = {}
    for policy in policies:
        _clear()
        now = timezone.now()
        seed_cluster(jobs, gpus, seed, now)
        results[policy] = time_rounds(policy, count, now)
    return results


def _clear() -> None:
    for model in (SchedulingRound, Allocation, Job, Gpu, Node, Tenant):
        model.objects.all().delete()
