"""Rollup arithmetic worked out by hand: averages, energy (counter, reset, power), held and idle time, late data."""

from __future__ import annotations

import pytest

from scheduler.jobs import verbs
from scheduler.models import Job, Node, Tenant
from telemetry.models import GpuHour, GpuMinute, JobUsageHour, RollupCursor
from telemetry.rollups import roll_up_hours, roll_up_minutes

from .readings_helpers import GPU0, T0, allocate, at, ingest, reading

pytestmark = pytest.mark.django_db


def minute(seconds: float) -> GpuMinute:
    return GpuMinute.objects.get(gpu__uuid=GPU0, start=at(seconds))


def test_averages_and_maxima_skip_unknown_metrics(node: Node) -> None:
    ingest(reading(0, gpu_util=10, power_w=100, temperature_c=50, mem_used_mib=1000),
           reading(20, gpu_util=20, power_w=None, temperature_c=70),
           reading(40, gpu_util=60, power_w=300, mem_used_mib=3000))
    assert roll_up_minutes(at(60)) == 1
    row = minute(0)
    assert (row.samples, row.gpu_util_avg, row.gpu_util_max) == (3, 30, 60)
    assert (row.power_w_avg, row.power_w_max) == (200, 300)  # (100 + 300) / 2: the NULL is not a 0
    assert (row.temperature_c_max, row.mem_used_mib_avg) == (70, 2000)


def test_energy_is_the_counter_delta_and_a_reset_counts_the_new_value(node: Node) -> None:
    ingest(reading(0, energy_j=1000), reading(20, energy_j=5000),
           reading(40, energy_j=300),  # the driver reloaded: 300 J since, not −4,700 J
           reading(60, energy_j=1300))
    roll_up_minutes(at(120))
    assert minute(0).energy_j == 4000 + 300
    assert minute(60).energy_j == 1000  # (40 s, 60 s] belongs to the minute of its end


def test_without_a_counter_power_is_integrated(node: Node) -> None:
    ingest(reading(10, power_w=100), reading(30, power_w=200),
           reading(50),  # no power: the interval ending here adds nothing
           reading(70, power_w=300))  # earlier reading has no power: 300 W held over 20 s
    roll_up_minutes(at(120))
    assert minute(0).energy_j == (100 + 200) / 2 * 20
    assert minute(60).energy_j == 300 * 20


def test_a_gap_longer_than_five_minutes_counts_nothing(node: Node, job: Job) -> None:
    allocate(job, GPU0, -60)
    ingest(reading(0, gpu_util=1, power_w=100), reading(301, gpu_util=1, power_w=100))
    roll_up_minutes(at(600))
    assert minute(300).energy_j == minute(300).allocated_seconds == 0


def test_held_and_idle_seconds_follow_the_job_at_each_sample(node: Node, tenant: Tenant) -> None:
    first = verbs.submit_job(tenant=tenant, name="a", workload_profile="cifar10", total_work=1)
    second = verbs.submit_job(tenant=tenant, name="b", workload_profile="cifar10", total_work=1)
    allocate(first, GPU0, -60, 30)
    allocate(second, GPU0, 30)  # the GPU changes hands at 12:00:30
    ingest(*(reading(10 * i, gpu_util=u, power_w=100) for i, u in enumerate([50, 2, 3, 80, 1, None])))
    ingest(reading(70, uuid="GPU-node1-1", gpu_util=0, power_w=50),
           reading(80, uuid="GPU-node1-1", gpu_util=0, power_w=50))  # nobody holds GPU 1
    roll_up_minutes(at(3600))
    # (0,10] a 2 % idle, (10,20] a 3 % idle, (20,30] b 80 %, (30,40] b 1 % idle, (40,50] b unknown: held, not idle
    assert (minute(0).allocated_seconds, minute(0).idle_allocated_seconds) == (50, 30)
    assert GpuMinute.objects.get(gpu__uuid="GPU-node1-1").allocated_seconds == 0
    assert roll_up_hours(at(3600)) == 1
    usage = {u.job.name: (u.allocated_seconds, u.idle_allocated_seconds, u.energy_j)
             for u in JobUsageHour.objects.select_related("job")}
    assert usage == {"a": (20, 20, 2000), "b": (30, 10, 3000)}
    hour = GpuHour.objects.get(gpu__uuid=GPU0, start=T0)
    assert (hour.allocated_seconds, hour.idle_allocated_seconds, hour.energy_j, hour.samples) == (50, 30, 5000, 6)


def test_an_hour_is_the_sum_of_its_minutes(node: Node) -> None:
    ingest(*(reading(15 * i, gpu_util=i % 7 * 10, power_w=100 + i) for i in range(240)))
    roll_up_minutes(at(3600))
    roll_up_hours(at(3600))
    minutes = GpuMinute.objects.filter(gpu__uuid=GPU0)
    hour = GpuHour.objects.get(gpu__uuid=GPU0)
    assert hour.energy_j == pytest.approx(sum(m.energy_j for m in minutes))
    assert hour.samples == sum(m.samples for m in minutes) == 240
    assert hour.gpu_util_max == max(m.gpu_util_max or 0 for m in minutes)


def test_only_complete_buckets_are_rolled_and_the_rest_later(node: Node) -> None:
    ingest(reading(10, gpu_util=10), reading(70, gpu_util=30))
    assert roll_up_minutes(at(90)) == 1  # 12:01 is not over yet
    assert list(GpuMinute.objects.values_list("start", flat=True)) == [at(0)]
    assert roll_up_minutes(at(90)) == 0
    assert roll_up_minutes(at(120)) == 1
    assert minute(60).gpu_util_avg == 30
    assert roll_up_hours(at(120)) == 0 and not GpuHour.objects.exists()


def test_rolling_up_again_replaces_and_never_duplicates(node: Node) -> None:
    ingest(*(reading(10 * i, gpu_util=50, energy_j=100.0 * i) for i in range(12)))
    roll_up_minutes(at(120))
    roll_up_hours(at(3600))
    before = list(GpuMinute.objects.order_by("start").values("start", "energy_j", "samples"))
    assert roll_up_minutes(at(120)) == 0  # nothing new
    RollupCursor.objects.all().delete()  # forget progress: every bucket is recomputed
    assert roll_up_minutes(at(120)) == 2 and roll_up_hours(at(3600)) == 1
    assert list(GpuMinute.objects.order_by("start").values("start", "energy_j", "samples")) == before
    assert GpuHour.objects.count() == 1


def test_a_late_sample_recomputes_its_minute_the_next_one_and_the_hour(node: Node) -> None:
    ingest(*(reading(s, energy_j=float(s)) for s in (0, 20, 40, 70, 80)))
    roll_up_minutes(at(3600))
    roll_up_hours(at(3600))
    assert (minute(0).energy_j, minute(60).energy_j) == (40, 40)
    ingest(reading(58, energy_j=50.0))  # arrives after 12:00 was rolled: 40 → 50 J, then 50 → 70 J
    assert roll_up_minutes(at(3600)) == 2
    assert (minute(0).samples, minute(0).energy_j, minute(60).energy_j) == (4, 50, 30)
    assert roll_up_hours(at(3600)) == 1
    assert GpuHour.objects.get().energy_j == 80


def test_buckets_older_than_raw_retention_are_final(node: Node, settings) -> None:
    settings.TELEMETRY_RAW_DAYS = 1
    ingest(reading(10, gpu_util=10))
    assert roll_up_minutes(at(2 * 86400)) == 0
    assert not GpuMinute.objects.exists()
