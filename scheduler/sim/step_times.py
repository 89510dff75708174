"""Measured step times by placement and per-GPU batch: how fast a job really runs.

The Pollux artifact's simulator executes a job with the step times it measured, not with
the fitted goodput model its scheduler sees (``simulator/simulator.py``, ``Job.step``:
"Calculate true (simulated) throughput" through ``Application.get_throughput`` of
``simulator/applications.py``, petuum/adaptdl@de25dcc). That function, reproduced here:

1. the placement, GPUs per node, drops empty nodes and is turned to its lexicographically
   smallest rotation, e.g. (4, 2) → (2, 4), read as the number 24;
2. if ``placements.csv`` measured that placement, step and sync time are interpolated
   linearly in the per-GPU batch between its rows (scipy ``interp1d``);
3. otherwise they are interpolated linearly in (nodes, GPUs, per-GPU batch) (scipy
   ``LinearNDInterpolator``) over the placements rows averaged per (nodes, GPUs, batch)
   followed by the ``scalability.csv`` rows, with nodes capped at 16 (the most nodes that
   file measured: ``MAX_NODES``).

A step of a job training its per-GPU share in s + 1 micro-batches takes step_time + s ·
(step_time − sync_time) (``Job.step``): only the last one synchronises.

Two inputs the artifact never produces are handled rather than failing (its
``interp1d`` raises and its ``LinearNDInterpolator`` returns NaN, which it asserts
against): a per-GPU batch outside a placement's measured range takes the nearest measured
row's times, and a point outside the measured (nodes, GPUs, batch) hull raises
``ValueError`` naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy.interpolate import LinearNDInterpolator

# ``Application.get_throughput``: ``num_nodes = min(num_nodes, 16)``, the most nodes measured.
MAX_NODES = 16


def placement_id(placement: Sequence[int]) -> int:
    """GPUs per node as the artifact's ``placements.csv`` names it: empty nodes dropped, the
    lexicographically smallest rotation, digits read as a number ((4, 2) → 24)."""
    counts = tuple(count for count in placement if count)
    if not counts:
        raise ValueError("a placement needs at least one GPU")
    if max(counts) > 9:  # one digit per node: the artifact measured nodes of at most 4 GPUs
        raise ValueError(f"placement {placement}: measured step times name nodes of at most 9 GPUs")
    smallest = min(counts[i:] + counts[:i] for i in range(len(counts)))
    return int("".join(map(str, smallest)))


@dataclass
class StepTimes:
    """One application's measured (step seconds, sync seconds) on one GPU type.

    ``placements``: (placement id, per-GPU batch, step, sync) rows of ``placements.csv``;
    ``scalability``: (nodes, GPUs, per-GPU batch, step, sync) rows of ``scalability.csv``.
    """

    placements: Sequence[tuple[int, float, float, float]]
    scalability: Sequence[tuple[int, int, float, float, float]] = ()
    _by_placement: dict[int, tuple[NDArray, NDArray, NDArray]] = field(init=False, repr=False)
    _points: NDArray = field(init=False, repr=False)
    _values: NDArray = field(init=False, repr=False)
    _interpolator: LinearNDInterpolator | None = field(init=False, repr=False, default=None)
    _memo: dict[tuple[int, float], tuple[float, float]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if not self.placements:
            raise ValueError("need at least one measured placement")
        rows: dict[int, list[tuple[float, float, float]]] = {}
        groups: dict[tuple[int, int, float], list[tuple[float, float]]] = {}
        for pid, bsz, step, sync in self.placements:
            digits = [int(d) for d in str(pid)]
            rows.setdefault(pid, []).append((bsz, step, sync))  # looked up as written, as the artifact does
            groups.setdefault((len(digits), sum(digits), bsz), []).append((step, sync))
        self._by_placement = {}
        for pid, measured in rows.items():
            table = np.array(sorted(measured), dtype=float)
            self._by_placement[pid] = (table[:, 0], table[:, 1], table[:, 2])
        # pandas ``groupby(xs).mean()`` (sorted by key), then the scalability rows in file order.
        keys = sorted(groups)
        points = [list(key) for key in keys] + [[n, k, b] for n, k, b, _, _ in self.scalability]
        values = [list(np.mean(groups[key], axis=0)) for key in keys] + [[s, y] for *_, s, y in self.scalability]
        self._points, self._values = np.array(points, dtype=float), np.array(values, dtype=float)

    def times(self, placement: Sequence[int], local_bsz: float) -> tuple[float, float]:
        """(step seconds, sync seconds) of one synchronised micro-batch of ``local_bsz`` per GPU."""
        pid = placement_id(placement)
        key = (pid, float(local_bsz))
        if key not in self._memo:
            self._memo[key] = self._interpolate(pid, float(local_bsz))
        return self._memo[key]

    def step_seconds(self, placement: Sequence[int], local_bsz: float, accum_steps: int) -> float:
        """Seconds per optimizer step with ``accum_steps`` extra compute-only micro-batches (``Job.step``)."""
        step, sync = self.times(placement, local_bsz)
        return step + accum_steps * (step - sync)

    def _interpolate(self, pid: int, local_bsz: float) -> tuple[float, float]:
        measured = self._by_placement.get(pid)
        if measured is not None:
            bsz, steps, syncs = measured
            return float(np.interp(local_bsz, bsz, steps)), float(np.interp(local_bsz, bsz, syncs))
        digits = [int(d) for d in str(pid)]
        if self._interpolator is None:
            self._interpolator = LinearNDInterpolator(self._points, self._values)
        point = [min(len(digits), MAX_NODES), sum(digits), local_bsz]
        step, sync = (float(v) for v in self._interpolator([point])[0])
        if not (np.isfinite(step) and np.isfinite(sync)):
            raise ValueError(f"placement {pid} at per-GPU batch {local_bsz} is outside the measured step times")
        return step, sync
