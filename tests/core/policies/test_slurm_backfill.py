"""Slurm's backfill by hand: priority order, reservations by the time limits, no job delays an earlier one."""

from __future__ import annotations

from scheduler.core.config import get_policy
from scheduler.core.types import JobInfo, NodeInfo, PolicyResult

from . import cluster, job, snapshot

NOW = 100.0


def allocate(*jobs: JobInfo, nodes: tuple[NodeInfo, ...] | None = None) -> PolicyResult:
    return get_policy("slurm-backfill").allocate(snapshot(nodes or cluster(4, 4), *jobs, now=NOW), None)


def test_waiting_jobs_start_by_priority_not_by_arrival() -> None:
    result = allocate(job("early", 4, submit=0, priority=1, time_limit=600),
                      job("urgent", 4, submit=50, priority=9, time_limit=600),
                      job("late", 4, submit=60, priority=5, time_limit=600),
                      nodes=cluster(4, 4))
    assert dict(result.allocations) == {"urgent": 4, "late": 4, "early": 0}


def test_a_short_job_backfills_where_it_ends_before_the_reservation() -> None:
    # n0 is busy for 300 s more by its limit; n1 has 2 of 4 GPUs busy for 1,000 s more. "big" (4 GPUs) is planned
    # on n0 at +300 s. "short" (limit 200 s) fits on n0 now and ends before: it starts. "long" (limit 400 s) would
    # delay big's reservation on n0, and n1 has only 2 free: it waits.
    running = job("running", 4, holds=4, on="n0", time_limit=400, done=100)
    half = job("half", 2, holds=2, on="n1", time_limit=1100, done=100)
    big = job("big", 4, submit=1, priority=5, time_limit=600)
    long = job("long", 4, submit=2, priority=1, time_limit=400)
    short = job("short", 2, submit=3, priority=1, time_limit=200)
    result = allocate(running, half, big, long, short)
    assert dict(result.allocations) == {"running": 4, "half": 2, "big": 0, "long": 0, "short": 2}
    assert result.reasons["big"] == "waits: planned to start in 300 s on n0 (by the time limits)"
    assert result.reasons["long"] == "waits: planned to start in 900 s on n0 (by the time limits)"


def test_a_job_without_a_time_limit_never_backfills_ahead_of_a_reservation() -> None:
    running = job("running", 2, holds=2, on="n0", time_limit=400)
    big = job("big", 4, submit=1, priority=5, time_limit=600)
    endless = job("endless", 2, submit=2)
    result = allocate(running, big, endless, nodes=cluster(4))
    assert dict(result.allocations) == {"running": 2, "big": 0, "endless": 0}


def test_a_job_goes_to_a_node_of_its_type_and_an_untyped_one_is_told_its_type() -> None:
    nodes = cluster(4, gpu_type="a100", prefix="a") + cluster(4, gpu_type="v100", prefix="v")
    result = allocate(job("a-full", 4, holds=4, on="a0", time_limit=900),
                      job("wants-a", 2, submit=1, gpu_type="a100", time_limit=60),
                      job("any", 2, submit=2, time_limit=60), nodes=nodes)
    assert dict(result.allocations) == {"a-full": 4, "wants-a": 0, "any": 2}
    assert result.gpu_types == {"any": "v100"}


def test_a_job_larger_than_its_type_is_unschedulable_and_reserves_nothing() -> None:
    result = allocate(job("huge", 12, submit=0, priority=9, time_limit=60), job("next", 4, submit=1, time_limit=60))
    assert dict(result.allocations) == {"huge": 0, "next": 4}
    assert result.reasons["huge"] == "unschedulable: needs 12 GPUs, the cluster has 8 usable"


def test_a_job_larger_than_a_node_takes_whole_nodes() -> None:
    result = allocate(job("wide", 8, submit=0, time_limit=60), job("after", 1, submit=1, time_limit=60))
    assert dict(result.allocations) == {"wide": 8, "after": 0}
    assert result.reasons["after"] == "waits: planned to start in 60 s on n0 (by the time limits)"


def test_a_job_that_lost_a_gpu_is_requeued_in_its_priority_place() -> None:
    # n0 lost a GPU under "hurt": it is requeued and, first by priority, restarts on n1 before "other".
    result = allocate(job("hurt", 4, holds=4, on="n0", priority=9, time_limit=600),
                      job("other", 4, submit=1, time_limit=600), nodes=cluster(4, 4, unhealthy=1))
    assert dict(result.allocations) == {"hurt": 4, "other": 0}
    assert result.gpu_types == {"hurt": "a100"}
    result = allocate(job("hurt", 4, holds=4, on="n0", time_limit=600, submit=5),
                      job("other", 4, submit=1, time_limit=600), nodes=cluster(4, 4, unhealthy=1))
    assert dict(result.allocations) == {"hurt": 0, "other": 4}
    assert result.reasons["hurt"] == ("preempted (a GPU it held is no longer usable), requeued: waits: planned to "
                                      "start in 600 s on n1 (by the time limits)")
