"""Forecasts from a state, on queues whose start and finish times are worked out by hand."""

from __future__ import annotations

import pytest

from scheduler.core.config import get_policy
from scheduler.sim.config import SimConfig
from scheduler.sim.forecast import ForecastInput, forecast, sample_arrivals
from scheduler.sim.records import WorkloadJob
from scheduler.sim.start import RunningJob, StartState
from tests.sim.test_engine import cluster, rigid

NOW = 1000.0


def given(jobs: list[WorkloadJob], start: StartState, **config: object) -> ForecastInput:
    settings = {"round_seconds": 10.0, "restart_seconds": 0.0, **config}
    return ForecastInput(jobs, cluster(), (), {}, start, SimConfig(**settings))  # type: ignore[arg-type]


def queue() -> tuple[list[WorkloadJob], StartState]:
    # One node of 4 GPUs. A has run 200 of its 300 s on all 4; B (2 GPUs, 50 s), C (2, 80 s), D (4, 10 s) wait.
    jobs = [rigid("A", 100, 4, 300), rigid("B", 500, 2, 50), rigid("C", 600, 2, 80), rigid("D", 700, 4, 10)]
    running = {"A": RunningJob(tuple(f"n0-g{i}" for i in range(4)), started_at=800.0, progress=200.0)}
    return jobs, StartState(NOW, running)


def test_fifo_forecast_of_a_queue_worked_by_hand() -> None:
    # A ends at 1100; the round then starts B and C (2 + 2 GPUs): B ends 1150, C 1180; D (4) starts at 1180.
    jobs, start = queue()
    estimates = forecast(given(jobs, start), get_policy("fifo")).estimates
    assert (estimates["A"].start, estimates["A"].finish) == (None, 1100)
    assert (estimates["B"].start, estimates["B"].finish) == (1100, 1150)
    assert (estimates["C"].start, estimates["C"].finish) == (1100, 1180)
    assert (estimates["D"].start, estimates["D"].finish) == (1180, 1190)
    assert (estimates["B"].after_job, dict(estimates["B"].after_gpus)) == ("A", {"a100": 4})
    assert estimates["D"].after_job == "C"


def test_rounds_and_restart_delays_move_the_forecast() -> None:
    # Rounds every 60 s: A's end at 1100 is seen at 1140 (a multiple of 60). A preempted job (progress > 0)
    # pays the 30 s restart delay when it resumes: B, which had run 20 of its 50 s, ends at 1140 + 30 + 30.
    jobs, start = queue()
    start = StartState(NOW, start.running, progress={"B": 20.0})
    estimates = forecast(given(jobs, start, round_seconds=60.0, restart_seconds=30.0), get_policy("fifo")).estimates
    assert (estimates["B"].start, estimates["B"].finish) == (1140, 1200)
    assert (estimates["C"].start, estimates["C"].finish) == (1140, 1220)


def test_a_restarting_job_makes_no_progress_until_its_delay_ends() -> None:
    jobs, start = queue()
    held = start.running["A"]
    start = StartState(NOW, {"A": RunningJob(held.gpus, 800.0, progress=200.0, restart_until=1050.0)})
    assert forecast(given(jobs[:1], start), get_policy("fifo")).estimates["A"].finish == 1150


def test_arrival_samples_give_a_range_that_contains_the_median() -> None:
    jobs, start = queue()
    recent = [rigid("r1", 0, 2, 100), rigid("r2", 0, 4, 100)]
    samples = [sample_arrivals(recent, 600.0, NOW, 2000.0, seed) for seed in range(5)]
    assert all(job.submit_time > NOW for sample in samples for job in sample)
    assert samples[0] != samples[1] and samples[0] == sample_arrivals(recent, 600.0, NOW, 2000.0, 0)
    result = forecast(given(jobs, start), get_policy("fifo"), samples)
    d = result.estimates["D"]
    assert result.samples == 5
    assert d.start_range is not None and d.start_range[0] <= d.start <= d.start_range[1]
    # FIFO: later arrivals queue behind D, so D's start is the point forecast's in every sample.
    assert d.start_range == (pytest.approx(1180), pytest.approx(1180))


def test_an_unknown_gpu_or_job_in_the_start_state_is_refused() -> None:
    jobs, _ = queue()
    with pytest.raises(ValueError, match="not in the cluster"):
        forecast(given(jobs, StartState(NOW, {"A": RunningJob(("nowhere",), 800.0)})), get_policy("fifo"))
    with pytest.raises(ValueError, match="not in the workload"):
        forecast(given(jobs, StartState(NOW, {"Z": RunningJob(("n0-g0",), 800.0)})), get_policy("fifo"))
    with pytest.raises(ValueError, match="held by two"):
        both = {"A": RunningJob(("n0-g0",), 800.0), "B": RunningJob(("n0-g0",), 800.0)}
        forecast(given(jobs, StartState(NOW, both)), get_policy("fifo"))


def test_a_job_that_needs_a_type_waits_for_gpus_of_that_type() -> None:
    """An A100 job and a V100 job both end at 1050; a job that needs A100s starts then and waits for the A100
    job's GPUs, not for the V100s freed at the same moment (the old reading named whichever id sorted last)."""
    import dataclasses

    from scheduler.core.types import GpuSlot, NodeInfo

    nodes = (NodeInfo("a", "a100", tuple(GpuSlot(f"a-g{i}") for i in range(4))),
             NodeInfo("v", "v100", tuple(GpuSlot(f"v-g{i}") for i in range(4))))
    jobs = [dataclasses.replace(rigid("A", 100, 4, 300), gpu_type="a100"),
            dataclasses.replace(rigid("V", 100, 4, 300), gpu_type="v100"),
            dataclasses.replace(rigid("W", 500, 4, 50), gpu_type="a100"),
            dataclasses.replace(rigid("X", 600, 4, 50), gpu_type="v100")]
    running = {"A": RunningJob(tuple(f"a-g{i}" for i in range(4)), started_at=800.0, progress=250.0),
               "V": RunningJob(tuple(f"v-g{i}" for i in range(4)), started_at=800.0, progress=250.0)}
    config = SimConfig(round_seconds=10.0, restart_seconds=0.0)
    given_input = ForecastInput(jobs, nodes, (), {}, StartState(NOW, running), config)

    estimates = forecast(given_input, get_policy("fifo")).estimates

    assert estimates["W"].start == 1050 and estimates["X"].start == 1050
    assert (estimates["W"].after_job, dict(estimates["W"].after_gpus)) == ("A", {"a100": 4})
    assert (estimates["X"].after_job, dict(estimates["X"].after_gpus)) == ("V", {"v100": 4})
