"""Dashboard and report queries over the rollups; the roll-up and prune tasks, their schedule; the benchmark."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from research import telemetry_bench as bench
from scheduler import inventory
from scheduler.jobs import verbs
from scheduler.models import Gpu, Job, Node, Tenant
from telemetry import ledger, queries, storage, tasks
from telemetry.models import GpuHour, GpuMinute, JobUsageHour
from telemetry.readings import GpuReading
from telemetry.rollups import floor
from telemetry.schedule import sync_telemetry_schedule

from .readings_helpers import T0, at

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


@pytest.fixture
def second_node(db: None) -> Node:
    return inventory.register_node("node2", [inventory.GpuSpec(0, "GPU-node2-0", "NVIDIA A100-SXM4-80GB", 81920, 400)])


def gpu(uuid: str) -> Gpu:
    return Gpu.objects.get(uuid=uuid)


def test_short_ranges_read_minutes_and_long_ones_hours(node: Node, second_node: Node) -> None:
    GpuMinute.objects.create(gpu=gpu("GPU-node1-0"), start=T0, gpu_util_avg=10, allocated_seconds=60,
                             idle_allocated_seconds=30, energy_j=3.6e6)
    GpuMinute.objects.create(gpu=gpu("GPU-node2-0"), start=T0, gpu_util_avg=30, allocated_seconds=60)
    GpuHour.objects.create(gpu=gpu("GPU-node1-0"), start=T0 - 3 * 24 * HOUR, gpu_util_avg=50, allocated_seconds=1800)
    [point] = queries.utilisation(T0 - HOUR, T0 + HOUR)
    assert point == queries.UtilisationPoint(T0, 20, 2, 0.5, 1.0)  # 2 GPUs held, half of one idle, 1 kWh
    [node_point] = queries.utilisation(T0 - HOUR, T0 + HOUR, node=second_node)
    assert (node_point.gpu_util, node_point.allocated_gpus) == (30, 1)
    [week_point] = queries.utilisation(T0 - 7 * 24 * HOUR, T0)
    assert (week_point.start, week_point.gpu_util, week_point.allocated_gpus) == (T0 - 72 * HOUR, 50, 0.5)


def test_tenant_usage_comes_from_job_hours(job: Job, tenant: Tenant, other_tenant: Tenant) -> None:
    theirs = verbs.submit_job(tenant=other_tenant, name="bert", workload_profile="bert", total_work=1)
    JobUsageHour.objects.create(job=job, start=T0, allocated_seconds=7200, idle_allocated_seconds=3600, energy_j=7.2e6)
    JobUsageHour.objects.create(job=job, start=T0 + HOUR, allocated_seconds=3600, idle_allocated_seconds=0)
    JobUsageHour.objects.create(job=theirs, start=T0, allocated_seconds=3600, idle_allocated_seconds=900,
                                energy_j=3.6e6)
    points = queries.utilisation(T0, T0 + 2 * HOUR, tenant=tenant)
    assert points == [queries.UtilisationPoint(T0, None, 2, 1, 2), queries.UtilisationPoint(T0 + HOUR, None, 1, 0, 0)]
    books = ledger.read(T0, T0 + 2 * HOUR)  # no job minutes kept: whole job hours
    assert {name: usage.kwh for name, usage in books.by_tenant().items()} == {"language": 1, "vision": 2}
    assert {name: usage.idle_gpu_hours for name, usage in books.by_tenant().items()} == {"language": 0.25, "vision": 1}
    assert [(line.job, line.tenant, line.idle_allocated_gpu_hours) for line in books.idle_jobs()] == [
        ("resnet", "vision", 1), ("bert", "language", 0.25)]
    assert [line.job for line in ledger.read(T0, T0 + 2 * HOUR, tenant=other_tenant).lines] == ["bert"]


def test_the_heatmap_has_a_cell_per_gpu_and_bucket(node: Node, second_node: Node) -> None:
    GpuMinute.objects.create(gpu=gpu("GPU-node1-1"), start=T0 + timedelta(minutes=2), gpu_util_avg=75)
    GpuMinute.objects.create(gpu=gpu("GPU-node2-0"), start=T0, gpu_util_avg=5)
    heatmap = queries.gpu_heatmap(T0 + timedelta(seconds=30), T0 + timedelta(minutes=3))
    assert heatmap.gpus == ["node1/gpu0", "node1/gpu1", "node1/gpu2", "node1/gpu3", "node2/gpu0"]
    assert heatmap.starts == [T0, at(60), at(120)]
    assert heatmap.util[1] == [None, None, 75] and heatmap.util[4] == [5, None, None]
    assert queries.gpu_heatmap(T0, T0 + HOUR, node=second_node).util == [[5] + [None] * 59]


def test_the_tasks_roll_up_and_prune(node: Node, settings) -> None:
    two_hours_ago = floor(timezone.now() - 2 * HOUR, HOUR)
    storage.ingest([GpuReading("GPU-node1-0", two_hours_ago + timedelta(seconds=s), gpu_util=s) for s in (10, 20)])
    assert tasks.roll_up() == {"minutes": 1, "hours": 1}
    assert GpuHour.objects.get().gpu_util_avg == 15
    assert tasks.prune()["samples"] == 0
    settings.TELEMETRY_RAW_DAYS = 0  # (the setting's minimum is 1; here: everything is old)
    assert tasks.prune()["samples"] == 2


def test_the_schedule_is_idempotent_and_keeps_an_operators_choice(db: None) -> None:
    sync_telemetry_schedule()
    PeriodicTask.objects.filter(name="telemetry-prune").update(enabled=False)
    sync_telemetry_schedule()
    ours = PeriodicTask.objects.filter(name__startswith="telemetry-")
    entries = {t.name: (t.task, t.interval.every, t.enabled) for t in ours}
    assert entries == {"telemetry-roll-up": ("telemetry.roll_up", 60, True),
                       "telemetry-prune": ("telemetry.prune", 3600, False)}


def test_the_benchmark_reports_every_figure(db: None) -> None:
    report = bench.run(samples=40, gpus=16, repeats=1, now=T0)
    assert report["ingest"]["samples"] == 48 and report["ingest"]["calls"] == 3  # whole ticks of 16 GPUs
    assert set(report["queries_ms"]) == {"utilisation_7d_hours", "utilisation_2d_minutes", "heatmap_7d_hours",
                                         "ledger_7d", "metrics_scrape"}
    assert GpuHour.objects.filter(start__lt=T0).count() == 16 * 168
    assert GpuMinute.objects.filter(start__gte=T0).count() == 2 * 16  # the ingested minute and the live one
    assert len(queries.gpu_heatmap(T0 - 7 * 24 * HOUR, T0).starts) == 168
