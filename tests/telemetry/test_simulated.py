"""The simulated source: plausible, deterministic, flagged simulated, following allocations and power caps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from scheduler import inventory
from scheduler.core.power import DEFAULT_SPECS
from scheduler.demo import seed_demo
from scheduler.models import Allocation, Gpu, GpuHealth, Job, Node
from telemetry import tasks
from telemetry.models import GpuSample
from telemetry.schedule import SIMULATED_SCHEDULE_NAME
from telemetry.simulated import SimulatedGpu, collect_simulated, job_is_idle, simulate

A100 = DEFAULT_SPECS["a100"]
IDLE_JOB = next(i for i in range(1, 1000) if job_is_idle(i))
BUSY_JOB = next(i for i in range(1, 1000) if not job_is_idle(i))


def a100(job_id: int | None = None, **fields: Any) -> SimulatedGpu:
    return SimulatedGpu(**{"uuid": "GPU-x", "model": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920,
                           "power_limit_w": 400, "job_id": job_id, **fields})


def test_a_free_gpu_idles() -> None:
    reading = simulate(a100(), timezone.now(), 30)
    assert reading.simulated
    assert (reading.gpu_util, reading.mem_used_mib, reading.processes) == (0.0, 0.0, 0)
    assert reading.power_w == pytest.approx(A100.idle_w)
    assert 30 < reading.temperature_c < 45 and reading.sm_clock_mhz == 210


@pytest.mark.parametrize("second", range(20))
def test_a_busy_job_runs_its_gpu_hard(second: int) -> None:
    now = timezone.now().replace(microsecond=0) + timedelta(seconds=second)
    reading = simulate(a100(BUSY_JOB), now, 30)
    assert 70 <= reading.gpu_util <= 98 and reading.processes == 1
    assert A100.idle_w < reading.power_w <= A100.max_w
    assert 0.55 * 81920 <= reading.mem_used_mib <= 0.9 * 81920
    assert 50 < reading.temperature_c < 65 and reading.sm_clock_mhz == 1410


def test_an_idle_job_holds_memory_but_does_nothing() -> None:
    reading = simulate(a100(IDLE_JOB), timezone.now(), 30)
    assert reading.gpu_util <= 3 and reading.mem_used_mib > 0 and reading.processes == 1
    assert reading.power_w < A100.idle_w + 0.03 * (A100.max_w - A100.idle_w) + 0.1


def test_same_inputs_same_reading() -> None:
    now = timezone.now()
    assert simulate(a100(BUSY_JOB), now, 30) == simulate(a100(BUSY_JOB), now, 30)


def test_a_power_cap_lowers_power_and_clock() -> None:
    now = timezone.now()
    capped = simulate(a100(BUSY_JOB, power_limit_w=200), now, 30)
    full = simulate(a100(BUSY_JOB), now, 30)
    assert capped.power_w < full.power_w and capped.power_w <= 200 and capped.power_limit_w == 200
    assert capped.sm_clock_mhz < full.sm_clock_mhz


def test_energy_counter_accumulates_and_a_long_gap_adds_at_most_the_limit() -> None:
    now = timezone.now()
    reading = simulate(a100(last_at=now - timedelta(seconds=10), last_energy_j=1000.0), now, 30)
    assert reading.energy_j == pytest.approx(1000.0 + 10 * reading.power_w, abs=0.1)
    stopped = simulate(a100(last_at=now - timedelta(days=1), last_energy_j=1000.0), now, 30)
    assert stopped.energy_j == pytest.approx(1000.0 + 30 * stopped.power_w, abs=0.1)


def test_an_unknown_gpu_type_uses_its_default_limit() -> None:
    reading = simulate(a100(model="NVIDIA Z900", power_limit_w=1000, power_default_w=1000), timezone.now(), 30)
    assert reading.power_w == pytest.approx(250.0)


@pytest.mark.django_db
def test_collect_simulated_follows_allocations_and_skips_lost_gpus(node: Node, job: Job, settings: Any) -> None:
    settings.TELEMETRY_SECONDS = 10
    gpus = list(node.gpus.order_by("index"))
    start = timezone.now()
    Allocation.objects.create(job=job, gpu=gpus[0], started_at=start - timedelta(minutes=5))
    inventory.set_gpu_health([gpus[3]], GpuHealth.LOST)
    assert collect_simulated(start) == 3
    assert collect_simulated(start + timedelta(seconds=10)) == 3
    samples = GpuSample.objects.order_by("at")
    assert set(samples.values_list("simulated", flat=True)) == {True}
    held = list(samples.filter(gpu=gpus[0]))
    assert held[0].job == job and held[0].processes == 1
    free = list(samples.filter(gpu=gpus[1]))
    assert free[0].gpu_util == 0 and free[0].job is None
    assert free[1].energy_j == pytest.approx(free[0].energy_j + 10 * free[1].power_w, abs=0.1)
    assert not samples.filter(gpu=gpus[3]).exists()


@pytest.mark.django_db
def test_the_demo_seed_schedules_simulated_telemetry_for_every_gpu(tmp_path: Any) -> None:
    seed_demo(tmp_path, timezone.now())
    entry = PeriodicTask.objects.get(name=SIMULATED_SCHEDULE_NAME)
    assert entry.task == "telemetry.collect_simulated"
    assert tasks.collect_simulated() == Gpu.objects.count() == 128
    gpu = Gpu.objects.get(node__hostname="a100-00", index=0)
    assert (gpu.power_min_w, gpu.power_max_w, gpu.power_default_w) == (100, 400, 400)
