"""Hand-worked tests of Gavel (scheduler/core/policies/gavel.py): max-sum-throughput shares, rigid sizes,
round-based priorities from the time each job has received."""

from __future__ import annotations

import json

import pytest

from scheduler.core.cycle import Action, run_cycle
from scheduler.core.policies.gavel import GavelPolicy
from scheduler.core.speed import job_speed

from . import cluster, job, snapshot
from .test_sia import PROFILES

MIXED = cluster(4, gpu_type="t4", prefix="t") + cluster(4, gpu_type="a100", prefix="a")


def test_the_shares_put_each_job_where_the_sum_of_throughputs_is_largest() -> None:
    # "model" is ~4× as fast on a100; "trace" jobs (no profile) go as fast anywhere. Sum of throughputs: model on
    # a100 + trace on t4 beats the swap, so that is where each runs, both at once.
    model = job("model", 4, profile="model", submit=1.0)
    rigid = job("trace", 4, submit=0.0)
    snap = snapshot(MIXED, model, rigid, profiles=PROFILES)
    assert job_speed(model, snap, 4, gpu_type="a100") > 3 * job_speed(model, snap, 4, gpu_type="t4")
    result = GavelPolicy().allocate(snap, None)
    assert result.allocations == {"model": 4, "trace": 4}
    assert result.gpu_types == {"model": "a100", "trace": "t4"}
    assert result.reasons["model"].startswith("gavel: 4 a100 GPUs, 100% of its time should be there")


def test_a_job_runs_at_exactly_its_requested_size() -> None:
    elastic = job("e", min_gpus=2, max_gpus=8, profile="model")
    result = GavelPolicy().allocate(snapshot(MIXED, elastic, profiles=PROFILES), None)
    assert result.allocations == {"e": 2}


def test_a_job_no_type_can_hold_waits_and_says_so() -> None:
    result = GavelPolicy().allocate(snapshot(MIXED, job("wide", 6)), None)
    assert result.allocations == {"wide": 0}
    assert result.reasons["wide"] == "waiting: no GPU type has room for it"


def test_time_received_is_counted_per_type_from_the_state() -> None:
    # A new job starts with half a round (180 s) on each type; 360 s later it has run 360 s more on t4.
    running = job("r", 4, holds=4, on="t0")
    first = GavelPolicy().allocate(snapshot(MIXED, running, now=0.0), None)
    state = json.loads(json.dumps(first.state))
    assert state["received"]["r"] == {"a100": 180.0, "t4": 180.0} and state["at"] == 0.0
    later = GavelPolicy().allocate(snapshot(MIXED, running, now=360.0), state)
    assert later.state["received"]["r"] == {"a100": 180.0, "t4": 540.0}
    assert later.state["totals"] == {"a100": 180.0, "t4": 540.0}


def test_a_job_behind_its_share_of_time_goes_ahead_of_one_that_has_had_its_share() -> None:
    # One type of 4 GPUs, two 4-GPU jobs of equal speed: the one that has run is preempted for the one that has not.
    nodes = cluster(4, gpu_type="t4", prefix="t")
    ran, new = job("ran", 4, holds=4, on="t0", submit=0.0), job("new", 4, submit=10.0)
    state = {"received": {"ran": {"t4": 3600.0}}, "totals": {"t4": 3600.0}, "at": 0.0}
    result = run_cycle(snapshot(nodes, ran, new, now=360.0), GavelPolicy(), {"policy": state})
    actions = {d.job_id: d.action for d in result.changes}
    assert actions in ({"ran": Action.PREEMPT, "new": Action.START}, {})
    if actions:  # the shares of a degenerate program may leave "new" out; when it has one, it goes first
        assert result.decisions["ran"].reason.startswith("preempted: its turn comes")


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf")])
def test_a_bad_round_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="round_seconds"):
        GavelPolicy(round_seconds=bad)
