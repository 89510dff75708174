"""Fit the Pollux goodput model (goodput.py) to measured step times and validation curves.

Throughput: ``fit_perf_params`` finds the seven ``PerfParams`` that best predict the
measured seconds per iteration of each (nodes, GPUs, per-GPU batch) configuration.

* Objective: least squares on ``log(predicted) − log(measured)`` step time, which is the
  relative error to first order. A scheduler compares throughputs as ratios, so a 10 %
  miss on a 0.01 s NCF step must cost as much as one on a 2 s BERT step; an absolute
  objective would fit the slowest configurations and ignore the rest. The residuals go
  through scipy's ``soft_l1`` loss with a scale of 0.1 (≈ 10 %): beyond that a residual
  counts linearly, not quadratically, so a few wild measurements (ImageNet on V100 has
  multi-node steps of 13 s beside 0.3 s neighbours) do not drag the whole fit.
* Constraints: every α, β ≥ 0 and γ ∈ [1, 10] (Pollux's bounds). Inter-node parameters
  are fitted as intra-node plus a non-negative excess (α_r = α_n + Δα, β_r = β_n + Δβ):
  crossing the network is never cheaper than staying on a node, which noisy data would
  otherwise sometimes "show".
* Parameters the data cannot identify are fixed, not left to the optimiser's whim, and
  named in ``FitReport.unidentified``: one batch size leaves α_c = 0 (time ∝ batch, as
  AdaptDL does); no multi-node rows give α_r = α_n and β_r = β_n (the most optimistic
  value the constraint allows); no rows past two GPUs leave that link's β = 0; no
  multi-GPU rows at all leave every sync term 0 and γ = 1.
* γ makes the problem non-convex: the fit starts from γ ∈ {1.5, 3, 6} and keeps the
  lowest cost. ``sync_time`` only seeds the start (compute ≈ step − sync, α ≈ sync): the
  measured sync time is the all-reduce *wait* that did not overlap compute, not the
  model's T_sync, and adding it as a second residual made the step-time fit worse on
  most of the measured (application, GPU) pairs.

Statistics: ``initial_batch_size``, ``max_batch_size`` and ``default_noise_scale`` turn
the validation curves (one per global batch size B) into M0, the largest batch and φ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import least_squares

from .goodput import GoodputModel, PerfParams

PARAM_NAMES = ("alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma")
_GAMMA_STARTS = (1.5, 3.0, 6.0)
_GAMMA_MAX = 10.0
_LOSS_SCALE = 0.1  # log-units (≈ 10 % relative error) where soft_l1 turns linear
# Optimiser coordinates: alpha_c, beta_c, alpha_n, beta_n, Δalpha_r, Δbeta_r, gamma.
_LOWER = np.array([0.0] * 6 + [1.0])
_UPPER = np.array([np.inf] * 6 + [_GAMMA_MAX])


@dataclass(frozen=True)
class FitReport:
    """How well fitted parameters predict the measured step times they were fitted to."""

    rows: int
    median_rel_error: float  # median of |predicted / measured − 1|
    p90_rel_error: float  # 90th percentile of the same
    rmse_log: float  # root mean square of log(predicted / measured)
    unidentified: tuple[str, ...] = ()  # parameters fixed because the data cannot tell them

    def __post_init__(self) -> None:
        if self.rows < 1 or min(self.median_rel_error, self.p90_rel_error, self.rmse_log) < 0:
            raise ValueError("a fit report needs ≥ 1 row and non-negative errors")


@dataclass(frozen=True)
class _Data:
    nodes: NDArray
    gpus: NDArray
    bsz: NDArray
    step: NDArray
    sync: NDArray | None


def fit_perf_params(
    num_nodes: ArrayLike,
    num_gpus: ArrayLike,
    local_bsz: ArrayLike,
    step_time: ArrayLike,
    sync_time: ArrayLike | None = None,
) -> tuple[PerfParams, FitReport]:
    """Step-time parameters that best fit the measurements, and how well they fit.

    One row per measured configuration; ``sync_time`` (optional) seeds the search. Raises
    ``ValueError`` for empty, mismatched or impossible rows (non-positive times or batch,
    fewer GPUs than nodes).
    """
    data = _checked(num_nodes, num_gpus, local_bsz, step_time, sync_time)
    free = _identifiable(data)
    fits = [_solve(data, free, gamma) for gamma in _GAMMA_STARTS]
    best = min(fits, key=lambda fit: fit[1])[0]
    perf = _to_params(best)
    unidentified = tuple(name for name, ok in zip(PARAM_NAMES, free, strict=True) if not ok)
    return perf, evaluate_fit(perf, data.nodes, data.gpus, data.bsz, data.step, unidentified)


def evaluate_fit(
    perf: PerfParams,
    num_nodes: ArrayLike,
    num_gpus: ArrayLike,
    local_bsz: ArrayLike,
    step_time: ArrayLike,
    unidentified: tuple[str, ...] = (),
) -> FitReport:
    """Errors of ``perf``'s predicted step times against the measured ones."""
    measured = np.asarray(step_time, dtype=float)
    log_error = np.log(predict_step_time(perf, num_nodes, num_gpus, local_bsz) / measured)
    relative = np.abs(np.expm1(log_error))
    return FitReport(
        rows=len(measured),
        median_rel_error=float(np.median(relative)),
        p90_rel_error=float(np.quantile(relative, 0.9)),
        rmse_log=float(np.sqrt(np.mean(log_error**2))),
        unidentified=unidentified,
    )


