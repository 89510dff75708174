"""One round, two drivers — proven: the same snapshot through the live round (database, simulated executor) and
through the simulator gives the same decisions: which jobs hold which GPUs (so counts and types), and the batch the
policy chose, for every registered policy."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import timedelta

import pytest

from scheduler import inventory
from scheduler.backends import get_executor
from scheduler.core.config import build_policy, policy_names
from scheduler.forecasting import forecasts
from scheduler.forecasting.runtime_models import runtime_predictor
from scheduler.jobs import verbs
from scheduler.live import round as rounds
from scheduler.live.config import scheduler_settings, scheduling_config, update_settings
from scheduler.live.snapshot import build_snapshot
from scheduler.models import Allocation, Job, Tenant
from scheduler.sim.engine import simulate
from scheduler.sim.start import Checkpoint

# Elastic jobs with measured profiles on both types, of two tenants, arriving a second apart.
JOBS = [("cifar10", 1, 8), ("imagenet", 2, 8), ("bert", 1, 4), ("yolov3", 1, 8), ("deepspeech2", 1, 4),
        ("ncf", 1, 2), ("cifar10", 4, 4), ("imagenet", 1, 16)]


@pytest.fixture
def mixed_cluster(db: None) -> None:
    """2 nodes × 4 A100 and 2 nodes × 4 V100."""
    for host, model in [("a1", "NVIDIA A100-SXM4-80GB"), ("a2", "NVIDIA A100-SXM4-80GB"),
                        ("v1", "Tesla V100-SXM2-32GB"), ("v2", "Tesla V100-SXM2-32GB")]:
        inventory.register_node(host, [inventory.GpuSpec(i, f"GPU-{host}-{i}", model, 32768, 300) for i in range(4)])


def queue(tenants: list[Tenant], start) -> None:
    for n, (profile, low, high) in enumerate(JOBS):
        verbs.submit_job(tenant=tenants[n % 2], name=f"{profile}-{n}", workload_profile=profile,
                            total_work=50_000.0 * (n + 1), min_gpus=low, max_gpus=high,
                            submitted_at=start + timedelta(seconds=n))


def live_decisions() -> dict[str, tuple[frozenset[str], int | None]]:
    held: dict[str, set[str]] = {}
    for job_id, gpu in Allocation.objects.filter(ended_at__isnull=True).values_list("job_id", "gpu__uuid"):
        held.setdefault(str(job_id), set()).add(gpu)
    batches = dict(Job.objects.values_list("pk", "policy_batch_size"))
    return {job_id: (frozenset(gpus), batches[int(job_id)]) for job_id, gpus in held.items()}


def simulated_decisions(at) -> dict[str, tuple[frozenset[str], int | None]]:
    """The simulator's first round from the live state at ``at``, read off its state one second later."""
    config = scheduling_config()
    live = forecasts.live_input(build_snapshot(at, job_fields=forecasts.FORECAST_FIELDS), config, 1.0,
                                runtime_predictor()[0])
    given = live.given
    seen: list[Checkpoint] = []
    simulate(given.jobs, given.nodes, build_policy(config), tenants=given.tenants, profiles=given.profiles,
             config=dataclasses.replace(given.config, horizon=at.timestamp() + 1.5), start=given.start,
             on_checkpoint=(1.0, seen.append))
    running: Mapping = seen[0].start.running
    return {job_id: (frozenset(run.gpus), run.batch_size) for job_id, run in running.items()}


@pytest.mark.parametrize("policy", policy_names())
def test_the_live_round_decides_what_the_simulator_decides(policy, mixed_cluster, tenant, other_tenant, now) -> None:
    update_settings(policy=policy, executor="simulated", simulated_speedup=1.0, restart_seconds=30.0)
    first = now.replace(second=0, microsecond=0)  # the simulator's rounds fall on multiples of the interval
    queue([tenant, other_tenant], first - timedelta(minutes=1))
    assert simulated_decisions(first)  # something starts on an idle cluster
    rounds.run_round(now=first)  # jobs start; the next round may rescale, move or preempt them
    second = first + timedelta(seconds=60)
    get_executor(scheduler_settings()).observe(build_snapshot(second).snap, second)  # progress up to the round
    expected = simulated_decisions(second)
    row = rounds.run_round(now=second)
    assert row is not None and row.status == "ok"
    assert live_decisions() == expected
    if policy in ("pollux", "sia", "sia-profiled", "sia-hesrpt"):  # policies that choose the batch: it reached it
        assert any(batch for _, batch in expected.values())
