"""The simulator on small traces whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from scheduler.core.config import get_policy
from scheduler.core.cycle import CycleConfig
from scheduler.core.types import GpuSlot, NodeInfo
from scheduler.sim.config import SimConfig
from scheduler.sim.engine import simulate
from scheduler.sim.job_run import JobRun
from scheduler.sim.limits import MAX_SIMULATED_SECONDS, WorkloadTooLong
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


def test_an_arrival_to_idle_gpus_starts_at_once_not_at_the_next_round() -> None:
    # 4 GPUs, 60 s rounds: "a" takes 2 at the round at 0; "b" arrives at 10 to 2 idle GPUs.
    jobs = [rigid("a", 0, 2, 100), rigid("b", 10, 2, 50)]
    assert by_id(run(jobs, round_seconds=60))["b"].start_time == 10
    waits = by_id(run(jobs, round_seconds=60, cycle=CycleConfig(explain_counts=False, start_between_rounds=False)))
    assert waits["b"].start_time == 60


def test_an_elastic_arrival_starts_at_once_and_leaves_the_running_job_alone() -> None:
    # sia-profiled on 8 GPUs: "a" (1..4) runs from the round at 0 on 4; "b" arrives at 10 to the 4 idle ones and starts
    # there at once. Nothing of "a" changes until the round at 60, which weighs both again.
    jobs = [WorkloadJob("a", 0, "t", 1, 4, 50_000.0, profile="wide"),
            WorkloadJob("b", 10, "t", 1, 4, 50_000.0, profile="wide")]
    result = by_id(simulate(jobs, cluster(2, 4), get_policy("sia-profiled"), profiles=PROFILES,
                            config=SimConfig(round_seconds=60, horizon=59)))
    assert result["b"].start_time == 10
    assert (result["a"].start_time, result["a"].restarts) == (0, 0)


def test_preemption_charges_a_restart_delay_on_resume() -> None:
    # srtf: L holds the cluster; S (shorter) arrives at 30 and takes over at the round at 60.
    # L ran 60 s, resumes at the round at 180 (S done at 160), pays 30 s, then 940 s of work: done at 1150.
    result = by_id(run([rigid("L", 0, 4, 1000), rigid("S", 30, 4, 100)], policy="srtf"))
    assert (result["S"].start_time, result["S"].finish_time) == (60, 160)
    assert (result["L"].finish_time, result["L"].preemptions, result["L"].restarts) == (1150, 1, 1)
    assert result["L"].gpu_seconds == pytest.approx(4 * (60 + 970))


def test_a_policy_sees_a_job_restoring_until_its_restart_delay_ends() -> None:
    # Sia keeps a restoring job where it is (policies/sia.py): the engine's JobInfo must say until when it restores.
    run = JobRun(rigid("j", 0, 2, 100), 0.0, gpus=("n0-g0", "n0-g1"), restart_until=130.0)
    assert run.job_info(100.0).restart_until == 130.0
    assert run.job_info(100.0).restoring(100.0) and not run.job_info(130.0).restoring(130.0)


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


def test_a_workload_that_cannot_finish_within_the_simulated_time_bound_is_refused_naming_the_job() -> None:
    """A job of 1e308 work (or a row submitted at the end of time) kept a what-if at 99 % for ever."""
    with pytest.raises(WorkloadTooLong, match="'endless'"):
        run([rigid("ok", 0, 2, 50), rigid("endless", 10, 2, 1e300)])
    with pytest.raises(WorkloadTooLong, match="'late'"):
        run([rigid("late", MAX_SIMULATED_SECONDS, 1, 10)])
    elastic = WorkloadJob("big", 0, "t", 1, 4, 1e300, profile="wide")
    with pytest.raises(WorkloadTooLong):
        run([elastic], policy="pollux")


def test_no_simulation_runs_past_the_simulated_time_bound() -> None:
    """Even when the check cannot see it coming (jobs that queue behind each other), the clock stops at the bound."""
    day = 86_400.0
    jobs = [rigid(f"q{n}", 0, 4, 200 * day) for n in range(4)]  # each fits alone; together they need 800 days
    result = by_id(run(jobs))
    assert sum(job.finish_time is not None for job in result.values()) == 2


def test_a_power_cap_slows_jobs_down() -> None:
    assert by_id(run([rigid("a", 0, 4, 100)], speed_factor=0.5))["a"].finish_time == 200


def test_a_cap_on_one_gpu_type_slows_only_the_jobs_on_that_type() -> None:
    nodes = (NodeInfo("v", "v100", tuple(GpuSlot(f"v-g{i}") for i in range(4))),
             NodeInfo("t", "t4", tuple(GpuSlot(f"t-g{i}") for i in range(4))))
    jobs = [WorkloadJob("on-v100", 0, "t", 4, 4, 100, gpu_type="v100"),
            WorkloadJob("on-t4", 0, "t", 4, 4, 100, gpu_type="t4")]
    config = SimConfig(speed_factor_by_type={"v100": 0.5})
    result = by_id(simulate(jobs, nodes, get_policy("fifo"), profiles=PROFILES, config=config))
    assert (result["on-v100"].finish_time, result["on-t4"].finish_time) == (200, 100)


def test_a_job_across_gpu_types_runs_at_its_slowest_types_speed() -> None:
    config = SimConfig(speed_factor=0.9, speed_factor_by_type={"v100": 0.5, "a100": 0.8})
    assert config.speed_factor_of({"v100": 2, "a100": 2}) == 0.5
    assert config.speed_factor_of({"t4": 1}) == 0.9  # no cap of its own: the all-types one
    with pytest.raises(ValueError, match="v100"):
        SimConfig(speed_factor_by_type={"v100": 0})


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


def test_node_power_down_saves_idle_power_and_delays_jobs_that_need_more_nodes() -> None:
    from scheduler.sim.metrics import summarise
    from scheduler.sim.powerdown import PowerDownConfig

    jobs = [rigid("small", 0, 2, 3600), rigid("big", 1800, 16, 600)]
    nodes = cluster(4, 4)  # 16 GPUs: "big" needs every node
    always_on = simulate(jobs, nodes, get_policy("fifo"), config=SimConfig(round_seconds=1))
    saving = simulate(jobs, nodes, get_policy("fifo"), config=SimConfig(
        round_seconds=1, power_down=PowerDownConfig(spare_nodes=1, min_off_seconds=60, power_on_seconds=120)))
    # The 3 nodes beyond the spare sleep from t=0; "big" arrives at 1,800, they boot for 120 s, and it
    # still waits for "small" to free the spare node at 3,600: power-down costs it nothing here.
    assert by_id(always_on)["big"].start_time == 3600
    assert by_id(saving)["small"].start_time == 0 and by_id(saving)["big"].start_time == 3600
    off_gpu_seconds = sum(sum(i.off.values()) * i.seconds for i in saving.usage)
    assert off_gpu_seconds > 12 * 1000  # 3 nodes × 4 GPUs off for most of the first 1,800 s
    assert summarise(saving).energy_kwh < summarise(always_on).energy_kwh


def test_power_on_delay_is_paid_by_a_job_that_needs_a_sleeping_node() -> None:
    from scheduler.sim.powerdown import PowerDownConfig

    jobs = [rigid("late", 1000, 8, 100)]  # needs 2 of the 4 nodes; all idle nodes sleep from t=0
    result = simulate(jobs, cluster(4, 4), get_policy("fifo"), config=SimConfig(
        round_seconds=1, power_down=PowerDownConfig(spare_nodes=1, min_off_seconds=0, power_on_seconds=300)))
    assert by_id(result)["late"].start_time == 1300  # 1 spare node is not enough: one more boots for 300 s


def test_a_node_resting_its_minimum_time_is_booted_as_soon_as_it_may() -> None:
    from scheduler.sim.powerdown import PowerDownConfig

    jobs = [rigid("first", 0, 4, 100)]  # every node went down at t=0; each must rest 60 s, then boots 120 s
    result = simulate(jobs, cluster(2, 4), get_policy("fifo"), config=SimConfig(
        round_seconds=1, power_down=PowerDownConfig(spare_nodes=0, min_off_seconds=60, power_on_seconds=120)))
    assert by_id(result)["first"].start_time == 180
