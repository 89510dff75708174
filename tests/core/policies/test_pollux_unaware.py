"""Hand-worked tests of Pollux blind to GPU types, as Sia ran it (scheduler/core/policies/pollux_unaware.py)."""

from __future__ import annotations

from scheduler.core.config import get_policy
from scheduler.core.policies.pollux_unaware import BLIND_TYPE, UnawarePolluxPolicy, on_real_types, type_blind
from scheduler.core.types import PolicyResult

from . import cluster, job, snapshot
from .test_sia import PROFILES, SLOW

# 8 t4 (the most numerous type) and 4 a100, on which "model" is ~4× as fast.
MIXED = cluster(4, 4, gpu_type="t4", prefix="t") + cluster(4, gpu_type="a100", prefix="a")


def test_it_sees_one_type_and_one_model_per_profile_that_of_the_most_numerous_type() -> None:
    blind = type_blind(snapshot(MIXED, job("j", 1, gpu_type="a100", profile="model"), profiles=PROFILES))
    assert {node.gpu_type for node in blind.nodes} == {BLIND_TYPE} and blind.usable_gpus == 12
    assert blind.profiles == {"model": {BLIND_TYPE: SLOW}}
    assert blind.jobs[0].gpu_type is None


def test_a_new_job_lands_where_gpus_are_free_not_where_it_is_fastest() -> None:
    snap = snapshot(MIXED, job("new", min_gpus=1, max_gpus=4, profile="model"), profiles=PROFILES)
    blind = UnawarePolluxPolicy().allocate(snap, None)
    aware = get_policy("pollux").allocate(snap, None)
    assert blind.allocations["new"] >= 1 and blind.gpu_types == {"new": "t4"}
    assert aware.allocations["new"] >= 1 and not aware.gpu_types  # placement puts it on a100 (test_heterogeneous)


def test_a_count_larger_than_its_type_has_left_is_cut_and_says_so() -> None:
    running = job("run", min_gpus=1, max_gpus=8, profile="model", holds=4, on="t0")
    new = job("new", min_gpus=2, max_gpus=8, profile="model", submit=5.0)
    snap = snapshot(MIXED, running, new, profiles=PROFILES)
    # The blind answer: 4 for the running job (it keeps its t4), 6 for the new one, which no type has left.
    result = on_real_types(snap, PolicyResult({"run": 4, "new": 6}))
    assert result.allocations == {"run": 4, "new": 4}
    assert result.gpu_types == {"run": "t4", "new": "a100"}  # t4 and a100 both have 4 left: ties to the first name
    assert result.reasons["new"] == "pollux-unaware: 6 GPUs cut to the 4 left on a100"
    assert set(result.batch_sizes) == {"run", "new"}


def test_below_its_minimum_after_the_cut_it_waits() -> None:
    running = job("run", min_gpus=1, max_gpus=8, profile="model", holds=4, on="t0")
    new = job("new", min_gpus=6, max_gpus=8, profile="model", submit=5.0)
    result = on_real_types(snapshot(MIXED, running, new, profiles=PROFILES), PolicyResult({"run": 4, "new": 6}))
    assert result.allocations["new"] == 0
    assert result.reasons["new"] == "waiting: its 6 GPUs would span GPU types; none has 6 left"
