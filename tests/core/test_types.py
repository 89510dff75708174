"""The boundary types check their own invariants."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.core.types import ClusterSnapshot, GpuSlot, JobInfo, NodeInfo

NODES = (NodeInfo("n1", "a100", (GpuSlot("n1-0"), GpuSlot("n1-1"))),)


def job(jid: str, *gpus: str) -> JobInfo:
    return JobInfo(jid, "t", 0.0, 1, 2, 100.0, placement=gpus)


@pytest.mark.parametrize(("jobs", "error"), [
    ((job("a", "n1-0"), job("b", "n1-0")), "a GPU is held by two jobs"),
    ((job("a", "n9-0"),), "jobs hold GPUs not in the cluster: ['n9-0']"),
    ((job("a", "n1-0"), job("a", "n1-1")), "a job id appears twice"),
])
def test_a_snapshot_refuses_broken_invariants(jobs: tuple[JobInfo, ...], error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        ClusterSnapshot(0.0, NODES, jobs)


def test_an_unchecked_snapshot_skips_the_checks_but_a_copy_of_it_is_checked_again() -> None:
    broken = ClusterSnapshot(0.0, NODES, (job("a", "n1-0"), job("b", "n1-0")), check=False)
    assert len(broken.jobs) == 2
    with pytest.raises(ValueError, match="held by two jobs"):
        dataclasses.replace(broken, now=1.0)


def test_progressed_changes_only_progress_and_attained_time() -> None:
    before = job("a", "n1-0")
    later = before.progressed(40.0, 120.0)
    assert later == dataclasses.replace(before, progress=40.0, attained_gpu_seconds=120.0)
    assert before.progress == 0.0
    with pytest.raises(ValueError):
        before.progressed(-1.0, 0.0)


@pytest.mark.parametrize("restart_until", [float("nan"), float("inf"), -1.0])
def test_a_job_refuses_a_restart_end_that_is_no_finite_time(restart_until: float) -> None:
    with pytest.raises(ValueError, match="restart_until"):
        JobInfo("a", "t", 0.0, 1, 2, 100.0, restart_until=restart_until)
