"""Measured gradient statistics by batch and epoch (sim/grad_curves.py), and the simulator following them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scheduler.core.config import get_policy
from scheduler.core.goodput import GoodputModel, PerfParams
from scheduler.core.types import GpuSlot, NodeInfo
from scheduler.sim.config import SimConfig
from scheduler.sim.engine import simulate
from scheduler.sim.grad_curves import NOISE_CAP, GradCurves
from scheduler.sim.profiles import artifact_jobs, read_grad_curves
from scheduler.sim.records import WorkloadJob

# Batches 1 and 2, two epochs ending at progress 10 and 20. At batch 2: var/sqr = 1 in epoch 0
# (φ = M0 · 1 = 1), |g|² = 0 in epoch 1 (every batch fully efficient). At batch 1: var/sqr = 3.
CURVES = GradCurves(
    batch_sizes=np.array([1, 2]), grad_sqr=np.array([[1.0, 1.0], [2.0, 0.0]]),
    grad_var=np.array([[3.0, 3.0], [2.0, 5.0]]), boundaries=np.array([10.0, 20.0]),
)
# One second per micro-batch of any size, no sync cost: on one GPU a batch of 2 takes two
# micro-batches (AdaptDL accumulates at least two above M0), 2 s, so 1 sample/s.
MODEL = GoodputModel(PerfParams(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0), init_batch_size=1, max_batch_size=2,
                     min_local_bsz=1, max_local_bsz=2, noise_scale=1.0)


def test_epochs_and_their_ends_follow_the_boundaries() -> None:
    assert [CURVES.epoch(p) for p in (0, 9.9, 10, 19.9, 20, 25)] == [0, 0, 1, 1, 1, 1]
    assert [CURVES.next_boundary(p) for p in (0, 10, 19.9, 20)] == [10, 20, 20, float("inf")]


def test_noise_scale_is_measured_at_the_batch_trained_at() -> None:
    assert CURVES.noise_scale(1, 0) == pytest.approx(3.0)
    assert CURVES.noise_scale(2, 0) == pytest.approx(1.0)
    # Between measured batches |g|² and the variance are interpolated separately: 2.5 / 1.5.
    assert CURVES.noise_scale(1.5, 0) == pytest.approx(2.5 / 1.5)
    assert CURVES.noise_scale(2, 1) == NOISE_CAP
    assert MODEL.efficiency(2, NOISE_CAP)[()] == 1.0


def test_a_job_speeds_up_when_its_epoch_says_so() -> None:
    # Epoch 0 at batch 2: efficiency (1 + 1)/(1 + 2) = 2/3 progress per sample: 10 units in 15 s.
    # Epoch 1: efficiency 1: 10 units in 10 s. Without the curves (φ = 1 throughout): 30 s.
    nodes = (NodeInfo("n0", "t4", (GpuSlot("g0"),)),)
    job = WorkloadJob("a", 0.0, "t", 1, 1, 20.0, profile="app", batch_size=2)
    profiles = {"app": {"t4": MODEL}}

    def finish(curves: dict[str, GradCurves] | None) -> float | None:
        result = simulate([job], nodes, get_policy("fifo"), profiles=profiles, config=SimConfig(round_seconds=1),
                          grad_curves=curves)
        return result.jobs[0].finish_time

    assert finish({"app": CURVES}) == pytest.approx(25.0)
    assert finish(None) == pytest.approx(30.0)


def test_curves_are_read_from_the_validation_files(tmp_path: Path) -> None:
    for batch, rows in {4: ["5,1,0.1,2,6", "9,2,0.2,1,3"], 8: ["4,1,0.1,2,2", "10,2,0.2,0,1"]}.items():
        (tmp_path / f"validation-{batch}.csv").write_text("progress,iteration,metric,grad_sqr,grad_var\n"
                                                           + "\n".join(rows) + "\n")
    curves = read_grad_curves(tmp_path)
    assert list(curves.batch_sizes) == [4, 8]
    assert list(curves.boundaries) == [4, 9]  # the smallest progress of each epoch over the curves
    assert curves.noise_scale(4, 0) == pytest.approx(4 * 6 / 2)
    assert curves.noise_scale(8, 1) == NOISE_CAP


def test_a_fixed_batch_job_trains_at_it_whatever_the_policy_proposes() -> None:
    # Pollux proposes the goodput-best batch, 1 (1 unit/s): 20 s. Fixed at batch 2, as the artifact pins ncf:
    # epoch 0 at efficiency 2/3 (15 s), epoch 1 at 1 (10 s), 25 s.
    nodes = (NodeInfo("n0", "t4", (GpuSlot("g0"),)),)
    profiles = {"app": {"t4": MODEL}}

    def finish(fixed: bool) -> float | None:
        job = WorkloadJob("a", 0.0, "t", 1, 1, 20.0, profile="app", batch_size=2, fixed_batch=fixed)
        result = simulate([job], nodes, get_policy("pollux"), profiles=profiles, config=SimConfig(round_seconds=1),
                          grad_curves={"app": CURVES})
        return result.jobs[0].finish_time

    assert finish(True) == pytest.approx(25.0)
    assert finish(False) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="fixed batch"):
        WorkloadJob("b", 0.0, "t", 1, 1, 1.0, profile="app", fixed_batch=True)


def test_the_artifact_pins_ncf_to_one_gpu_and_its_batch_under_pollux_only() -> None:
    jobs = [WorkloadJob("n", 0.0, "t", 1, 64, 5.0, profile="ncf", batch_size=256),
            WorkloadJob("c", 0.0, "t", 1, 64, 5.0, profile="cifar10", batch_size=2048)]
    ncf, cifar = artifact_jobs(jobs, "pollux")
    assert (ncf.min_gpus, ncf.max_gpus, ncf.batch_size, ncf.fixed_batch) == (1, 1, 32768, True)
    assert cifar == jobs[1]
    assert artifact_jobs(jobs, "tiresias") == jobs
