"""The Overview's last-round table names the GPU type each decided job went on."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from cluster_ops.dashboards.overview_data import round_summary
from scheduler import inventory
from scheduler.jobs import verbs
from scheduler.live import round as rounds
from scheduler.live.config import update_settings
from scheduler.models import Job, Tenant

pytestmark = pytest.mark.django_db


def test_the_last_rounds_decisions_name_the_gpu_type(tenant: Tenant, now: datetime) -> None:
    for host, model in (("a", "NVIDIA A100-SXM4-80GB"), ("v", "Tesla V100-SXM2-32GB")):
        inventory.register_node(host, [inventory.GpuSpec(i, f"GPU-{host}-{i}", model, 81920, 300) for i in range(4)])
    update_settings(policy="fifo")
    verbs.submit_job(tenant=tenant, name="cifar", workload_profile="cifar10", total_work=1e9,
                        min_gpus=2, max_gpus=2)
    rounds.run_round(now=now)
    (decision,) = round_summary(Job.objects.all()).decisions
    assert decision.gpu_type == "a100" and decision.reason.endswith("× its v100 speed"), decision


def test_the_last_round_is_a_round_not_a_start_between_rounds(tenant: Tenant, now: datetime) -> None:
    inventory.register_node("a", [inventory.GpuSpec(i, f"GPU-a-{i}", "NVIDIA A100-SXM4-80GB", 81920, 300)
                                 for i in range(4)])
    update_settings(policy="fifo")
    verbs.submit_job(tenant=tenant, name="first", workload_profile="cifar10", total_work=1e9, min_gpus=2)
    row = rounds.run_round(now=now)
    verbs.submit_job(tenant=tenant, name="second", workload_profile="cifar10", total_work=1e9, min_gpus=2)
    between = rounds.start_between_rounds(now=now + timedelta(seconds=5))
    assert row is not None and between is not None and between.between_rounds
    summary = round_summary(Job.objects.all())
    assert summary.last == row and [d.job for d in summary.decisions] == ["first"]


def test_a_decision_that_leaves_a_job_without_gpus_names_the_type_it_left(tenant: Tenant, now: datetime) -> None:
    """Failure 13: a preemption's row left the GPU type blank although its reason named it."""
    from scheduler.models import RescaleEvent, RescaleKind, SchedulingRound

    job = verbs.submit_job(tenant=tenant, name="bert", workload_profile="bert", total_work=1e9)
    row = SchedulingRound.objects.create(policy="fifo", started_at=now, finished_at=now)
    RescaleEvent.objects.create(job=job, round=row, at=now, kind=RescaleKind.PREEMPT, from_gpus=4, to_gpus=0,
                                from_type="v100", reason="preempted: 4 v100 for a higher-priority job")
    (decision,) = round_summary(Job.objects.all()).decisions
    assert decision.gpu_type == "v100"