def predict_step_time(perf: PerfParams, num_nodes: ArrayLike, num_gpus: ArrayLike, local_bsz: ArrayLike) -> NDArray:
    """Seconds per iteration as goodput.py's model computes it (batch limits play no part)."""
    model = GoodputModel(perf, init_batch_size=1, max_batch_size=1, min_local_bsz=1, max_local_bsz=1, noise_scale=0)
    return model.iteration_time(num_nodes, num_gpus, local_bsz)


def _checked(nodes: ArrayLike, gpus: ArrayLike, bsz: ArrayLike, step: ArrayLike, sync: ArrayLike | None) -> _Data:
    columns = [np.asarray(v, dtype=float).ravel() for v in (nodes, gpus, bsz, step)]
    sync_array = None if sync is None else np.asarray(sync, dtype=float).ravel()
    lengths = {len(c) for c in columns} | ({len(sync_array)} if sync_array is not None else set())
    if len(lengths) != 1 or not columns[0].size:
        raise ValueError(f"need equally long, non-empty columns; got lengths {sorted(lengths)}")
    n, k, m, t = columns
    if not (np.all(n >= 1) and np.all(k >= n) and np.all(m > 0) and np.all(t > 0)):
        raise ValueError("need nodes ≥ 1, GPUs ≥ nodes, local batch > 0 and step time > 0 in every row")
    if not np.all(np.isfinite(np.concatenate(columns))):
        raise ValueError("measurements must be finite")
    return _Data(n, k, m, t, sync_array)


def _identifiable(data: _Data) -> NDArray:
    """Which optimiser coordinates the rows can pin down (see the module docstring)."""
    single, multi = (data.nodes == 1) & (data.gpus > 1), data.nodes > 1
    return np.array([
        len(np.unique(data.bsz)) > 1,
        True,
        bool(single.any()),
        bool((single & (data.gpus > 2)).any()),
        bool(multi.any()),
        bool((multi & (data.gpus > 2)).any()),
        bool((data.gpus > 1).any()),
    ])


