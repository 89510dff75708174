"""One ledger behind every GPU-hour figure: the summary, the tenant rows, the user rows and the accounting CSV agree
to the GPU-second for any allocation history and any period (partial hours, a DST change, before the first data);
coverage is true; energy adds up."""

from __future__ import annotations

import csv
import io
import os
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster_ops.reports import periods
from cluster_ops.reports.content import build_content
from cluster_ops.reports.render import render_accounting, render_csv
from scheduler import inventory as gpu_inventory
from scheduler.models import Allocation, Gpu, Job, JobState, Node, Tenant
from telemetry import ledger
from telemetry.models import GpuMinute, GpuSample, JobUsageMinute
from telemetry.rollups import roll_up_minutes

pytestmark = pytest.mark.django_db

# Europe/Berlin left summer time on 2026-10-25 at 03:00 (a 25-hour day); the histories straddle it.
ZONE = "Europe/Berlin"
ORIGIN = datetime(2026, 10, 24, 0, 0, tzinfo=UTC)
EXAMPLES = settings(max_examples=int(os.environ.get("LEDGER_EXAMPLES", "30")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TENANTS = (("vision", 4), ("language", 2), ("research", 1))
OWNERS = ("alice", "bob", "carol")


def inventory() -> tuple[list[Gpu], list[Tenant], list[User]]:
    tenants = [Tenant.objects.create(name=name, gpu_quota=quota) for name, quota in TENANTS]
    owners = [User.objects.create(username=name) for name in OWNERS]
    for n in range(2):
        gpu_inventory.register_node(f"n{n}", [
            gpu_inventory.GpuSpec(i, f"GPU-{n}-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(4)])
    return list(Gpu.objects.order_by("node__hostname", "index")), tenants, owners


allocation = st.tuples(
    st.integers(0, 5),  # job
    st.integers(0, 7),  # GPU
    st.integers(0, 3 * 24 * 60 * 60),  # start, seconds after ORIGIN
    st.integers(1, 20 * 60 * 60),  # seconds held
    st.booleans(),  # still open
)


@EXAMPLES
@given(history=st.lists(allocation, min_size=0, max_size=14),
       idle=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4 * 24 * 60), st.floats(0, 60)), max_size=20),
       first_day=st.integers(-2, 3), days=st.integers(1, 2), now_after=st.integers(0, 6 * 24 * 60 * 60))
def test_summary_tenants_users_and_accounting_csv_agree_to_the_gpu_second(
        settings: Any, history: list[tuple[int, int, int, int, bool]], idle: list[tuple[int, int, float]],
        first_day: int, days: int, now_after: int) -> None:
    settings.TIME_ZONE = ZONE
    for model in (JobUsageMinute, Allocation, Job, Gpu, Node, Tenant, User):
        model.objects.all().delete()
    gpus, tenants, owners = inventory()
    jobs = [Job.objects.create(tenant=tenants[i % 3], owner=owners[i % 3] if i != 5 else None, name=f"j{i}",
                               workload_profile="cifar10", total_work=1, state=JobState.RUNNING,
                               submitted_at=ORIGIN) for i in range(6)]
    now = ORIGIN + timedelta(seconds=now_after)
    free_from: dict[int, datetime | None] = {}  # a GPU is held by one allocation at a time; None: held until now
    for job, gpu, start, seconds, still_open in sorted(history, key=lambda a: a[2]):
        began = max(ORIGIN + timedelta(seconds=start), free_from.get(gpu) or ORIGIN)
        if began < now and (gpu not in free_from or free_from[gpu] is not None):
            ended = None if still_open else min(began + timedelta(seconds=seconds), now)
            Allocation.objects.create(job=jobs[job], gpu=gpus[gpu], started_at=began, ended_at=ended)
            free_from[gpu] = ended
    for job, minute, seconds in idle:
        JobUsageMinute.objects.get_or_create(job=jobs[job], start=ORIGIN + timedelta(minutes=minute),
                                             defaults={"idle_allocated_seconds": seconds, "energy_j": 6000.0})
    period = periods.days(periods.CUSTOM, date(2026, 10, 24) + timedelta(days=first_day),
                          date(2026, 10, 24) + timedelta(days=first_day + days - 1))

    c = build_content(period, None, now)

    k = {kpi.key: kpi.value or 0.0 for kpi in c.kpis}
    tenant_seconds = sum(row.gpu_hours for row in c.tenants) * 3600
    user_seconds = sum(user.gpu_hours for user in c.top_users) * 3600
    accounts = list(csv.DictReader(io.StringIO(render_accounting(c))))
    csv_tenants = sum(float(row["gpu_hours"]) for row in accounts if not row["user"]) * 3600
    csv_users = sum(float(row["gpu_hours"]) for row in accounts if row["user"]) * 3600
    expected = held_by_hand(c.coverage.start, min(c.coverage.end, now))
    assert k["gpu_hours"] * 3600 == pytest.approx(expected, abs=1e-3)
    for figure in (tenant_seconds, user_seconds):
        assert figure == pytest.approx(expected, abs=1e-3)
    for figure in (csv_tenants, csv_users):  # six decimals of an hour: 3.6 ms a row
        assert figure == pytest.approx(expected, abs=0.0036 * len(accounts) + 1e-3)
    idle_tenants = sum(row.idle_gpu_hours for row in c.tenants)
    idle_users = sum(user.idle_gpu_hours for user in c.top_users)
    assert k["idle_gpu_hours"] == pytest.approx(idle_tenants, abs=1e-9) == pytest.approx(idle_users, abs=1e-9)
    assert k["it_kwh"] == pytest.approx(0.0)  # no GPU minutes: no measured energy, not the jobs' alone
    assert sum(row.it_kwh for row in c.tenants) + (c.unheld_kwh or 0.0) >= 0.0
    if c.coverage.hours > 0:
        share = k["allocation"] / 100
        assert share == pytest.approx(sum(row.avg_gpus for row in c.tenants) / len(gpus), abs=1e-9)
    assert c.coverage.telemetry_hours <= c.coverage.hours + 1e-9
    first = min((a.started_at for a in Allocation.objects.all()), default=None)
    if first is not None and period.start < first < period.end:
        assert c.coverage.start == first  # the first allocation itself, not the hour it falls in


def held_by_hand(start: datetime, end: datetime) -> float:
    """GPU-seconds held in [start, end), each allocation clipped: the definition, written out once more."""
    total = 0.0
    for a in Allocation.objects.all():
        a_end = a.ended_at or end
        total += max(0.0, (min(a_end, end) - max(a.started_at, start)).total_seconds())
    return total


def test_a_tenant_report_counts_what_the_cluster_report_gives_that_tenant() -> None:
    gpus, tenants, owners = inventory()
    job = Job.objects.create(tenant=tenants[0], owner=owners[0], name="j", workload_profile="cifar10", total_work=1,
                             submitted_at=ORIGIN)
    Allocation.objects.create(job=job, gpu=gpus[0], started_at=ORIGIN + timedelta(hours=20, minutes=49),
                              ended_at=ORIGIN + timedelta(hours=22, minutes=10))
    period = periods.days(periods.CUSTOM, date(2026, 10, 24), date(2026, 10, 24))
    now = ORIGIN + timedelta(hours=22, minutes=30)

    cluster, mine = build_content(period, None, now), build_content(period, tenants[0], now)

    row = next(r for r in cluster.tenants if r.name == "vision")
    assert mine.kpi("gpu_hours").value == pytest.approx(row.gpu_hours) == pytest.approx(81 / 60)
    # covered from the first allocation (20:49 UTC), not the hour it falls in, until now
    assert cluster.coverage.start == ORIGIN + timedelta(hours=20, minutes=49)
    assert cluster.coverage.hours == pytest.approx(101 / 60)
    assert row.avg_gpus == pytest.approx(81 / 101)  # over the hours covered, not over two whole hours


def test_coverage_starts_at_the_first_telemetry_minute_and_never_has_more_telemetry_than_time() -> None:
    gpus, tenants, owners = inventory()
    Job.objects.create(tenant=tenants[0], name="early", workload_profile="cifar10", total_work=1,
                       submitted_at=ORIGIN + timedelta(hours=20, minutes=46))  # a submission is not GPU time
    for minute in range(49, 60):
        GpuMinute.objects.create(gpu=gpus[0], start=ORIGIN + timedelta(hours=20, minutes=minute), samples=4)
    for minute in range(0, 30):
        GpuMinute.objects.create(gpu=gpus[0], start=ORIGIN + timedelta(hours=21, minutes=minute), samples=4)
    period = periods.days(periods.CUSTOM, date(2026, 10, 24), date(2026, 10, 24))

    c = build_content(period, None, ORIGIN + timedelta(hours=21, minutes=30))

    assert c.coverage.start == ORIGIN + timedelta(hours=20, minutes=49)
    assert c.coverage.hours == pytest.approx(41 / 60)
    assert c.coverage.telemetry_hours == pytest.approx(41 / 60)


def test_energy_adds_up_from_hand_worked_watts(settings: Any) -> None:
    """GPU 0 held by a vision job at 300 W for 10 minutes, GPU 1 held by nobody at 60 W: 15-second samples with
    the power only (no counter), so energy is the integrated power."""
    settings.CURRENCY = "CHF"
    gpus, tenants, owners = inventory()
    job = Job.objects.create(tenant=tenants[0], owner=owners[0], name="busy", workload_profile="cifar10",
                             total_work=1, submitted_at=ORIGIN, state=JobState.RUNNING)
    start = ORIGIN + timedelta(hours=10)
    Allocation.objects.create(job=job, gpu=gpus[0], started_at=start - timedelta(seconds=15))
    samples = []
    for i in range(41):  # 10 minutes and one sample before
        at = start + timedelta(seconds=15 * i - 15)
        samples += [GpuSample(gpu=gpus[0], at=at, job=job, gpu_util=90.0, power_w=300.0),
                    GpuSample(gpu=gpus[1], at=at, gpu_util=0.0, power_w=60.0)]
    GpuSample.objects.bulk_create(samples)
    roll_up_minutes(start + timedelta(minutes=11))
    period = periods.days(periods.CUSTOM, date(2026, 10, 24), date(2026, 10, 24))

    c = build_content(period, None, start + timedelta(minutes=10))

    vision = next(r for r in c.tenants if r.name == "vision")
    assert vision.it_kwh == pytest.approx(300 * 600 / 3.6e6)  # 0.05 kWh: 300 W × 10 min
    assert c.unheld_kwh == pytest.approx(60 * 600 / 3.6e6)  # 0.01 kWh
    assert c.kpi("it_kwh").value == pytest.approx(vision.it_kwh + c.unheld_kwh)
    assert c.kpi("cost").unit == "CHF"
    cost_rows = [row for row in csv.reader(io.StringIO(render_csv(c))) if row[2] == "energy cost"]
    assert cost_rows and all(row[5] == "CHF" for row in cost_rows)


def test_the_ledger_clips_each_allocation_exactly() -> None:
    gpus, tenants, owners = inventory()
    job = Job.objects.create(tenant=tenants[1], owner=owners[1], name="j", workload_profile="cifar10", total_work=1,
                             submitted_at=ORIGIN)
    Allocation.objects.create(job=job, gpu=gpus[0], started_at=ORIGIN, ended_at=ORIGIN + timedelta(hours=3))
    Allocation.objects.create(job=job, gpu=gpus[1], started_at=ORIGIN + timedelta(hours=1))  # still open

    books = ledger.read(ORIGIN + timedelta(minutes=90), ORIGIN + timedelta(hours=2, minutes=15))

    assert books.total().gpu_seconds == pytest.approx(2 * 45 * 60)
    assert books.by_owner() == {("language", "bob"): books.total()}
