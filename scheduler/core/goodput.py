"""Goodput model after Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
Goodput-Optimized Deep Learning", OSDI'21, §3).

Throughput of K GPUs over N nodes at per-GPU batch m:
    T_grad(m)   = α_c + β_c·m
    T_sync(K,N) = 0 for K = 1, else α + β·(K − 2), with (α_n, β_n) within one node and
                  (α_r, β_r) across nodes
    T_iter      = (T_grad^γ + T_sync^γ)^(1/γ)        (γ ≥ 1: how much the two overlap)
    throughput  = K·m / T_iter                          samples per second
A global batch M larger than K·max_local_bsz is reached by gradient accumulation: s + 1
micro-batches per step, s of them compute-only, T = s·T_grad + T_iter (``step_seconds``).
Statistical efficiency at global batch M, for gradient noise scale φ and initial batch M0:
    E(M) = (φ + M0) / (φ + M)
Goodput = throughput × efficiency. A job's progress, in scale-invariant iterations (the
unit of Pollux's traces), grows at goodput / M0 per second: that is ``speed``.

All functions accept numpy arrays for the GPU and node counts so a policy can evaluate
many allocations at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

# Candidate global batch sizes searched for the best goodput: geometric, 50 steps (numpy's
# geomspace default, which Pollux's GoodputFunction.optimize uses).
_BATCH_STEPS = 50


@dataclass(frozen=True)
class PerfParams:
    """Fitted step-time parameters of one workload on one GPU type (seconds)."""

    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float

    def __post_init__(self) -> None:
        if min(self.alpha_c, self.beta_c, self.alpha_n, self.beta_n, self.alpha_r, self.beta_r) < 0:
            raise ValueError("step-time parameters must be ≥ 0")
        if self.gamma < 1:
            raise ValueError("gamma must be ≥ 1")

    def scaled(self, compute: float, sync: float) -> PerfParams:
        """These parameters with (α_c, β_c) multiplied by ``compute`` and every sync term by ``sync``."""
        return PerfParams(
            self.alpha_c * compute, self.beta_c * compute, self.alpha_n * sync, self.beta_n * sync,
            self.alpha_r * sync, self.beta_r * sync, self.gamma,
        )


@dataclass(frozen=True)
class GoodputModel:
    """Speed of one workload profile on one GPU type, as a function of its allocation."""

    perf: PerfParams
    init_batch_size: int  # M0, the batch the hyper-parameters were tuned for
    max_batch_size: int  # largest global batch that still converges
    min_local_bsz: int  # per-GPU batch limits (memory, profile range)
    max_local_bsz: int
    noise_scale: float  # φ used when the job has reported none
    # Not measured on its type: how it was estimated (speed.estimated_model), shown wherever the model is.
    estimated_from: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.init_batch_size <= self.max_batch_size:
            raise ValueError("need 1 ≤ init_batch_size ≤ max_batch_size")
        if not 1 <= self.min_local_bsz <= self.max_local_bsz:
            raise ValueError("need 1 ≤ min_local_bsz ≤ max_local_bsz")
        if self.noise_scale < 0:
            raise ValueError("noise_scale must be ≥ 0")

    def iteration_time(self, num_nodes: ArrayLike, num_gpus: ArrayLike, local_bsz: ArrayLike) -> NDArray:
        p = self.perf
        nodes, gpus, m = (np.asarray(v, dtype=float) for v in (num_nodes, num_gpus, local_bsz))
        t_grad = p.alpha_c + p.beta_c * m
        alpha = np.where(nodes > 1, p.alpha_r, p.alpha_n)
        beta = np.where(nodes > 1, p.beta_r, p.beta_n)
        t_sync = np.where(gpus > 1, alpha + beta * np.maximum(gpus - 2, 0), 0.0)
        return (t_grad**p.gamma + t_sync**p.gamma) ** (1.0 / p.gamma)

    def throughput(self, num_nodes: ArrayLike, num_gpus: ArrayLike, local_bsz: ArrayLike) -> NDArray:
        """Samples per second."""
        gpus, m = np.asarray(num_gpus, dtype=float), np.asarray(local_bsz, dtype=float)
        return gpus * m / self.iteration_time(num_nodes, gpus, m)

    def efficiency(self, global_bsz: ArrayLike, noise_scale: float | None = None) -> NDArray:
        phi = self.noise_scale if noise_scale is None else noise_scale
        return (phi + self.init_batch_size) / (phi + np.asarray(global_bsz, dtype=float))

    def best_batch(
        self, num_nodes: ArrayLike, num_gpus: ArrayLike, noise_scale: float | None = None
    ) -> tuple[NDArray, NDArray]:
        """(goodput, global batch) at the best batch size for each allocation; zero GPUs give goodput 0.

        The candidates are Pollux's (``GoodputFunction.optimize`` with accumulation, as the
        artifact's jobs choose their batch): ``_BATCH_STEPS`` global batches on a geometric grid
        from max(M0, min_local_bsz × GPUs) to max_batch_size, each trained with gradient
        accumulation where its per-GPU share exceeds ``max_local_bsz`` (``step_seconds``).
        """
        nodes, gpus, batch, valid = self._candidates(num_nodes, num_gpus)
        with np.errstate(divide="ignore", invalid="ignore"):
            goodput = batch / self.step_seconds(nodes, gpus, batch) * self.efficiency(batch, noise_scale)
        goodput = np.where(valid, goodput, 0.0)
        best = np.argmax(goodput, axis=1)
        rows = np.arange(len(batch))
        return goodput[rows, best], batch[rows, best]

    def best_global_batch(self, num_nodes: int, num_gpus: int, noise_scale: float | None = None) -> int:
        """The goodput-optimal global batch of one allocation, within [M0, max_batch_size]."""
        _, batch = self.best_batch(num_nodes, num_gpus, noise_scale)
        return int(np.clip(round(float(batch[0])), self.init_batch_size, self.max_batch_size))

    def _candidates(self, num_nodes: ArrayLike, num_gpus: ArrayLike) -> tuple[NDArray, NDArray, NDArray, NDArray]:
        """(nodes, GPUs, global batch, usable) per allocation (rows) and candidate (columns).

        A candidate is unusable on zero GPUs, or when max_batch_size < min_local_bsz × GPUs (its
        micro-batches would be too small, or the batch too large).
        """
        nodes = np.atleast_1d(np.asarray(num_nodes, dtype=float))
        gpus = np.atleast_1d(np.asarray(num_gpus, dtype=float))
        nodes, gpus = (a[:, None] for a in np.broadcast_arrays(nodes, gpus))
        low = np.maximum(self.init_batch_size, self.min_local_bsz * gpus)
        steps = np.linspace(0.0, 1.0, _BATCH_STEPS)[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            batch = low * (self.max_batch_size / low) ** steps
            valid = (gpus > 0) & (batch <= self.max_batch_size * (1 + 1e-9))
            valid &= self._micro_batch(gpus, batch) >= self.min_local_bsz - 1e-9
        return nodes, gpus, np.where(gpus > 0, batch, self.init_batch_size), valid

    def _accumulation(self, gpus: NDArray, global_batch: NDArray) -> NDArray:
        """Micro-batches per optimizer step: enough to keep each at most ``max_local_bsz``; at least 2
        on one GPU above M0 (AdaptDL needs two to estimate the gradient statistics there)."""
        share = global_batch / gpus
        count = np.maximum(1.0, np.ceil(share / self.max_local_bsz - 1e-8))
        return np.where((gpus == 1) & (global_batch > self.init_batch_size + 1e-8), np.maximum(count, 2.0), count)

    def micro_batches(self, num_gpus: int, global_batch: float) -> int:
        """Micro-batches per optimizer step (s + 1) of ``global_batch`` on ``num_gpus`` GPUs (``_accumulation``)."""
        return int(self._accumulation(np.asarray(float(num_gpus)), np.asarray(float(global_batch))))

    def _micro_batch(self, gpus: NDArray, global_batch: NDArray) -> NDArray:
        return global_batch / gpus / self._accumulation(gpus, global_batch)

    def step_seconds(self, num_nodes: ArrayLike, num_gpus: ArrayLike, global_batch: ArrayLike) -> NDArray:
        """Seconds per optimizer step at a global batch: each GPU's share in s + 1 micro-batches
        (``_accumulation``), s compute-only and one synchronised (T = s·T_grad + T_iter)."""
        nodes, gpus, batch = (np.asarray(v, dtype=float) for v in (num_nodes, num_gpus, global_batch))
        with np.errstate(divide="ignore", invalid="ignore"):
            count = self._accumulation(gpus, batch)
            local = batch / gpus / count
            compute = self.perf.alpha_c + self.perf.beta_c * local
            return (count - 1) * compute + self.iteration_time(nodes, gpus, local)

    def speed_grid(self, num_nodes: ArrayLike, num_gpus: ArrayLike, noise_scales: ArrayLike) -> NDArray:
        """Speed for each noise scale (rows) at each allocation (columns), in one vectorised pass.

        Equal to ``speed(num_nodes, num_gpus, φ)`` row by row; used to price many jobs of one
        profile at once.
        """
        return self.best_grid(num_nodes, num_gpus, noise_scales)[0]

    def best_grid(self, num_nodes: ArrayLike, num_gpus: ArrayLike, noise_scales: ArrayLike) -> tuple[NDArray, NDArray]:
        """(speed, best global batch) for each noise scale (rows) at each allocation (columns), in one pass.

        Row by row equal to ``speed`` and to ``best_global_batch`` (the batch rounded and kept within
        [M0, max_batch_size]).
        """
        nodes, gpus, batch, valid = self._candidates(num_nodes, num_gpus)
        phi = np.atleast_1d(np.asarray(noise_scales, dtype=float))[:, None, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            throughput = np.where(valid, batch / self.step_seconds(nodes, gpus, batch), 0.0)
        goodput = throughput[None] * ((phi + self.init_batch_size) / (phi + batch[None]))
        best = np.argmax(goodput, axis=2)
        speed = np.take_along_axis(goodput, best[:, :, None], axis=2)[:, :, 0] / self.init_batch_size
        chosen = np.take_along_axis(np.broadcast_to(batch[None], goodput.shape), best[:, :, None], axis=2)[:, :, 0]
        return speed, np.clip(np.round(chosen), self.init_batch_size, self.max_batch_size)

    def speed_at_batch(
        self, num_nodes: ArrayLike, num_gpus: ArrayLike, global_batch: float, noise_scales: ArrayLike | None = None
    ) -> NDArray:
        """Progress per second at a fixed global batch (a job whose batch nobody tunes).

        The batch is split over the GPUs and trained in micro-batches (``step_seconds``). Rows
        are noise scales (default: the profile's), columns allocations.
        """
        nodes = np.atleast_1d(np.asarray(num_nodes, dtype=float))
        gpus = np.atleast_1d(np.asarray(num_gpus, dtype=float))
        phi = np.atleast_1d(np.asarray(self.noise_scale if noise_scales is None else noise_scales, dtype=float))
        with np.errstate(divide="ignore", invalid="ignore"):
            seconds = self.step_seconds(nodes, gpus, np.full_like(gpus, float(global_batch)))
            samples_per_second = np.where(gpus > 0, global_batch / seconds, 0.0)
        efficiency = (phi[:, None] + self.init_batch_size) / (phi[:, None] + global_batch)
        return samples_per_second[None, :] * efficiency / self.init_batch_size

    def speed(self, num_nodes: ArrayLike, num_gpus: ArrayLike, noise_scale: float | None = None) -> NDArray:
        """Progress per second (scale-invariant iterations) at the best batch size."""
        goodput, _ = self.best_batch(num_nodes, num_gpus, noise_scale)
        return goodput / self.init_batch_size
