"""Goodput model after Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
Goodput-Optimized Deep Learning", OSDI'21, §3).

Throughput of K GPUs over N nodes at per-GPU batch m:
    T_grad(m)   = α_c + β_c·m
    T_sync(K,N) = 0 for K = 1, else α + β·(K − 2), with (α_n, β_n) within one node and
                  (α_r, β_r) across nodes
    T_iter      = (T_grad^γ + T_sync^γ)^(1/γ)        (γ ≥ 1: how much the two overlap)
    throughput  = K·m / T_iter                          samples per second
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

# Candidate per-GPU batch sizes searched for the best goodput: geometric, 48 steps.
_BATCH_STEPS = 48


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


@dataclass(frozen=True)
class GoodputModel:
    """Speed of one workload profile on one GPU type, as a function of its allocation."""

    perf: PerfParams
    init_batch_size: int  # M0, the batch the hyper-parameters were tuned for
    max_batch_size: int  # largest global batch that still converges
    min_local_bsz: int  # per-GPU batch limits (memory, profile range)
    max_local_bsz: int
    noise_scale: float  # φ used when the job has reported none

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
        """(goodput, per-GPU batch) at the best batch size for each allocation.

        The global batch stays within [M0, max_batch_size] and the per-GPU batch within
        the profile's limits; allocations where no batch fits get goodput 0. Zero GPUs
        give goodput 0.
        """
        nodes = np.atleast_1d(np.asarray(num_nodes, dtype=float))
        gpus = np.atleast_1d(np.asarray(num_gpus, dtype=float))
        nodes, gpus = np.broadcast_arrays(nodes, gpus)
        m = np.geomspace(self.min_local_bsz, self.max_local_bsz, _BATCH_STEPS)[None, :]
        g = gpus[:, None]
        global_bsz = g * m
        feasible = (global_bsz >= self.init_batch_size - 1e-9) & (global_bsz <= self.max_batch_size + 1e-9)
        # Too few GPUs to reach M0 even at the largest local batch: run M0 spread over them
        # (Pollux accumulates gradients here); model it as the largest local batch.
        with np.errstate(divide="ignore", invalid="ignore"):
            goodput = self.throughput(nodes[:, None], g, m) * self.efficiency(global_bsz, noise_scale)
        goodput = np.where(feasible & (g > 0), goodput, 0.0)
        best = np.argmax(goodput, axis=1)
        rows = np.arange(len(gpus))
        best_goodput = goodput[rows, best]
        # An allocation too small to reach M0 trains at M0 with gradient accumulation.
        small = (best_goodput == 0) & (gpus > 0) & (gpus * self.max_local_bsz < self.init_batch_size)
        accumulated = self._accumulated_goodput(nodes, gpus)
        best_goodput = np.where(small, accumulated, best_goodput)
        best_local = np.where(small, self.max_local_bsz, m[0, best])
        return best_goodput, best_local

    def _accumulated_goodput(self, nodes: NDArray, gpus: NDArray) -> NDArray:
        """Goodput at M0 reached by accumulating gradients over several local steps."""
        with np.errstate(divide="ignore", invalid="ignore"):
            samples_per_second = self.throughput(nodes, gpus, np.full_like(gpus, self.max_local_bsz))
        return np.where(gpus > 0, samples_per_second, 0.0)  # efficiency at M0 is exactly 1

    def speed_grid(self, num_nodes: ArrayLike, num_gpus: ArrayLike, noise_scales: ArrayLike) -> NDArray:
        """Speed for each noise scale (rows) at each allocation (columns), in one vectorised pass.

        Equal to ``speed(num_nodes, num_gpus, φ)`` row by row; used to price many jobs of one
        profile at once.
        """
        nodes = np.atleast_1d(np.asarray(num_nodes, dtype=float))[:, None]
        gpus = np.atleast_1d(np.asarray(num_gpus, dtype=float))[:, None]
        phi = np.atleast_1d(np.asarray(noise_scales, dtype=float))[:, None, None]
        m = np.geomspace(self.min_local_bsz, self.max_local_bsz, _BATCH_STEPS)[None, :]
        global_bsz = gpus * m
        feasible = (global_bsz >= self.init_batch_size - 1e-9) & (global_bsz <= self.max_batch_size + 1e-9) & (gpus > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            throughput = np.where(feasible, self.throughput(nodes, gpus, m), 0.0)
            efficiency = np.where(feasible, (phi + self.init_batch_size) / (phi + global_bsz[None]), 0.0)
        goodput = (throughput[None] * efficiency).max(axis=2)
        gpus_row, nodes_row = gpus[:, 0], nodes[:, 0]
        small = (gpus_row > 0) & (gpus_row * self.max_local_bsz < self.init_batch_size)
        goodput = np.where((goodput == 0) & small[None], self._accumulated_goodput(nodes_row, gpus_row)[None], goodput)
        return goodput / self.init_batch_size

    def speed_at_batch(
        self, num_nodes: ArrayLike, num_gpus: ArrayLike, global_batch: float, noise_scales: ArrayLike | None = None
    ) -> NDArray:
        """Progress per second at a fixed global batch (a job whose batch nobody tunes).

        The batch is split over the GPUs; a per-GPU share above ``max_local_bsz`` is
        reached by accumulating gradients over s micro-steps: (s − 1) compute-only steps
        and one synchronised step. Rows are noise scales (default: the profile's), columns
        allocations.
        """
        nodes = np.atleast_1d(np.asarray(num_nodes, dtype=float))
        gpus = np.atleast_1d(np.asarray(num_gpus, dtype=float))
        phi = np.atleast_1d(np.asarray(self.noise_scale if noise_scales is None else noise_scales, dtype=float))
        with np.errstate(divide="ignore", invalid="ignore"):
            share = global_batch / gpus
            steps = np.maximum(1.0, np.ceil(share / self.max_local_bsz))
            local = share / steps
            seconds = (steps - 1) * (self.perf.alpha_c + self.perf.beta_c * local)
            seconds = seconds + self.iteration_time(nodes, gpus, local)
            samples_per_second = np.where(gpus > 0, global_batch / seconds, 0.0)
        efficiency = (phi[:, None] + self.init_batch_size) / (phi[:, None] + global_batch)
        return samples_per_second[None, :] * efficiency / self.init_batch_size

    def speed(self, num_nodes: ArrayLike, num_gpus: ArrayLike, noise_scale: float | None = None) -> NDArray:
        """Progress per second (scale-invariant iterations) at the best batch size."""
        goodput, _ = self.best_batch(num_nodes, num_gpus, noise_scale)
        return goodput / self.init_batch_size