def _solve(data: _Data, free: NDArray, gamma: float) -> tuple[NDArray, float]:
    """(optimiser coordinates, cost) of one local fit started at ``gamma``."""
    start = np.where(free, _start(data, gamma), _LOWER)

    def residuals(z: NDArray) -> NDArray:
        full = start.copy()
        full[free] = z
        return np.log(predict_step_time(_to_params(full), data.nodes, data.gpus, data.bsz) / data.step)

    result = least_squares(
        residuals, start[free], bounds=(_LOWER[free], _UPPER[free]), x_scale="jac", loss="soft_l1", f_scale=_LOSS_SCALE
    )
    full = start.copy()
    full[free] = result.x
    return full, float(result.cost)


def _start(data: _Data, gamma: float) -> NDArray:
    """A physically sensible starting point: compute from a line through (batch, step − sync)."""
    compute = data.step if data.sync is None else np.maximum(data.step - data.sync, 0.5 * data.step)
    if len(np.unique(data.bsz)) > 1:
        slope, intercept = np.polyfit(data.bsz, compute, 1)
    else:
        slope, intercept = float(np.median(compute / data.bsz)), 0.0
    typical = float(np.median(data.step))
    sync = np.full_like(data.step, 0.1 * typical) if data.sync is None else data.sync
    alpha_n = _median_or(sync[(data.nodes == 1) & (data.gpus > 1)], 0.1 * typical)
    alpha_r = _median_or(sync[data.nodes > 1], alpha_n)
    floor = 1e-3 * typical
    return np.array([
        max(intercept, floor), max(slope, floor / float(np.max(data.bsz))), max(alpha_n, floor),
        floor / 10, max(alpha_r - alpha_n, floor), floor / 10, gamma,
    ])


def _median_or(values: NDArray, default: float) -> float:
    return float(np.median(values)) if values.size else default


def _to_params(z: NDArray) -> PerfParams:
    alpha_c, beta_c, alpha_n, beta_n, d_alpha, d_beta, gamma = (float(v) for v in z)
    return PerfParams(alpha_c, beta_c, alpha_n, beta_n, alpha_n + d_alpha, beta_n + d_beta, gamma)


def initial_batch_size(batch_sizes: Sequence[int]) -> int:
    """M0: the smallest global batch with a validation curve (the tuned starting point)."""
    return int(_positive_batches(batch_sizes).min())


def max_batch_size(batch_sizes: Sequence[int]) -> int:
    """The largest global batch with a validation curve (the largest known to converge)."""
    return int(_positive_batches(batch_sizes).max())


def _positive_batches(batch_sizes: Sequence[int]) -> NDArray:
    sizes = np.asarray(batch_sizes, dtype=int)
    if not sizes.size or np.any(sizes < 1):
        raise ValueError(f"need at least one batch size, all ≥ 1; got {list(batch_sizes)}")
    return sizes


def default_noise_scale(grad_sqr: ArrayLike, grad_var: ArrayLike, init_batch_size: int) -> float:
    """φ for a job that has reported none: the median PGNS over the given curve rows.

    PGNS = grad_var / grad_sqr × M0 (the traces normalise both to the initial batch).
    The median, because the ratio is heavy-tailed: |g|² shrinks towards convergence and
    the per-epoch estimates swing by 10× (the 90th percentile is often 5-10× the median).
    Rows whose estimates are not usable (|g|² ≤ 0 or variance < 0: the unbiased
    estimators can go negative, as DeepSpeech2's do) are left out.
    """
    sqr, var = np.asarray(grad_sqr, dtype=float).ravel(), np.asarray(grad_var, dtype=float).ravel()
    if sqr.shape != var.shape or init_batch_size < 1:
        raise ValueError("need equally long grad_sqr and grad_var and an initial batch ≥ 1")
    usable = (sqr > 0) & (var >= 0) & np.isfinite(sqr) & np.isfinite(var)
    if not usable.any():
        raise ValueError("no row with grad_sqr > 0 and grad_var ≥ 0 to estimate the noise scale from")
    return float(np.median(var[usable] / sqr[usable]) * init_batch_size)
