"""The Pollux goodput model behaves as the paper says, and the fit recovers known parameters."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.goodput import GoodputModel, PerfParams
from scheduler.core.goodput_fit import (
    PARAM_NAMES,
    default_noise_scale,
    evaluate_fit,
    fit_perf_params,
    initial_batch_size,
    max_batch_size,
    predict_step_time,
)

PERF = PerfParams(alpha_c=0.02, beta_c=0.0005, alpha_n=0.004, beta_n=0.0005, alpha_r=0.02, beta_r=0.003, gamma=1.5)
MODEL = GoodputModel(PERF, init_batch_size=128, max_batch_size=4096, min_local_bsz=16, max_local_bsz=512,
                     noise_scale=800.0)
GPUS_PER_NODE = 8


def packed(gpus: np.ndarray) -> np.ndarray:
    return np.ceil(gpus / GPUS_PER_NODE)


def test_throughput_grows_then_saturates_with_gpus() -> None:
    gpus = np.arange(1, 257)
    throughput = MODEL.throughput(packed(gpus), gpus, 64)
    assert np.all(np.diff(throughput[:GPUS_PER_NODE]) > 0)  # within a node: more GPUs, more samples/s
    per_gpu = throughput / gpus
    assert np.all(np.diff(per_gpu) <= 1e-12)  # never better than linear
    # Sync time grows as β_r·(K − 2), so samples/s is bounded by m / β_r however many GPUs.
    assert throughput[-1] < 64 / PERF.beta_r
    assert throughput[-1] < 1.3 * throughput[127]


def test_multi_node_is_slower_than_one_node_for_the_same_gpus() -> None:
    assert PERF.alpha_r > PERF.alpha_n
    one_node, two_nodes = MODEL.iteration_time([1, 2], [8, 8], 64)
    assert two_nodes > one_node
    assert MODEL.speed(2, 8)[0] < MODEL.speed(1, 8)[0]


def test_one_gpu_has_no_sync_time() -> None:
    assert MODEL.iteration_time(1, 1, 100)[()] == pytest.approx(PERF.alpha_c + PERF.beta_c * 100)


def test_efficiency_is_one_at_the_initial_batch_and_falls_with_batch() -> None:
    batches = np.array([128, 256, 1024, 4096])
    efficiency = MODEL.efficiency(batches)
    assert efficiency[0] == pytest.approx(1.0)
    assert np.all(np.diff(efficiency) < 0)
    assert efficiency[-1] == pytest.approx((800 + 128) / (800 + 4096))


@given(gpus=st.integers(1, 128), noise=st.floats(0, 1e5))
def test_best_batch_stays_within_the_limits(gpus: int, noise: float) -> None:
    goodput, batch = MODEL.best_batch(packed(np.array(gpus)), gpus, noise)
    assert goodput[0] > 0
    assert MODEL.init_batch_size - 1e-6 <= batch[0] <= MODEL.max_batch_size + 1e-6
    # Above max_local_bsz per GPU the batch is reached by accumulating micro-batches within the limits.
    micro = batch[0] / gpus / MODEL._accumulation(np.array(gpus), batch)[0]
    assert MODEL.min_local_bsz - 1e-9 <= micro <= MODEL.max_local_bsz + 1e-9


@given(gpus=st.lists(st.integers(0, 128), min_size=1, max_size=6), noises=st.lists(st.floats(0, 1e5), min_size=1,
                                                                                    max_size=4))
def test_the_grid_gives_each_noise_scale_what_one_at_a_time_gives(gpus: list[int], noises: list[float]) -> None:
    counts = np.array(gpus)
    speed, batch = MODEL.best_grid(packed(counts), counts, noises)
    for row, noise in enumerate(noises):
        assert speed[row] == pytest.approx(MODEL.speed(packed(counts), counts, noise), rel=1e-12, abs=0)
        assert list(batch[row]) == [MODEL.best_global_batch(int(packed(np.array(g))), g, noise) for g in gpus]


def test_accumulation_reaches_large_batches_on_few_gpus() -> None:
    # One GPU above M0 accumulates at least two micro-batches (AdaptDL's rule); T = s·T_grad + T_iter.
    compute = PERF.alpha_c + PERF.beta_c * 256
    assert MODEL.step_seconds(1, 1, 512)[()] == pytest.approx(2 * compute)
    assert MODEL.step_seconds(1, 1, 128)[()] == pytest.approx(PERF.alpha_c + PERF.beta_c * 128)
    # A large noise scale makes a batch beyond max_local_bsz × GPUs worth its extra steps.
    _, batch = MODEL.best_batch(1, 2, noise_scale=1e6)
    assert batch[0] > 2 * MODEL.max_local_bsz


def test_larger_noise_scale_means_larger_batches_and_better_scaling() -> None:
    gpus = np.array([1, 32])
    _, small_batch = MODEL.best_batch(packed(gpus), gpus, noise_scale=50.0)
    _, large_batch = MODEL.best_batch(packed(gpus), gpus, noise_scale=50_000.0)
    assert large_batch[1] > small_batch[1]
    speedup_small = MODEL.speed(packed(gpus), gpus, 50.0)
    speedup_large = MODEL.speed(packed(gpus), gpus, 50_000.0)
    assert speedup_large[1] / speedup_large[0] > speedup_small[1] / speedup_small[0]


def test_zero_gpus_make_no_progress() -> None:
    assert MODEL.speed(0, 0)[0] == 0.0
    speeds = MODEL.speed([0, 1], [0, 4])
    assert speeds[0] == 0.0 and speeds[1] > 0


def synthetic(perf: PerfParams, max_nodes: int = 4, per_node: int = 4) -> tuple[np.ndarray, ...]:
    """Every (nodes, GPUs per node, batch) of a small grid and the model's step time there."""
    grid = [(n, n * k, m) for n in range(1, max_nodes + 1) for k in range(1, per_node + 1)
            for m in (8, 16, 32, 64, 128)]
    nodes, gpus, bsz = (np.array(column, dtype=float) for column in zip(*grid, strict=True))
    return nodes, gpus, bsz, predict_step_time(perf, nodes, gpus, bsz)


