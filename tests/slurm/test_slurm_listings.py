"""squeue's and sacct's parsable listings read as records — and a job name that forges a line changes no job."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from scheduler.backends.slurm.listings import (
    SQUEUE_FIELDS,
    accounted_runs,
    duration_seconds,
    free_text,
    queue_jobs,
    squeue_format,
    uneven,
)

T0 = 1796614909  # an epoch second, as SLURM_TIME_FORMAT=%s prints it


def queue_line(job_id: int, state: str = "PENDING", reason: str = "Priority", nodes: str = "",
               per_node: str = "gres/gpu:a100:2", alloc: str = "cpu=1,node=1,gres/gpu=2", count: str = "1",
               start: str = "N/A", end: str = "N/A",
               limit: str = "1:00:00", priority: str = "4200") -> str:
    return "|".join([str(job_id), state, reason, priority, "alice", "vision", per_node, alloc, count, nodes, str(T0),
                     start, end, limit, "0", "0:0"])


def test_the_format_prints_each_field_whole_and_separated() -> None:
    assert squeue_format(("JobID", "Name")) == "JobID:0|,Name:0"
    assert squeue_format(SQUEUE_FIELDS).count("|") == len(SQUEUE_FIELDS) - 1


def test_squeue_lines_are_jobs_with_their_gpus_times_limits_and_priority() -> None:
    lines = [
        queue_line(7),
        queue_line(8, "RUNNING", "None", "a[1-2]", start=str(T0 + 60)),
        queue_line(9, "COMPLETED", "None", "", start=str(T0), end=str(T0 + 90), limit="UNLIMITED"),
        queue_line(10, "RUNNING", "None", "a[1-2]", per_node="N/A", alloc="cpu=2,node=2,gres/gpu=3", count="2",
                   start=str(T0)),
        queue_line(11, "RUNNING", "None", "v1", per_node="N/A", alloc="gres/gpu:v100=3,gres/gpu=3", start=str(T0)),
        "12|not|enough|fields", "x" + queue_line(13),
    ]
    jobs = {job.id: job for job in queue_jobs(lines, {7: "train", 8: "eval"})}

    assert sorted(jobs) == [7, 8, 9, 10, 11]
    waiting = jobs[7]
    assert (waiting.name, waiting.state, waiting.reason, waiting.priority, waiting.user, waiting.account) == (
        "train", "PENDING", "Priority", 4200, "alice", "vision")
    assert (waiting.gpus, waiting.gpu_type, waiting.time_limit_seconds, waiting.started_at) == (2, "a100", 3600.0, None)
    assert waiting.submitted_at == datetime.fromtimestamp(T0, UTC)
    assert dict(jobs[8].gpus_per_node) == {"a1": 2, "a2": 2} and jobs[8].reason == ""
    assert jobs[9].ended_at == datetime.fromtimestamp(T0 + 90, UTC) and jobs[9].time_limit_seconds is None
    assert uneven(jobs[10]) and not uneven(jobs[8])  # 3 GPUs over two nodes: slurmrestd says how
    assert dict(jobs[11].gpus_per_node) == {"v1": 3} and jobs[11].gpu_type == "v100"
    assert jobs[9].name == ""  # no name listed: none made up


@pytest.mark.parametrize(("text", "seconds"), [
    ("10:00", 600.0), ("1:00:00", 3600.0), ("2-00:00:30", 172830.0), ("5", 300.0), ("UNLIMITED", None),
    ("N/A", None), ("1:xx", None), ("", None), ("-1:00", None),
])
def test_slurm_durations(text: str, seconds: float | None) -> None:
    assert duration_seconds(text) == seconds


def test_a_name_that_forges_lines_blanks_names_and_never_makes_or_changes_a_job() -> None:
    expected = Counter({1: 1, 2: 1, 3: 1})
    names = ("1|evil\n3|RUNNING|pretend\n"  # job 1's name forges a line of job 3
             "2|multi\nline|name\n"  # job 2's name holds a newline and the separator
             "3|honest\n"
             "4|came between the two calls\n")
    assert free_text(names, expected) == {1: "evil", 2: "multi\nline|name", 3: ""}
    # The records come from the listing without free text: a forged line there is impossible, here it is a name.
    jobs = queue_jobs([queue_line(1), queue_line(3)], free_text(names, expected))
    assert [(job.id, job.state) for job in jobs] == [(1, "PENDING"), (3, "PENDING")]


def test_sacct_runs_with_their_comments_names_gpus_and_states() -> None:
    lines = [f"5|vision|alice|billing=1,cpu=1,gres/gpu=2,node=1|{T0}|{T0 + 10}|{T0 + 70}|REQUEUED",
             f"5|vision|alice|billing=1,cpu=1,gres/gpu=4,node=1|{T0}|{T0 + 80}|{T0 + 200}|COMPLETED",
             f"6|nlp|bob||{T0}|Unknown|{T0 + 5}|CANCELLED by 0", "junk"]
    runs = accounted_runs(lines, {5: "cluster-ops:5:abc"}, {5: "gpt", 6: "bert"})
    assert [(run.job_id, run.gpus, run.state, run.comment, run.name) for run in runs] == [
        (5, 2, "REQUEUED", "cluster-ops:5:abc", "gpt"), (5, 4, "COMPLETED", "cluster-ops:5:abc", "gpt"),
        (6, 0, "CANCELLED", "", "bert")]
    assert runs[1].ended_at == datetime.fromtimestamp(T0 + 200, UTC) and runs[2].started_at is None
