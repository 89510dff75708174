"""The simulator on small traces whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from scheduler.core.cycle import CycleConfig
from scheduler.core.policy import get_policy
from scheduler.core.types import GpuSlot, NodeInfo
from scheduler.sim.engine import SimConfig, simulate
from scheduler.sim.records import SimulationResult, WorkloadJob
from tests.core.strategies import PROFILES


def cluster(nodes: int = 1, size: int = 4) -> tuple[NodeInfo, ...]:
    return tuple(NodeInfo(f"n{n}", "a100", tuple(GpuSlot(f"n{n}-g{i}") for i in range(size))) for n in range(nodes))


def rigid(jid: str, submit: float, gpus: int, duration: float, tenant: str = "t") -> WorkloadJob:
    return WorkloadJob(jid, submit, tenant, gpus, gpus, duration)


def run(jobs: list[WorkloadJob], policy: str = "fifo", nodes: int = 1, **config: object) -> SimulationResult:
    return simulate(jobs, cluster(nodes), get_policy(policy), profiles=PROFILES, config=SimConfig(**config))  # type: ignore[arg-type]


def by_id(result: SimulationResult) -> dict:  # type: ignore[type-arg]
    return {job.id: job for job in result.jobs}


def test_a_rigid_trace_job_runs_exactly_its_duration() -> None:
    job = by_id(run([rigid("a", 0, 4, 100)]))["a"]
    assert (job.start_time, job.finish_time, job.gpu_seconds, job.restarts) == (0, 100, 400, 0)


def test_a_waiting_job_starts_at_the_first_round_after_gpus_free_up() -> None:
    jobs = [rigid("a", 0, 4, 100), rigid("b", 10, 4, 50)]
    assert by_id(run(jobs, round_seconds=60))["b"].start_time == 120  # a finishes at 100, next round at 120
    fine = by_id(run(jobs, round_seconds=1))
    assert (fine["b"].start_time, fine["b"].finish_time, fine["b"].jct) == (100, 150, 140)


def test_preemption_charges_a_restart_delay_on_resume() -> None:
    # srtf: L holds the cluster; S (shorter) arrives at 30 and takes over at the round at 60.
    # L ran 60 s, resumes at the round at 180 (S done at 160), pays 30 s, then 940 s of work: done at 1150.
    result = by_id(run([rigid("L", 0, 4, 1000), rigid("S", 30, 4, 100)], policy="srtf"))
    assert (result["S"].start_time, result["S"].finish_time) == (60, 160)
    assert (result["L"].finish_time, result["L"].preemptions, result["L"].restarts) == (1150, 1, 1)
    assert result["L"].gpu_seconds == pytest.approx(4 * (60 + 970))


def test_event_driven_policies_skip_idle_rounds() -> None:
    jobs = [rigid(f"j{i}", i * 5000, 2, 300) for i in range(20)]
    coarse, fine = run(jobs, round_seconds=60), run(jobs, round_seconds=1)
    # One round per arrival and per completion at most, whatever the round length.
    assert coarse.rounds <= 40 and fine.rounds <= 40
    assert all(job.jct == 300 for job in fine.jobs)


def test_elastic_policies_run_every_round_while_jobs_run() -> None:
    job = WorkloadJob("e", 0, "t", 1, 4, 2000, profile="wide")
    result = run([job], policy="pollux", round_seconds=60)
    finish = by_id(result)["e"].finish_time
    assert finish is not None and result.rounds >= int(finish // 60)


def test_usage_intervals_add_up_to_the_jobs_gpu_time() -> None:
    result = run([rigid("L", 0, 4, 1000), rigid("S", 30, 4, 100)], policy="srtf")
    allocated = sum(i.allocated * i.seconds for i in result.usage)
    restarting = sum(sum(i.restarting.values()) * i.seconds for i in result.usage)
    assert allocated == pytest.approx(sum(job.gpu_seconds for job in result.jobs))
    assert restarting == pytest.approx(4 * 30)
    assert all(sum(i.busy.values()) + sum(i.restarting.values()) + sum(i.idle.values()) == 4 for i in result.usage)


def test_a_job_that_can_never_fit_ends_the_run_unfinished() -> None:
    result = by_id(run([rigid("ok", 0, 2, 50), rigid("huge", 0, 8, 50)]))
    assert result["ok"].finish_time == 50 and result["huge"].finish_time is None


def test_a_power_cap_slows_jobs_down() -> None:
    assert by_id(run([rigid("a", 0, 4, 100)], speed_factor=0.5))["a"].finish_time == 200


def test_the_horizon_stops_the_run() -> None:
    result = by_id(run([rigid("a", 0, 4, 100), rigid("b", 0, 4, 100)], horizon=150.0))
    assert result["a"].finish_time == 100 and result["b"].finish_time is None
    assert result["b"].gpu_seconds == pytest.approx(4 * 30)  # started at the round at 120


def test_rescales_restart_the_job() -> None:
    jobs = [WorkloadJob("e", 0, "t", 1, 4, 100_000, profile="wide"), rigid("r", 600, 2, 300)]
    result = by_id(run(jobs, policy="optimus", cycle=CycleConfig(min_rescale_gain=0.0)))
    assert result["e"].rescales >= 1 and result["e"].restarts == result["e"].rescales


def test_fair_share_time_of_a_lone_job_is_its_time_on_the_whole_cluster() -> None:
    job = by_id(run([rigid("a", 0, 4, 100)]))["a"]
    assert job.fair_share_seconds == pytest.approx(100)


def test_duplicate_job_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        run([rigid("a", 0, 1, 1), rigid("a", 5, 1, 1)])
