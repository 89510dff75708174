"""Refitting a job's goodput model from its reports (scheduler/live/refit.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from django.utils import timezone

from scheduler import inventory
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.live.refit import refit_job, rescale_to_measurements
from scheduler.models import Allocation, Job, JobReport

PROFILE = FITTED_PROFILES["bert"]["v100"]
GPUS, NODES, LOCAL = np.array([1, 2, 4, 8, 16]), np.array([1, 1, 1, 1, 2]), np.array([8, 8, 8, 6, 4])


def test_compute_and_sync_scales_are_recovered_separately() -> None:
    truth = PROFILE.perf.scaled(1.5, 3.0)
    measured = replace(PROFILE, perf=truth).iteration_time(NODES, GPUS, LOCAL)
    fitted = rescale_to_measurements(PROFILE.perf, NODES, GPUS, LOCAL, measured)
    assert fitted.beta_c / PROFILE.perf.beta_c == pytest.approx(1.5, rel=0.02)
    assert fitted.alpha_n / PROFILE.perf.alpha_n == pytest.approx(3.0, rel=0.05)
    assert fitted.gamma == PROFILE.perf.gamma


def test_without_multi_gpu_reports_sync_follows_compute() -> None:
    one = np.ones(3)
    measured = 2.5 * PROFILE.iteration_time(one, one, [2, 4, 8])
    fitted = rescale_to_measurements(PROFILE.perf, one, one, [2, 4, 8], measured)
    assert fitted.alpha_c / PROFILE.perf.alpha_c == pytest.approx(2.5, rel=0.01)
    assert fitted.alpha_r / PROFILE.perf.alpha_r == pytest.approx(2.5, rel=0.01)


def add_reports(job: Job, configs: list[tuple[int, int]]) -> None:
    for gpus, batch in configs:
        JobReport.objects.create(job=job, at=timezone.now(), progress=0, throughput=100.0 * gpus, batch_size=batch,
                                 gpus=gpus, grad_noise_scale=None)


def test_nothing_is_stored_below_three_configurations(job: Job) -> None:
    add_reports(job, [(1, 32), (1, 32), (2, 64), (2, 64)])
    assert refit_job(job) is None and Job.objects.get(pk=job.pk).fitted_model is None


def test_an_unknown_profile_is_not_refitted(job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(workload_profile="custom")
    job.refresh_from_db()
    add_reports(job, [(1, 32), (2, 64), (4, 128)])
    assert refit_job(job) is None


def test_the_gpu_type_comes_from_the_gpus_it_ran_on(job: Job) -> None:
    specs = [inventory.GpuSpec(i, f"GPU-v-{i}", "Tesla V100-SXM2-32GB", 32768, 300) for i in range(2)]
    node = inventory.register_node("v100-node", specs)
    Allocation.objects.create(job=job, gpu=node.gpus.first(), started_at=timezone.now())
    add_reports(job, [(1, 32), (2, 64), (4, 128)])
    stored = refit_job(job)
    assert stored is not None and stored["gpu_type"] == "v100" and stored["reports"] == 3
    assert stored["noise_scale"] == FITTED_PROFILES["cifar10"]["v100"].noise_scale  # none reported
    assert Job.objects.get(pk=job.pk).fitted_model == stored


def test_one_configuration_on_an_unmeasured_type_replaces_the_estimate(job: Job) -> None:
    # cifar10 was never measured on H100: its model there is an estimate, which one report already beats.
    specs = [inventory.GpuSpec(i, f"GPU-h-{i}", "NVIDIA H100 80GB HBM3", 81920, 700) for i in range(2)]
    node = inventory.register_node("h100-node", specs)
    Allocation.objects.create(job=job, gpu=node.gpus.first(), started_at=timezone.now())
    add_reports(job, [(1, 256), (1, 256)])
    stored = refit_job(job)
    assert stored is not None and stored["gpu_type"] == "h100" and stored["reports"] == 2
    estimate = FITTED_PROFILES["cifar10"]["a100"]
    assert stored["perf"][1] != estimate.perf.beta_c  # rescaled to the report, not the estimate's compute


def test_one_configuration_on_a_measured_type_is_not_enough(job: Job) -> None:
    add_reports(job, [(1, 256), (1, 256)])
    assert refit_job(job) is None
