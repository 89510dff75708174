"""FIFO: first come, first served, without backfilling or preemption.

The baseline every GPU-scheduling paper compares against (e.g. the "FIFO" of Tiresias,
Gu et al., NSDI'19, §6, and of Gandiva/Philly studies): one queue in arrival order.

Inputs: jobs' ``submit_time``, ``id``, ``min_gpus``, ``gpu_type`` and whether they hold
GPUs now; the usable GPUs by type. Nothing about job length or speed.
Outputs: ``min_gpus`` or 0 per job, with a reason for each job left waiting.

Rules:
- Non-preemptive: jobs that hold GPUs keep running (at ``min_gpus``; FIFO is a rigid
  policy, so an elastic job holding more is shrunk to its request). If capacity shrank
  below what they hold (a GPU lost, a node cordoned), they keep GPUs in arrival order
  while those fit; the others are preempted and queue again in their arrival place.
- Then the waiting jobs in arrival order ``(submit_time, id)`` each get ``min_gpus``; the
  first one that does not fit blocks every later one, even small jobs that would fit
  (strict FIFO, no backfilling). A job larger than the whole usable cluster of its GPU
  type is reported unschedulable and blocks nobody.
- One queue for all GPU types: a job waiting for a scarce type blocks everyone behind it.
"""

from __future__ import annotations

from typing import ClassVar

from ..capacity import Capacity
from ..policy import Capabilities, register
from ..types import ClusterSnapshot, PolicyResult, PolicyState
from ._ordering import arrival_key, grant_in_order


@register
class FifoPolicy:
    name: ClassVar[str] = "fifo"
    summary: ClassVar[str] = (
        "first come, first served at each job's request: rigid, "
        "never preempts, needs no job lengths"
    )
    capabilities: ClassVar[Capabilities] = Capabilities(
        count_rule="which fifo gives every job (it does not scale jobs)",
    )
    event_driven: ClassVar[bool] = True

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        capacity = Capacity(snap)
        running = sorted([job for job in snap.jobs if job.placement], key=arrival_key)
        queued = sorted([job for job in snap.jobs if not job.placement], key=arrival_key)
        kept, reasons = grant_in_order(snap, running, capacity, backfill=True, ahead="earlier")
        # A running job that lost its GPUs queues again in its arrival place, ahead of later jobs.
        queued += [job for job in running if kept[job.id] == 0]
        queue = sorted(queued, key=arrival_key)
        started, why = grant_in_order(snap, queue, capacity, backfill=False, ahead="earlier")
        return PolicyResult(allocations={**kept, **started}, reasons={**reasons, **why})
