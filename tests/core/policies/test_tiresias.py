"""Tiresias by hand: queues by attained GPU-time, FIFO within a queue, the starvation guard, wake_at."""

from __future__ import annotations

import json

import pytest

from scheduler.core.policies.tiresias import TiresiasPolicy
from scheduler.core.types import JobInfo, PolicyResult, PolicyState

from . import cluster, job, snapshot

FOUR_GPUS = cluster(4)


def allocate(*jobs: JobInfo, now: float = 100.0, state: PolicyState | None = None,
             policy: TiresiasPolicy | None = None) -> PolicyResult:
    return (policy or TiresiasPolicy()).allocate(snapshot(FOUR_GPUS, *jobs, now=now), state)


def test_a_job_past_its_queue_threshold_is_demoted_and_preempted_by_a_newer_job() -> None:
    old = job("old", 4, submit=0, holds=4, attained_gpu_seconds=3300)  # ≥ 3250: queue 1
    new = job("new", 4, submit=50)
    result = allocate(old, new)
    assert dict(result.allocations) == {"old": 0, "new": 4}
    assert result.reasons["old"] == (
        "preempted: 4 GPUs needed, 0 free; 1 higher-priority job ahead [queue 1, 3300 GPU-s attained]")


def test_below_the_threshold_fifo_order_holds_within_the_queue() -> None:
    old = job("old", 4, submit=0, holds=4, attained_gpu_seconds=3200)  # still queue 0, and earlier
    result = allocate(old, job("new", 4, submit=50))
    assert dict(result.allocations) == {"old": 4, "new": 0}


def test_wake_at_is_when_the_running_job_crosses_its_threshold() -> None:
    # 2000 GPU-s to go at 4 GPU-s per second: 500 s after now.
    result = allocate(job("running", 4, holds=4, attained_gpu_seconds=1250), job("waiting", 4, submit=1))
    assert result.wake_at == pytest.approx(600.0)


def test_wake_at_takes_the_earliest_of_a_demotion_and_a_promotion() -> None:
    # "long" (queue 2, the last) is preempted by "short": it will be promoted after 8 × 8000/4 s
    # of waiting; "short" reaches 3250 GPU-s after 812.5 s, which comes first.
    long = job("long", 4, submit=0, holds=4, attained_gpu_seconds=8000)
    result = allocate(long, job("short", 4, submit=10))
    assert result.state["jobs"] == {"long": {"base": 0.0, "waiting_since": 100.0}}
    assert result.wake_at == pytest.approx(100.0 + 812.5)


def test_the_starvation_guard_promotes_a_job_that_waited_factor_times_its_run_time() -> None:
    policy = TiresiasPolicy(thresholds=[100], starvation_factor=2)
    starved = job("starved", 4, submit=0, attained_gpu_seconds=400)  # queue 1; ran 400/4 = 100 s
    first = allocate(starved, job("b", 4, submit=10, holds=4), now=0, policy=policy)
    assert dict(first.allocations) == {"starved": 0, "b": 4}
    assert first.wake_at == pytest.approx(25.0)  # b reaches 100 GPU-s; the promotion is due at 200
    state = json.loads(json.dumps(first.state))
    newcomer = job("c", 4, submit=150, holds=4)
    second = allocate(starved, newcomer, now=199, state=state, policy=policy)
    assert dict(second.allocations) == {"starved": 0, "c": 4}
    assert second.wake_at == pytest.approx(200.0)  # waited 2 × 100 s by then
    third = allocate(starved, newcomer, now=200, state=json.loads(json.dumps(second.state)), policy=policy)
    assert dict(third.allocations) == {"starved": 4, "c": 0}
    assert third.reasons["starved"] == "runs [queue 0, 0 GPU-s attained; promoted by the starvation guard]"
    assert third.state["jobs"] == {"starved": {"base": 400.0, "waiting_since": None}}
    # Its service counts from the promotion: after 100 more GPU-s it is demoted again.
    again = job("starved", 4, submit=0, holds=4, attained_gpu_seconds=500)
    preempted = job("c", 4, submit=150)
    fourth = allocate(again, preempted, now=225, state=json.loads(json.dumps(third.state)), policy=policy)
    assert dict(fourth.allocations) == {"starved": 0, "c": 4}


def test_without_its_state_a_starved_job_waits_again_from_now() -> None:
    policy = TiresiasPolicy(thresholds=[100], starvation_factor=2)
    starved = job("starved", 4, submit=0, attained_gpu_seconds=400)
    result = allocate(starved, job("c", 4, submit=150, holds=4), now=500, state=None, policy=policy)
    assert dict(result.allocations) == {"starved": 0, "c": 4}
    assert result.state["jobs"]["starved"]["waiting_since"] == 500.0


@pytest.mark.parametrize("config", [{"thresholds": [7200, 3250]}, {"thresholds": [0]}, {"starvation_factor": 0}])
def test_bad_configuration_is_refused(config: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        TiresiasPolicy(**config)  # type: ignore[arg-type]


def test_a_job_still_holding_gpus_starts_its_waiting_clock_only_when_it_stops() -> None:
    long = job("long", 4, submit=0, holds=4, attained_gpu_seconds=8000)
    first = allocate(long, job("short", 4, submit=10), now=100)
    assert first.state["jobs"]["long"]["waiting_since"] == 100.0
    # The round kept "long" running (hysteresis, or the executor had not stopped it yet).
    second = allocate(long, job("short", 4, submit=10), now=150, state=json.loads(json.dumps(first.state)))
    assert second.state["jobs"]["long"]["waiting_since"] == 150.0
