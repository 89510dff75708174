"""Starts between rounds: a job that arrives while GPUs sit idle starts on them at once, not at the next round.

A round (``cycle.run_cycle``) runs every ``round_seconds``, so a job submitted to an idle cluster otherwise waits
half a round on average doing nothing: 30 s of every job's completion time on Pollux's 60 s rounds, a third of an
NCF job's. Slurm and Kueue try to start a job when it is submitted, and so does AdaptDL's allocator, the Pollux
authors' physical-cluster scheduler (``adaptdl_sched/allocator.py``: "watch for new job and start if possible",
``PolluxPolicy._allocate_job``, under a lock shared with the periodic optimisation, which may change it later).

``start_waiting_jobs`` asks the round's own policy its answer for the whole cluster, as a round would, and starts
the waiting jobs it starts whose configuration fits the idle GPUs beside every running job as it is. No running job
is shrunk, moved, preempted or restarted; a start that needs a running job's GPUs waits for the round. So a job
starts between rounds only as the round would start it. Asked only for the idle GPUs instead, the policy put
arrivals on whatever type was idle and the next round moved them: on Sia's ``helios/workload-1`` 34 of 95 such starts
moved type at the next round, against 11 of 59 asked for the whole cluster. It keeps no state: the round's memory
(the policy's, the rescale history) is the round's alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .capacity import demand_fits
from .cycle import Action, CycleResult, RestartDelay, _Outcome, checked_counts
from .placement import place
from .policy import Policy
from .speed import held_type
from .types import ClusterSnapshot, PolicyState

BETWEEN_ROUNDS = "started between rounds on idle GPUs"


def start_waiting_jobs(snap: ClusterSnapshot, policy: Policy, state: PolicyState | None,
                       restart_delay: RestartDelay, even_spread: bool = False) -> CycleResult | None:
    """The starts of waiting jobs on GPUs no job holds, every running job kept as it is; None when there is nothing
    to start (no idle GPU, no waiting job, or none that the policy starts fits the idle GPUs) or the cluster is
    mid-change (a job holds a GPU that is not usable: a drain is the next round's to handle). ``state`` is the
    round's (``CycleResult.state``), read, never changed: the result's state is ``state`` itself."""
    state = state or {}
    if not _worth_asking(snap):
        return None
    result = policy.allocate(snap, state.get("policy"))
    counts = checked_counts(snap, result, policy.name)
    starts = _starts_that_fit(snap, counts, result.gpu_types)
    if not starts:
        return None
    targets = {job.id: job.gpus for job in snap.jobs if job.gpus} | starts
    placed = place(snap, targets, consolidate=policy.capabilities.consolidates_on_growth,
                   gpu_types={job_id: t for job_id, t in result.gpu_types.items() if job_id in starts},
                   even_spread=even_spread)
    if any(set(placed.placements.get(job.id, ())) != set(job.placement) for job in snap.jobs if job.placement):
        return None  # placement would move a running job (one on GPUs of a type it no longer takes): the round's
    outcome = _Outcome(snap.jobs, placed.placements, (result.reasons, placed.notes, placed.unplaced),
                       result.batch_sizes, placed.type_notes, None, policy.capabilities.count_rule, restart_delay)
    changes = tuple(decision._replace(reason=f"{BETWEEN_ROUNDS}; {decision.reason}")
                    for decision in outcome.changes() if decision.action is Action.START)
    return CycleResult(changes, dict(state), None, outcome) if changes else None


def _worth_asking(snap: ClusterSnapshot) -> bool:
    usable = snap.index.usable
    held = [gpu for job in snap.jobs for gpu in job.placement]
    if any(gpu not in usable for gpu in held):
        return False
    waiting = [job for job in snap.jobs if not job.placement]
    idle = len(usable) - len(held)
    return any(job.min_gpus <= idle for job in waiting)


def _starts_that_fit(snap: ClusterSnapshot, counts: Mapping[str, int], gpu_types: Mapping[str, str]) -> dict[str, int]:
    """The waiting jobs the policy started, earliest arrival first, while they fit the idle GPUs beside every running
    job as it is, on the type the policy chose (where the policy moved or shrank a running job to make room, that
    start waits for the round)."""
    typed = _typed(snap, gpu_types)
    kept = {job.id: job.gpus for job in snap.jobs if job.gpus}
    starts: dict[str, int] = {}
    for job in sorted(typed.jobs, key=lambda j: (j.submit_time, j.id)):
        gpus = counts.get(job.id, 0)
        if not job.placement and gpus and demand_fits(typed, kept | starts | {job.id: gpus}):
            starts[job.id] = gpus
    return starts


def _typed(snap: ClusterSnapshot, gpu_types: Mapping[str, str]) -> ClusterSnapshot:
    """The snapshot with each running job bound to the type it holds and each waiting one to the type the policy
    chose for it, so that ``demand_fits`` counts each type's GPUs."""
    jobs = tuple(
        job if (kind := held_type(job, snap) if job.placement else gpu_types.get(job.id, job.gpu_type)) == job.gpu_type
        else dataclasses.replace(job, gpu_type=kind)
        for job in snap.jobs)
    return dataclasses.replace(snap, jobs=jobs)
