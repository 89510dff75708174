"""SRTF: shortest remaining time first, with oracle knowledge of each job's remaining work.

The classic preemptive SRPT rule (Schrage, "A proof of the optimality of the shortest
remaining processing time discipline", Operations Research 1968), used as the "SRTF"
oracle baseline of Tiresias (Gu et al., NSDI'19, §6) and Gavel (Narayanan et al., OSDI'20).

Inputs: each job's ``remaining_work`` (``total_work - progress``: assumed known, which is
why it is an oracle), its speed at ``min_gpus`` (speed.py), ``min_gpus``, ``gpu_type``.
Outputs: ``min_gpus`` or 0 per job, with a reason for each job left waiting or preempted.

Rules:
- Remaining time = remaining_work / speed(min_gpus). Jobs are served shortest first, ties
  by (submit_time, id); a job whose speed at ``min_gpus`` is 0 comes last.
- Every job runs at ``min_gpus`` (SRTF is a rigid baseline; elastic policies live elsewhere).
- Preemptive: a shorter arrival takes GPUs from a longer running job.
- Backfilling: when the next job does not fit, later (longer) jobs that fit still start.
- Jobs with no work left get nothing (they are finishing).
"""

from __future__ import annotations

from typing import ClassVar

from ..capacity import Capacity
from ..policy import Capabilities, register
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import SpeedMemo, grant_in_order


@register
class SrtfPolicy:
    name: ClassVar[str] = "srtf"
    summary: ClassVar[str] = "shortest remaining time first: knows job lengths, preempts for a shorter job; rigid"
    capabilities: ClassVar[Capabilities] = Capabilities(
        count_rule="which srtf gives every job (it does not scale jobs)",
    )
    event_driven: ClassVar[bool] = True

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        memo = SpeedMemo(snap)
        remaining = {job.id: memo.remaining_time(job, job.min_gpus) for job in snap.jobs}

        def shortest_first(job: JobInfo) -> tuple[float, float, str]:
            return (remaining[job.id], job.submit_time, job.id)

        finished = [job for job in snap.jobs if job.remaining_work <= 0]
        order = sorted((job for job in snap.jobs if job.remaining_work > 0), key=shortest_first)
        allocations, reasons = grant_in_order(snap, order, Capacity(snap), backfill=True, ahead="shorter")
        for job in finished:
            allocations[job.id] = 0
            reasons[job.id] = "finished: no work left"
        return PolicyResult(allocations=allocations, reasons=reasons)
