"""Scope minutes (the cluster, a node, a tenant per minute) and the scope series read from them:
minute detail up to 48 hours, the running hour included, from one row a minute."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.jobs import verbs
from scheduler.models import Job, Node, Tenant
from telemetry import queries
from telemetry.models import GpuMinute, ScopeMinute
from telemetry.rollups import HOURS, MINUTES, roll_up_hours, roll_up_minutes

from .readings_helpers import T0, allocate, at, ingest, reading

pytestmark = pytest.mark.django_db

GPU1 = "GPU-node1-1"


@pytest.fixture
def two_tenants_busy(node: Node, job: Job, other_tenant: Tenant) -> Job:
    """GPU 0 held by ``job`` (vision) at 2 % (idle), GPU 1 by a language job at 80 %, samples every 10 s for
    3 minutes at 200 W each; GPU 2 reports, unheld."""
    other = verbs.submit_job(tenant=other_tenant, name="lang", workload_profile="bert", total_work=1)
    allocate(job, "GPU-node1-0", -60)
    allocate(other, GPU1, -60)
    for t in range(0, 180, 10):
        ingest(reading(t, gpu_util=2, power_w=200), reading(t, GPU1, gpu_util=80, power_w=200),
               reading(t, "GPU-node1-2", gpu_util=0, power_w=50))
    return other


def scope(key: str, seconds: float) -> ScopeMinute:
    return ScopeMinute.objects.get(scope=key, start=at(seconds))


def test_the_cluster_node_and_tenants_per_minute(two_tenants_busy: Job, node: Node, tenant: Tenant,
                                                  other_tenant: Tenant) -> None:
    roll_up_minutes(at(180))
    cluster, on_node = scope("cluster", 60), scope(f"node:{node.pk}", 60)
    gpu_minutes = GpuMinute.objects.filter(start=at(60))
    assert cluster.gpus == on_node.gpus == 3
    assert cluster.allocated_seconds == sum(m.allocated_seconds for m in gpu_minutes) == 120  # two GPUs × 60 s
    assert cluster.idle_allocated_seconds == 60  # GPU 0 below the idle threshold
    assert cluster.gpu_util_avg == pytest.approx((2 + 80 + 0) / 3)
    assert cluster.power_w == pytest.approx(450)
    vision, language = scope(f"tenant:{tenant.pk}", 60), scope(f"tenant:{other_tenant.pk}", 60)
    assert (vision.gpus, vision.allocated_seconds, vision.idle_allocated_seconds, vision.gpu_util_avg) == \
        (1, 60, 60, 2)
    assert (language.gpus, language.allocated_seconds, language.idle_allocated_seconds, language.gpu_util_avg) == \
        (1, 60, 0, 80)
    assert vision.energy_j + language.energy_j == pytest.approx(cluster.energy_j - 50 * 60)  # less GPU 2's
    roll_up_minutes(at(180))  # re-running rewrites, never duplicates
    assert ScopeMinute.objects.filter(start=at(60)).count() == 4


def test_the_series_is_minute_by_minute_up_to_48_hours(two_tenants_busy: Job, tenant: Tenant) -> None:
    roll_up_minutes(at(180))
    points = queries.series(at(-24 * 3600), at(180))
    assert [p.start for p in points] == [at(0), at(60), at(120)]
    assert points[1].allocated_gpus == 2 and points[1].idle_allocated_gpus == 1
    mine = queries.series(at(-24 * 3600), at(180), tenant=tenant)
    assert [p.allocated_gpus for p in mine] == [pytest.approx(5 / 6), 1, 1]  # the first minute: 50 s of intervals
    with pytest.raises(ValueError, match="48 h"):
        queries.series(at(-49 * 3600), at(180), step=MINUTES)


def test_a_tenant_without_jobs_reads_zero_where_the_cluster_reported(two_tenants_busy: Job, db: None) -> None:
    idle = Tenant.objects.create(name="research", gpu_quota=4)
    roll_up_minutes(at(180))
    points = queries.series(at(0), at(180), tenant=idle)
    assert [(p.start, p.allocated_gpus) for p in points] == [(at(0), 0), (at(60), 0), (at(120), 0)]


def test_hours_end_with_the_running_hour_from_its_minutes(node: Node, job: Job) -> None:
    """Over 48 hours the series is hourly; the hour not yet over is drawn from its minutes so far."""
    allocate(job, "GPU-node1-0", -7200)
    for t in range(-3600, 1800, 30):
        ingest(reading(t, gpu_util=90, power_w=300))
    roll_up_minutes(at(1800))
    roll_up_hours(at(1800))
    points = queries.series(at(-3 * 24 * 3600), at(1800))
    assert [p.start for p in points] == [at(-3600), T0]
    assert points[0].allocated_gpus == pytest.approx(3570 / 3600)  # the first sample has no interval before it
    assert points[1].allocated_gpus == pytest.approx(1.0) and points[1].gpu_util == 90
    assert queries.series(at(-3 * 24 * 3600), at(1800), step=HOURS) == points


def test_a_48_hour_view_reads_one_row_a_minute(node: Node, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    ScopeMinute.objects.bulk_create(ScopeMinute(scope="cluster", start=T0 + i * timedelta(minutes=1), gpus=4,
                                                allocated_seconds=240) for i in range(2880))
    with django_assert_max_num_queries(1):
        points = queries.series(T0, T0 + timedelta(hours=48))
    assert len(points) == 2880 and points[0].allocated_gpus == 4


def test_the_heatmap_fills_the_running_hour_from_its_minutes(two_tenants_busy: Job) -> None:
    roll_up_minutes(at(180))
    data = queries.gpu_heatmap_binned(at(-24 * 3600), at(180))  # hour columns: none rolled up yet
    running = data.starts.index(T0)
    assert [row[running] for row in data.util] == [pytest.approx(2), pytest.approx(80), 0, None]


def test_hours_not_rolled_up_yet_are_each_their_own_point(node: Node, job: Job) -> None:
    """No hour rollup at all (the hour level lags): two hours of minutes are two points, not one."""
    allocate(job, "GPU-node1-0", -7200)
    for t in range(-3600, 1800, 30):
        ingest(reading(t, gpu_util=90, power_w=300))
    roll_up_minutes(at(1800))  # minutes only
    points = queries.series(at(-3 * 24 * 3600), at(1800), step=HOURS)
    assert [p.start for p in points] == [at(-3600), T0]
    assert points[1].covered_seconds == 30 * 60


def test_the_line_reaches_now_from_the_latest_samples(two_tenants_busy: Job, tenant: Tenant, node: Node) -> None:
    """The minutes not rolled up yet: GPUs held and idle per each GPU's latest sample."""
    point = queries.now_point(at(175))
    assert point is not None and (point.start, point.allocated_gpus, point.idle_allocated_gpus) == (at(175), 2, 1)
    assert point.gpu_util == pytest.approx((2 + 80 + 0) / 3)
    mine = queries.now_point(at(175), tenant=tenant)
    assert mine is not None and (mine.allocated_gpus, mine.idle_allocated_gpus, mine.gpu_util) == (1, 1, 2)
    assert queries.now_point(at(175), node=node) == point
    assert queries.now_point(at(175 + 600)) is None  # no sample in the last 5 minutes
