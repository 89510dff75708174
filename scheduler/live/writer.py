"""A round's answer → the database, in one transaction.

Everything a round decides is written at once: allocations closed and opened, job states (with the batch the
policy chose), a ``RescaleEvent`` with its reason for every change, the ``SchedulingRound`` with timings, counts
and the policy's note, and what rounds carry over. A round killed before the commit writes nothing; decisions
about jobs that changed meanwhile are dropped and counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from ..bulk import update_many
from ..core.cycle import Action, CycleResult, Decision
from ..models import (
    SCHEDULABLE_STATES,
    Allocation,
    Job,
    JobState,
    RescaleEvent,
    RescaleKind,
    RoundStatus,
    SchedulingRound,
)
from .memory import store_round_state
from .snapshot import LiveSnapshot


@dataclass
class Timings:
    started: float = field(default_factory=time.perf_counter)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, name: str) -> None:
        self.marks[name] = time.perf_counter()

    def ms(self, start: str | None, end: str) -> float:
        begin = self.marks[start] if start else self.started
        return round((self.marks[end] - begin) * 1000, 3)


def apply_round(
    live: LiveSnapshot, result: CycleResult, policy: str, now: datetime, executor: str, finished: int,
    timings: Timings, between_rounds: bool = False,
) -> SchedulingRound:
    """Write one round's decisions in one transaction; decisions about jobs that changed meanwhile are dropped.

    ``between_rounds``: starts made between two rounds (``admission.start_waiting_jobs``). They leave what rounds carry
    over (the policy's memory, the rescale history) and waiting jobs' reasons to the rounds: the question asked
    between rounds, with every running job kept, is not the round's."""
    with transaction.atomic():
        applied, skipped = _still_valid(result.changes)
        round_row = SchedulingRound.objects.create(
            policy=policy, started_at=now, status=RoundStatus.RUNNING, jobs_considered=len(live.snap.jobs),
            finished=finished, skipped=skipped, executor=executor, note=result.note[:2000],
            between_rounds=between_rounds,
        )
        _move_allocations(applied, live.gpu_pk, now)
        _update_jobs(applied, now)
        _record_events(applied, round_row, now, live.snap.index.type_of)
        if not between_rounds:
            _store_pending_reasons(result.decisions.values(), live.pending_reasons)
            store_round_state(policy, result.state, round_row)
        timings.mark("write")
        counts = {action: sum(d.action == action for d in applied) for action in Action}
        SchedulingRound.objects.filter(pk=round_row.pk).update(
            status=RoundStatus.OK, finished_at=timezone.now(), decisions=len(applied),
            starts=counts[Action.START], rescales=counts[Action.RESCALE], preemptions=counts[Action.PREEMPT],
            snapshot_ms=timings.ms(None, "snapshot"), policy_ms=timings.ms("snapshot", "policy"),
            write_ms=timings.ms("policy", "write"), duration_ms=timings.ms(None, "write"),
        )
    round_row.refresh_from_db()
    return round_row


def _still_valid(changes: Sequence[Decision]) -> tuple[list[Decision], int]:
    """The decisions whose job is still schedulable and holds what the snapshot said; and how many were not.

    Between the snapshot and this transaction an operator may have cancelled a job, or an
    executor finished one. Such a job's decision is dropped (the next round reconsiders
    it), and so is any decision that would then take a GPU still held by another job.
    """
    jobs = Job.objects.select_for_update().filter(pk__in=[int(d.job_id) for d in changes])
    state = dict(jobs.values_list("pk", "state"))
    holder = {gpu: job for job, gpu in Allocation.objects.filter(ended_at__isnull=True).values_list(
        "job_id", "gpu__uuid")}
    held_by: dict[int, set[str]] = {}
    for gpu, job in holder.items():
        held_by.setdefault(job, set()).add(gpu)
    valid = [d for d in changes if state.get(int(d.job_id)) in SCHEDULABLE_STATES
             and held_by.get(int(d.job_id), set()) == set(d.previous)]
    for decision in valid:  # GPUs these decisions give up are free for the others
        for gpu in set(decision.previous) - set(decision.gpus):
            holder.pop(gpu, None)
    applied = []
    for decision in valid:
        job = int(decision.job_id)
        if all(holder.get(gpu, job) == job for gpu in decision.gpus):
            applied.append(decision)
            holder.update(dict.fromkeys(decision.gpus, job))
    return applied, len(changes) - len(applied)


def _move_allocations(applied: Sequence[Decision], gpu_pk: Mapping[str, int], now: datetime) -> None:
    released = [gpu_pk[gpu] for d in applied for gpu in set(d.previous) - set(d.gpus)]
    for chunk in _chunks(released):  # before the opens: one open allocation per GPU is a constraint
        Allocation.objects.filter(gpu_id__in=chunk, ended_at__isnull=True).update(ended_at=now)
    Allocation.objects.bulk_create(
        Allocation(job_id=int(d.job_id), gpu_id=gpu_pk[gpu], started_at=now)
        for d in applied for gpu in d.gpus if gpu not in set(d.previous)
    )


_NEW_STATE = {Action.START: JobState.RUNNING, Action.RESCALE: JobState.RESCALING, Action.PREEMPT: JobState.PREEMPTED}


def _update_jobs(applied: Sequence[Decision], now: datetime) -> None:
    jobs = Job.objects.in_bulk([int(d.job_id) for d in applied])
    for decision in applied:
        job = jobs[int(decision.job_id)]
        job.state = _NEW_STATE[decision.action]
        job.generation += 1
        job.pending_reason = decision.reason if decision.action == Action.PREEMPT else ""
        if decision.action == Action.START:
            job.started_at = job.started_at or now
            job.accounted_at = now
        if decision.action == Action.RESCALE or (decision.action == Action.START and job.progress > 0):
            job.restarts += 1  # it reloads its checkpoint
        # The batch the policy chose for this allocation, which the executor runs (the simulator's ``_apply``).
        job.policy_batch_size = decision.batch_size if decision.action != Action.PREEMPT else None
    update_many(Job, ["state", "generation", "pending_reason", "started_at", "accounted_at", "restarts",
                      "policy_batch_size"], jobs.values())


_EVENT_KIND = {
    Action.START: RescaleKind.START, Action.RESCALE: RescaleKind.RESCALE, Action.PREEMPT: RescaleKind.PREEMPT,
}


def _record_events(applied: Sequence[Decision], round_row: SchedulingRound, now: datetime,
                   type_of: Mapping[str, str]) -> None:
    def kind_of(gpus: tuple[str, ...]) -> str:
        return type_of.get(gpus[0], "")[:32] if gpus else ""

    RescaleEvent.objects.bulk_create(
        (RescaleEvent(job_id=int(d.job_id), round=round_row, at=now, kind=_EVENT_KIND[d.action],
                      from_gpus=len(d.previous), to_gpus=len(d.gpus), from_type=kind_of(d.previous),
                      to_type=kind_of(d.gpus), reason=d.reason) for d in applied),
        batch_size=500,
    )


def _store_pending_reasons(decisions: Iterable[Decision], stored: Mapping[str, str]) -> None:
    """Keep each waiting job's "why am I pending" current; only rows whose reason changed are written."""
    changed = [Job(pk=int(d.job_id), pending_reason=d.reason[:255]) for d in decisions
               if d.action == Action.WAIT and stored.get(d.job_id) != d.reason[:255]]
    update_many(Job, ["pending_reason"], changed)


def _chunks(items: list[int], size: int = 500) -> Iterable[list[int]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
