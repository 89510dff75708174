"""SRTF by hand: shortest remaining time at min_gpus first, preemptive, backfilling."""

from __future__ import annotations

import pytest

from scheduler.core.config import get_policy
from scheduler.core.speed import job_speed
from scheduler.core.types import JobInfo, NodeInfo, PolicyResult
from tests.core.strategies import PROFILES

from . import cluster, job, snapshot


def allocate(*jobs: JobInfo, nodes: tuple[NodeInfo, ...] | None = None) -> PolicyResult:
    return get_policy("srtf").allocate(snapshot(nodes or cluster(8), *jobs, profiles=PROFILES), None)


def test_a_shorter_arrival_preempts_a_longer_running_job() -> None:
    long = job("long", 8, submit=0, work=1000, done=100, holds=8)  # 900 s left
    short = job("short", 4, submit=90, work=50)  # 50 s left
    result = allocate(long, short)
    assert dict(result.allocations) == {"long": 0, "short": 4}
    assert result.reasons["long"] == "preempted: 8 GPUs needed, 4 free; 1 shorter job ahead"


def test_smaller_longer_jobs_backfill_when_the_next_does_not_fit() -> None:
    # 10 GPUs. a (10 s) takes 8; b (20 s) needs 4 of the 2 left and waits; c (30 s) fits in 2.
    nodes = cluster(8, 2)
    result = allocate(job("c", 2, work=30), job("b", 4, work=20), job("a", 8, work=10), nodes=nodes)
    assert dict(result.allocations) == {"a": 8, "b": 0, "c": 2}
    assert result.reasons["b"] == "waiting: 4 GPUs needed, 2 free; 1 shorter job ahead"


def test_remaining_time_is_remaining_work_over_speed_at_min_gpus() -> None:
    # A profiled job measures work in iterations: 100 left at speed s on 2 GPUs is 100/s seconds.
    profiled = job("profiled", 2, profile="wide", work=150, done=50, submit=5)
    seconds = 100 / job_speed(profiled, snapshot(cluster(8), profiles=PROFILES), 2)
    slightly_shorter = job("rigid-shorter", 8, work=seconds * 0.99, submit=9)
    slightly_longer = job("rigid-longer", 8, work=seconds * 1.01, submit=1)
    assert dict(allocate(profiled, slightly_shorter).allocations) == {"profiled": 0, "rigid-shorter": 8}
    assert dict(allocate(profiled, slightly_longer).allocations) == {"profiled": 2, "rigid-longer": 0}


def test_ties_go_to_the_earlier_arrival_then_the_id() -> None:
    result = allocate(job("y", 8, work=10, submit=3), job("x", 8, work=10, submit=3), job("w", 8, work=10, submit=4))
    assert dict(result.allocations) == {"x": 8, "y": 0, "w": 0}
    assert result.reasons["y"] == "waiting: 8 GPUs needed, 0 free; 1 shorter job ahead"
    assert result.reasons["w"] == "waiting: 8 GPUs needed, 0 free; 2 shorter jobs ahead"


def test_elastic_jobs_run_at_min_gpus_and_finished_jobs_get_nothing() -> None:
    result = allocate(job("elastic", min_gpus=2, max_gpus=8, work=10), job("finished", 4, work=10, done=10, holds=4))
    assert dict(result.allocations) == {"elastic": 2, "finished": 0}
    assert result.reasons["finished"] == "finished: no work left"


@pytest.mark.parametrize("state", [None, {"anything": 1}])
def test_srtf_keeps_no_state(state: dict[str, int] | None) -> None:
    snap = snapshot(cluster(8), job("a", 8))
    result = get_policy("srtf").allocate(snap, state)
    assert result.state == {} and result.wake_at is None
