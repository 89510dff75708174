"""FIFO by hand: arrival order, no backfilling, no preemption."""

from __future__ import annotations

from scheduler.core.config import get_policy
from scheduler.core.types import JobInfo, NodeInfo, PolicyResult

from . import cluster, job, snapshot


def allocate(*jobs: JobInfo, nodes: tuple[NodeInfo, ...] | None = None) -> PolicyResult:
    return get_policy("fifo").allocate(snapshot(nodes or cluster(8), *jobs), None)


def test_a_later_small_job_never_starts_while_an_earlier_big_job_waits() -> None:
    running = job("running", 4, submit=0, holds=4)
    big = job("big", 8, submit=10)
    small = job("small", 1, submit=20)  # 4 GPUs are free: it would fit, but big came first
    result = allocate(running, big, small)
    assert dict(result.allocations) == {"running": 4, "big": 0, "small": 0}
    assert result.reasons["big"] == "waiting: 8 GPUs needed, 4 free; first in line"
    assert result.reasons["small"] == "waiting: 1 GPU would fit (4 free) but 1 earlier job ahead (no backfilling)"


def test_jobs_start_in_arrival_order_with_id_as_tie_break() -> None:
    result = allocate(job("b", 4, submit=5), job("a", 4, submit=5), job("c", 4, submit=1), job("d", 4, submit=9))
    assert dict(result.allocations) == {"c": 4, "a": 4, "b": 0, "d": 0}
    assert result.reasons["b"] == "waiting: 4 GPUs needed, 0 free; 2 earlier jobs ahead"
    assert result.reasons["d"] == "waiting: 4 GPUs needed, 0 free; 3 earlier jobs ahead"


def test_running_jobs_are_never_preempted_for_an_earlier_waiting_job() -> None:
    # "early" arrived first but waits (say the cluster was busy); "late" runs and keeps running.
    result = allocate(job("early", 8, submit=0), job("late", 4, submit=50, holds=4))
    assert dict(result.allocations) == {"early": 0, "late": 4}
    assert "late" not in result.reasons


def test_elastic_jobs_get_their_request_and_a_running_one_is_shrunk_to_it() -> None:
    result = allocate(job("e", min_gpus=2, max_gpus=8, holds=6), job("w", 4, submit=1))
    assert dict(result.allocations) == {"e": 2, "w": 4}
    assert result.reasons["e"] == "resized 6→2 GPUs: this policy runs every job at its min_gpus"


def test_a_job_larger_than_the_cluster_blocks_nobody() -> None:
    result = allocate(job("huge", 16, submit=0), job("next", 2, submit=1))
    assert dict(result.allocations) == {"huge": 0, "next": 2}
    assert result.reasons["huge"] == "unschedulable: needs 16 GPUs, the cluster has 8 usable"


def test_when_gpus_are_lost_the_preempted_job_queues_in_its_arrival_place() -> None:
    # Node 0 lost 2 of its 8 GPUs: 6 usable. "first" keeps 4; "second" no longer fits and
    # waits ahead of "third", which would fit in the 2 GPUs left but must not jump the queue.
    nodes = cluster(8, unhealthy=2)
    first = job("first", 4, submit=0, holds=4)
    second = job("second", 4, submit=1, holds=4, first_gpu=4)
    third = job("third", 2, submit=2)
    result = allocate(first, second, third, nodes=nodes)
    assert dict(result.allocations) == {"first": 4, "second": 0, "third": 0}
    assert result.reasons["second"] == "preempted: 4 GPUs needed, 2 free; first in line"
    assert result.reasons["third"] == "waiting: 2 GPUs would fit (2 free) but 1 earlier job ahead (no backfilling)"


def test_a_job_waiting_for_a_scarce_gpu_type_blocks_the_single_queue() -> None:
    nodes = cluster(4) + cluster(4, gpu_type="v100", prefix="v")
    running = job("running-v100", 2, gpu_type="v100", holds=2, on="v0")
    wants_v100 = job("wants-v100", 4, gpu_type="v100", submit=1)  # 2 v100 free
    anything = job("anything", 1, submit=2)  # 4 a100 free, but one queue for all types
    result = allocate(running, wants_v100, anything, nodes=nodes)
    assert dict(result.allocations) == {"running-v100": 2, "wants-v100": 0, "anything": 0}
    assert result.reasons["wants-v100"] == "waiting: 4 v100 GPUs needed, 2 free; first in line"
