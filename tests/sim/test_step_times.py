"""Measured step times by placement and per-GPU batch (sim/step_times.py), and the simulator running at them."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.core.config import get_policy
from scheduler.core.types import GpuSlot, NodeInfo
from scheduler.sim.config import SimConfig
from scheduler.sim.engine import simulate
from scheduler.sim.grad_curves import GradCurves
from scheduler.sim.profiles import read_step_times
from scheduler.sim.records import WorkloadJob
from scheduler.sim.step_times import StepTimes, placement_id

from .test_grad_curves import CURVES, MODEL


def linear(nodes: int, gpus: int, bsz: float) -> tuple[float, float]:
    """Step and sync seconds linear in (nodes, GPUs, per-GPU batch): interpolation reproduces them exactly."""
    return 0.5 * nodes + 0.25 * gpus + 0.125 * bsz, 0.1 * nodes


# Measured placements 1, 2 and 11 at per-GPU batches 4 and 8; nodes × GPUs (4, 4) and (4, 8) from the
# scalability file.
PLACEMENTS = [
    (pid, bsz, *linear(len(str(pid)), sum(map(int, str(pid))), bsz)) for pid in (1, 2, 11) for bsz in (4, 8)
]
SCALABILITY = [(n, k, bsz, *linear(n, k, bsz)) for n, k in ((4, 4), (4, 8)) for bsz in (4, 8)]
TIMES = StepTimes(PLACEMENTS, SCALABILITY)


def test_placements_are_named_by_their_smallest_rotation() -> None:
    assert placement_id((4, 2)) == 24
    assert placement_id((0, 2, 1)) == 12  # empty nodes dropped
    assert placement_id((2, 1, 3)) == 132  # rotations 213, 132, 321
    with pytest.raises(ValueError):
        placement_id((0, 0))
    with pytest.raises(ValueError, match="at most 9 GPUs"):
        placement_id((16,))  # would read as nodes of 1 and 6 GPUs


def test_a_measured_placement_is_interpolated_in_the_per_gpu_batch() -> None:
    # Placement 1 at batch 6: halfway between 4 (step 0.5 + 0.25 + 0.5 = 1.25) and 8 (1.75).
    assert TIMES.times((1,), 6) == pytest.approx((1.5, 0.1))
    # (3, 1) is read as placement 13, its smallest rotation.
    assert StepTimes([(13, 4, 1.0, 0.1), (13, 8, 3.0, 0.3)]).times((3, 1), 6) == pytest.approx((2.0, 0.2))
    # Outside a placement's measured batches: its nearest row.
    assert TIMES.times((1,), 10) == pytest.approx(TIMES.times((1,), 8))


def test_an_unmeasured_placement_is_interpolated_in_nodes_gpus_and_batch() -> None:
    # 122: 3 nodes, 5 GPUs, inside the measured (nodes, GPUs, batch) hull; the linear function exactly.
    assert TIMES.times((1, 2, 2), 6) == pytest.approx(linear(3, 5, 6))
    with pytest.raises(ValueError, match="outside"):
        TIMES.times((1, 1, 1, 1, 1), 6)  # 5 nodes: beyond every measurement


def test_a_step_with_accumulation_adds_compute_only_micro_batches() -> None:
    step, sync = TIMES.times((1, 1), 4)
    assert TIMES.step_seconds((1, 1), 4, 2) == pytest.approx(step + 2 * (step - sync))


def test_the_averaged_placements_feed_the_interpolation() -> None:
    # Placements 13 and 22 are both (2 nodes, 4 GPUs): the hull interpolates from their mean there.
    rows = [(13, 4, 2.0, 0.0), (13, 8, 2.0, 0.0), (22, 4, 4.0, 1.0), (22, 8, 4.0, 1.0),
            (1, 4, 1.0, 0.0), (1, 8, 1.0, 0.0), (1111, 4, 5.0, 1.0), (1111, 8, 5.0, 1.0),
            (4, 4, 3.0, 0.5), (4, 8, 3.0, 0.5)]
    times = StepTimes(rows)
    # 112 (3 nodes, 4 GPUs) lies halfway between (2, 4) [mean 3.0, 0.5] and (4, 4) [5.0, 1.0].
    assert times.times((1, 1, 2), 6) == pytest.approx((4.0, 0.75))


def test_step_times_are_read_from_the_measured_files(tmp_path: Path) -> None:
    (tmp_path / "placements.csv").write_text("placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n1,8,2.0,0.0\n")
    (tmp_path / "scalability.csv").write_text("num_nodes,num_replicas,local_bsz,step_time,sync_time\n")
    times = read_step_times(tmp_path / "placements.csv", tmp_path / "scalability.csv")
    assert times.times((1,), 5) == pytest.approx((1.25, 0.0))


def test_a_job_runs_at_its_measured_step_times() -> None:
    # One GPU, batch 2 (M0 = 1): two micro-batches of 1 (one GPU above M0 accumulates), measured 0.5 s each,
    # no sync: 1 s per step, against 2 s by the fitted model (1 s per micro-batch). With φ = 1 the
    # efficiency is 2/3: 2/3 · 2 / 1 s = 4/3 progress per second, 20 units in 15 s (fitted: 30 s).
    # With the curves too: epoch 0 (φ = 1) 10 units in 7.5 s, epoch 1 (efficiency 1) 10 units at 2/s, 5 s.
    nodes = (NodeInfo("n0", "t4", (GpuSlot("g0"),)),)
    job = WorkloadJob("a", 0.0, "t", 1, 1, 20.0, profile="app", batch_size=2)
    times = {"app": {"t4": StepTimes([(1, 1, 0.5, 0.0), (1, 2, 1.0, 0.0)])}}

    def finish(curves: dict[str, GradCurves] | None, step_times: dict[str, dict[str, StepTimes]] | None) -> float:
        result = simulate([job], nodes, get_policy("fifo"), profiles={"app": {"t4": MODEL}},
                          config=SimConfig(round_seconds=1), grad_curves=curves, step_times=step_times)
        assert result.jobs[0].finish_time is not None
        return result.jobs[0].finish_time

    assert finish(None, times) == pytest.approx(15.0)
    assert finish({"app": CURVES}, times) == pytest.approx(12.5)
    assert finish(None, None) == pytest.approx(30.0)
    # Measured on another GPU type only: the fitted model.
    assert finish(None, {"app": {"v100": times["app"]["t4"]}}) == pytest.approx(30.0)