def as_array(perf: PerfParams) -> np.ndarray:
    return np.array([getattr(perf, name) for name in PARAM_NAMES])


@pytest.mark.parametrize("truth", [PERF, PerfParams(0.1, 0.002, 0.05, 0.001, 0.3, 0.01, 3.0),
                                   PerfParams(0.005, 1e-5, 0.001, 0.0, 0.004, 0.002, 1.0)])
def test_fit_recovers_the_parameters_of_exact_data(truth: PerfParams) -> None:
    nodes, gpus, bsz, step = synthetic(truth)
    fitted, report = fit_perf_params(nodes, gpus, bsz, step, sync_time=0.2 * step)
    np.testing.assert_allclose(as_array(fitted), as_array(truth), rtol=1e-3, atol=1e-6)
    assert report.rows == len(step) and report.median_rel_error < 1e-5 and report.unidentified == ()


def test_fit_recovers_step_times_from_noisy_data() -> None:
    nodes, gpus, bsz, step = synthetic(PERF)
    noisy = step * np.exp(np.random.default_rng(7).normal(0, 0.03, len(step)))
    fitted, report = fit_perf_params(nodes, gpus, bsz, noisy)
    assert np.max(np.abs(predict_step_time(fitted, nodes, gpus, bsz) / step - 1)) < 0.03
    assert 0.01 < report.median_rel_error < 0.04  # about the noise, no more
    assert fitted.gamma == pytest.approx(PERF.gamma, rel=0.15)


def test_fit_fixes_what_single_node_data_cannot_tell() -> None:
    nodes, gpus, bsz, step = synthetic(PERF, max_nodes=1)
    fitted, report = fit_perf_params(nodes, gpus, bsz, step)
    assert report.unidentified == ("alpha_r", "beta_r")
    assert (fitted.alpha_r, fitted.beta_r) == (fitted.alpha_n, fitted.beta_n)
    assert fitted.alpha_c == pytest.approx(PERF.alpha_c, rel=1e-3)


def test_fit_of_one_gpu_one_batch_leaves_compute_proportional_to_batch() -> None:
    fitted, report = fit_perf_params([1, 1], [1, 1], [32, 32], [0.064, 0.064])
    assert fitted.alpha_c == 0 and fitted.beta_c == pytest.approx(0.002)
    assert set(report.unidentified) == {"alpha_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma"}
    assert fitted.gamma == 1.0


def test_fit_keeps_inter_node_no_cheaper_than_intra_node() -> None:
    inverted = dataclasses.replace(PERF, alpha_n=0.03, alpha_r=0.01)  # data "showing" a faster network
    nodes, gpus, bsz, step = synthetic(inverted)
    fitted, _ = fit_perf_params(nodes, gpus, bsz, step)
    assert fitted.alpha_r >= fitted.alpha_n and fitted.beta_r >= fitted.beta_n
    assert 1 <= fitted.gamma <= 10


@pytest.mark.parametrize(
    "columns, problem",
    [
        (([1], [1, 2], [8, 8], [0.1, 0.2]), "equally long"),
        (([], [], [], []), "non-empty"),
        (([2], [1], [8], [0.1]), "GPUs ≥ nodes"),
        (([1], [1], [8], [0.0]), "step time > 0"),
        (([1], [1], [8], [np.inf]), "finite"),
    ],
)
def test_fit_rejects_impossible_rows(columns: tuple[list[float], ...], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        fit_perf_params(*columns)


def test_fit_report_measures_relative_error() -> None:
    nodes, gpus, bsz, step = synthetic(PERF)
    report = evaluate_fit(PERF, nodes, gpus, bsz, step * 1.25)  # every prediction 20 % low
    assert report.median_rel_error == pytest.approx(0.2) and report.p90_rel_error == pytest.approx(0.2)
    assert report.rmse_log == pytest.approx(np.log(1.25))


def test_statistics_from_validation_curves() -> None:
    assert (initial_batch_size([512, 128, 4096]), max_batch_size([512, 128, 4096])) == (128, 4096)
    sqr, var = [2.0, 1.0, 0.5, 0.0, -1.0, 1.0], [2.0, 2.0, 1.5, 1.0, 1.0, -0.1]
    # Usable ratios 1, 2, 3 (|g|² ≤ 0 and negative variance left out): median 2, times M0.
    assert default_noise_scale(sqr, var, 128) == pytest.approx(256.0)
    with pytest.raises(ValueError, match="no row"):
        default_noise_scale([0.0], [1.0], 128)
    with pytest.raises(ValueError, match="at least one batch"):
        initial_batch_size([])
