"""QSSF: quasi-shortest-service-first, by predicted GPU-time (Helios, Hu et al., SC'21, §5).

Helios orders its queue by each job's *predicted* service, GPUs × predicted duration, learnt from the
cluster's history (sim/runtimes.py), instead of SRTF's oracle remaining time; it runs jobs to completion.

Inputs: each job's ``min_gpus``, ``gpu_type``, ``submit_time``, whether it holds GPUs; its length: for a job
without a profile, ``expected_seconds`` (the predictor's or the user's) less the service it already had
(``attained_gpu_seconds`` ÷ ``min_gpus``); for a job with a profile, its goodput model's remaining time at
``min_gpus`` (its work is declared, not guessed). A job with neither counts as infinitely long.
Outputs: ``min_gpus`` or 0 per job, with a reason for each job left waiting.

Rules:
- Non-preemptive: running jobs keep their GPUs (at ``min_gpus``: QSSF is rigid); if capacity shrank, they keep
  them in arrival order while they fit, as FIFO does, and the others queue again.
- Waiting jobs are served by predicted remaining GPU-time, least first, ties by ``(submit_time, id)``.
- Backfilling: a later job that fits still starts when the next does not.
"""

from __future__ import annotations

import math
from typing import ClassVar

from ..capacity import Capacity
from ..policy import Capabilities, register
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import SpeedMemo, arrival_key, grant_in_order


@register
class QssfPolicy:
    name: ClassVar[str] = "qssf"
    summary: ClassVar[str] = "QSSF (Helios): shortest predicted GPU-time first, each job run to completion; rigid"
    capabilities: ClassVar[Capabilities] = Capabilities(
        count_rule="which qssf gives every job (it does not scale jobs)",
        # The simulator predicts the runtimes of jobs without a profile for it, from jobs finished earlier in the run.
        predicts_runtimes=True,
    )
    event_driven: ClassVar[bool] = True

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        memo = SpeedMemo(snap)
        capacity = Capacity(snap)
        running = sorted([job for job in snap.jobs if job.placement], key=arrival_key)
        kept, reasons = grant_in_order(snap, running, capacity, backfill=True, ahead="earlier")
        waiting = [job for job in snap.jobs if not job.placement] + [job for job in running if kept[job.id] == 0]
        service = {job.id: predicted_gpu_seconds(job, memo) for job in waiting}
        order = sorted(waiting, key=lambda job: (service[job.id], job.submit_time, job.id))
        started, why = grant_in_order(snap, order, capacity, backfill=True, ahead="shorter")
        return PolicyResult(allocations={**kept, **started}, reasons={**reasons, **why})


def predicted_gpu_seconds(job: JobInfo, memo: SpeedMemo) -> float:
    """GPUs × the seconds it is predicted still to run at ``min_gpus`` (module docstring); inf when unknown."""
    if job.profile is not None:
        return memo.remaining_time(job, job.min_gpus) * job.min_gpus
    if job.expected_seconds is None:
        return math.inf
    served = job.attained_gpu_seconds / job.min_gpus
    return max(job.expected_seconds - served, 0.0) * job.min_gpus
