"""QSSF by hand: least predicted GPU-time first, never preempting, backfilling; no oracle."""

from __future__ import annotations

from scheduler.core.config import get_policy
from scheduler.core.types import JobInfo, NodeInfo, PolicyResult
from tests.core.strategies import PROFILES

from . import cluster, job, snapshot


def allocate(*jobs: JobInfo, nodes: tuple[NodeInfo, ...] | None = None) -> PolicyResult:
    return get_policy("qssf").allocate(snapshot(nodes or cluster(8), *jobs, profiles=PROFILES), None)


def test_waiting_jobs_are_served_by_predicted_gpu_time_not_by_their_true_work() -> None:
    # 8 GPUs. By GPU-time predicted: b (4 × 10 = 40) < c (2 × 30 = 60) < a (4 × 100 = 400). Their true work
    # (total_work) says the opposite: qssf must not read it.
    a = job("a", 4, submit=0, work=1, expected_seconds=100)
    b = job("b", 4, submit=1, work=1000, expected_seconds=10)
    c = job("c", 2, submit=2, work=1000, expected_seconds=30)
    result = allocate(a, b, c)
    assert dict(result.allocations) == {"a": 0, "b": 4, "c": 2}
    assert result.reasons["a"] == "waiting: 4 GPUs needed, 2 free; 2 shorter jobs ahead"


def test_a_running_job_is_never_preempted_by_a_shorter_arrival() -> None:
    long = job("long", 8, submit=0, expected_seconds=10_000, holds=8)
    short = job("short", 4, submit=90, expected_seconds=5)
    assert dict(allocate(long, short).allocations) == {"long": 8, "short": 0}


def test_service_already_had_counts_against_the_prediction() -> None:
    # p (preempted, had 2 GPUs × 90 s of 100 s predicted) has 20 GPU-s left; q (1 GPU × 30 s) has 30.
    p = job("p", 2, submit=5, expected_seconds=100, attained_gpu_seconds=180)
    q = job("q", 1, submit=0, expected_seconds=30)
    result = allocate(p, q, job("holder", 6, holds=6, expected_seconds=1e6), nodes=cluster(8))
    assert dict(result.allocations) == {"p": 2, "q": 0, "holder": 6}


def test_a_job_without_prediction_or_profile_goes_last() -> None:
    unknown = job("unknown", 4, submit=0)
    known = job("known", 8, submit=5, expected_seconds=1e5)
    assert dict(allocate(unknown, known).allocations) == {"unknown": 0, "known": 8}


def test_a_profiled_job_is_priced_by_its_model_at_min_gpus() -> None:
    profiled = job("profiled", 2, profile="wide", work=150, done=50, submit=5)
    huge = job("huge", 8, submit=0, expected_seconds=1e9)
    assert dict(allocate(huge, profiled).allocations) == {"huge": 0, "profiled": 2}
