"""Measured gradient statistics by batch size and epoch: the statistical efficiency a job really gets.

The Pollux artifact's simulator (``simulator/applications.py``, ``Application.get_grad_stats``,
used in ``simulator.py``'s ``Job.step``; REFERENCE-SETUP.md: "the noise scale follows the
measured grad_sqr / grad_var of the current epoch") does not give a job one noise scale. In
epoch e at global batch B it reads |g|² and the variance from row e of the validation curves
``validation-<B'>.csv`` of the two measured batches B' around B, interpolated linearly in B,
and the job progresses (var + sqr) / (var / scale + sqr) scale-invariant iterations per
step, scale = B / M0. That is the efficiency (φ + M0) / (φ + B) of goodput.py with
φ = M0 · var / sqr measured *at B*: the curves of large batches see much larger φ than
the initial-batch curve (BERT at B = 384: φ ≈ 12,000 against 773 at M0), so one φ per
application makes large batches too slow for some applications and too fast for others.

Epoch e spans progress [P(e), P(e + 1)), P(e + 1) the smallest cumulative ``progress``
of row e over the curves (``Application.get_progress``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# φ when |g|² is measured as 0 (DeepSpeech2's last epochs at small batches): every batch is
# fully efficient. Finite so that (φ + M0) / (φ + B) stays exactly 1.0 in floating point.
NOISE_CAP = 1e30
# Relative slack when locating a progress among the epoch boundaries, so that a job banked
# exactly at a boundary (up to rounding) counts as having crossed it.
_SLACK = 1e-9


@dataclass(frozen=True)
class GradCurves:
    """One application's validation curves: per measured batch (rows) and epoch (columns)."""

    batch_sizes: NDArray  # measured global batches, ascending; the first is M0
    grad_sqr: NDArray  # (batches, epochs)
    grad_var: NDArray  # (batches, epochs)
    boundaries: NDArray  # progress at the end of each epoch, ascending

    def __post_init__(self) -> None:
        shape = (len(self.batch_sizes), len(self.boundaries))
        if min(shape) < 1 or self.grad_sqr.shape != shape or self.grad_var.shape != shape:
            raise ValueError("need ≥ 1 batch and epoch, and gradient statistics of shape (batches, epochs)")
        if np.any(np.diff(self.batch_sizes) <= 0) or np.any(np.diff(self.boundaries) < 0):
            raise ValueError("batches must ascend and epoch boundaries must not descend")

    @property
    def init_batch_size(self) -> int:
        return int(self.batch_sizes[0])

    def epoch(self, progress: float) -> int:
        """The epoch a job at ``progress`` trains in (the last one once all are done)."""
        crossed = int(np.searchsorted(self.boundaries, progress * (1 + _SLACK) + _SLACK, side="right"))
        return min(crossed, len(self.boundaries) - 1)

    def next_boundary(self, progress: float) -> float:
        """Progress at the end of the epoch ``progress`` is in; inf after the last epoch."""
        index = int(np.searchsorted(self.boundaries, progress * (1 + _SLACK) + _SLACK, side="right"))
        return float(self.boundaries[index]) if index < len(self.boundaries) else float("inf")

    def noise_scale(self, batch_size: float, epoch: int) -> float:
        """φ = M0 · var / sqr measured in ``epoch`` at global ``batch_size`` (clamped to the measured range)."""
        batches = self.batch_sizes.astype(float)
        sqr = float(np.interp(batch_size, batches, self.grad_sqr[:, epoch]))
        var = float(np.interp(batch_size, batches, self.grad_var[:, epoch]))
        if sqr <= 0:
            return NOISE_CAP
        return float(min(max(self.init_batch_size * var / sqr, 0.0), NOISE_CAP))
