"""One scheduling round: admit → allocate → stabilise → guarantee quotas → place → diff.

``run_cycle`` is the only round logic. The live service builds a snapshot from the
database and applies the decisions in one transaction; the simulator advances simulated
time and calls the same function. Each decision carries a reason an operator can read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import NamedTuple

from . import explain
from .capacity import demand_fits
from .guards import Guards, RescaleHistory, speeds_across
from .placement import place
from .policy import Policy
from .quota import reclaim_for_owners
from .types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState

# How long a job stalls to checkpoint and reload after a rescale or a preemption, when nothing better is
# known (Pollux's simulator charges 30 s on every re-allocation; Sia's uses 30 s for a model outside its table).
DEFAULT_RESTART_SECONDS = 30.0
RestartDelay = Callable[[str | None], float]  # a workload profile (None: no profile) → its restart delay, s


def _default_restart_delay(profile: str | None) -> float:
    return DEFAULT_RESTART_SECONDS


class Action(StrEnum):
    START = "start"
    RESCALE = "rescale"
    PREEMPT = "preempt"
    KEEP = "keep"
    WAIT = "wait"


@dataclass(frozen=True)
class CycleConfig:
    """Elasticity guards applied to every policy's answer."""

    min_rescale_gain: float = 0.1  # grow a running job only for ≥ 10 % more speed (hysteresis)
    # Per job, the changes it makes for its own sake (it grows, or moves without slowing down); further ones wait. A
    # shrink or slower move made for other jobs is not counted (guards.RescaleHistory), but it counts for settling.
    max_rescales_per_hour: int = 4
    # A change that speeds a running job up (it grows, or moves to a faster GPU type) must repay its restart
    # within its horizon: speed after × (horizon − restart) > speed now × horizon. The horizon is how long the new
    # configuration can be expected to last: as long as the job's configurations have lasted so far (Guards.
    # horizon), at least this and at most the time the job has left. Every policy, those that price restarts too:
    # theirs is a price, this a horizon. 0: off.
    payback_seconds: float = 600.0
    # A job changed less than this long ago is not changed again unless the GPUs it holds are needed by the
    # policy's answer for other jobs (then the hold gives way and the policy's reason stands): two rounds
    # running, a job moves only for a cause it can name.
    settle_seconds: float = 120.0
    enforce_quotas: bool = True
    # A job that arrives while GPUs sit idle starts on them at once, every running job kept as it is
    # (admission.start_waiting_jobs), rather than at the next round.
    start_between_rounds: bool = True
    # Starts and resizes say what set their count, waits who holds the GPUs (explain.py); the simulator, which
    # never reads a reason, turns it off.
    explain_counts: bool = True
    # The back-end runs one GPU count per node (Slurm): a job spanning nodes is placed evenly (placement rule 4).
    even_spread: bool = False

    def __post_init__(self) -> None:
        horizons = (self.payback_seconds, self.settle_seconds)
        if self.min_rescale_gain < 0 or self.max_rescales_per_hour < 0 or not all(0 <= h < 1e9 for h in horizons):
            raise ValueError("min_rescale_gain, max_rescales_per_hour, payback_seconds and settle_seconds must be ≥ 0")


class Decision(NamedTuple):
    """What happens to one job this round. A named tuple: a round can make hundreds, so it must be cheap."""

    job_id: str
    action: Action
    gpus: tuple[str, ...]  # GPUs after the round
    previous: tuple[str, ...]  # GPUs before it
    reason: str
    batch_size: int | None = None


@dataclass(frozen=True)
class _Outcome:
    """What a round decided for every job, kept so that ``CycleResult.decisions`` can be built when asked for."""

    jobs: tuple[JobInfo, ...]  # the snapshot's, rejected ones included
    placements: Mapping[str, tuple[str, ...]]  # job id → GPUs after the round; absent: none
    reasons: tuple[Mapping[str, str], ...]  # job id → why, one mapping per stage: a later stage's reason wins
    batch_sizes: Mapping[str, int]
    type_notes: Mapping[str, str]  # job id → why it went on its GPU type, added to its reason
    snap: ClusterSnapshot | None = None  # with it, starts and rescales say what set their count (explain.py)
    count_rule: str | None = None  # the policy's rule for counts, e.g. "which tiresias gives every job"
    restart_delay: RestartDelay = _default_restart_delay

    def decide(self, job: JobInfo) -> Decision:
        reason = next((stage[job.id] for stage in reversed(self.reasons) if job.id in stage), None)
        decision = _decide(job, self.placements.get(job.id, ()), reason, self.batch_sizes.get(job.id))
        if self.snap is not None:
            decision = self._explained(job, decision, reason is None)
            if decision.action is Action.RESCALE:
                decision = self._type_move(job, decision)
        note = self.type_notes.get(job.id)
        return decision._replace(reason=f"{decision.reason}; {note}") if note else decision

    def _type_move(self, job: JobInfo, decision: Decision) -> Decision:
        """A rescale onto another GPU type says so first: "moved v100 → a100: 2.1× its speed there; restart ~40 s",
        and names the jobs its GPUs went to."""
        assert self.snap is not None
        type_of = self.snap.index.type_of
        before, after = type_of.get(decision.previous[0]), type_of.get(decision.gpus[0])
        if before is None or after is None or before == after:
            return decision
        now, then = speeds_across(job, self.snap, (len(decision.previous), before), (len(decision.gpus), after),
                                  decision.batch_size)
        speed = f"{then / now:.1f}× its speed there" if now > 0 else "it made no progress there"
        counts = "" if len(decision.gpus) == len(decision.previous) else (
            f" ({len(decision.previous)} → {len(decision.gpus)} GPUs)")
        moved = (f"moved {before} → {after}{counts}: {speed}; restart ~{self.restart_delay(job.profile):.0f} s")
        reason = f"{moved}; {decision.reason}"
        if len(decision.gpus) >= len(decision.previous):  # a shrink names them already
            # Where its GPUs went is the cause of a slower move, and of a move the guards let through a round
            # after another (its GPUs were given to other jobs): name them, as a shrink does.
            gave = explain.given_to_reason(job, decision.previous, self.snap, self._gainers)
            reason = f"{reason}; {gave}" if gave else reason
        return decision._replace(reason=reason)

    def _explained(self, job: JobInfo, decision: Decision, default: bool) -> Decision:
        """The decision with what set its count (a start or a resize) or who holds its GPUs (it cannot be placed)."""
        assert self.snap is not None
        if decision.action in (Action.START, Action.RESCALE) and len(decision.gpus) != len(decision.previous):
            kind = self.snap.index.type_of.get(decision.gpus[0])
            why = explain.count_reason(job, len(decision.gpus), self.snap, kind, self._left_free.get(kind or "", 0),
                                       self.count_rule)
            if len(decision.gpus) < len(decision.previous):  # a shrink names the jobs its GPUs went to
                gave = explain.given_to_reason(job, decision.previous, self.snap, self._gainers)
                why = f"{why}; {gave}" if gave else why
            why = why.split(": ", 1)[1] if default else why  # "started on 24 GPUs: its min_gpus …"
            return decision._replace(reason=f"{decision.reason}{': ' if default else '; '}{why}")
        if decision.action is Action.WAIT and decision.reason.startswith("cannot place"):
            holders = explain.holders_reason(job, self.snap, self._held_by_type, self._left_free)
            return decision._replace(reason=f"{decision.reason}; {holders}") if holders else decision
        return decision

    @cached_property
    def _left_free(self) -> dict[str, int]:
        assert self.snap is not None
        return explain.left_free_by_type(self.snap, self.placements)

    @cached_property
    def _gainers(self) -> dict[str, list[str]]:
        assert self.snap is not None
        return explain.gainers_by_type(self.snap, self.placements)

    @cached_property
    def _held_by_type(self) -> dict[str, dict[str, int]]:
        assert self.snap is not None
        return explain.held_by_type(self.snap, self.placements)

    def changes(self) -> tuple[Decision, ...]:
        """Decisions for the jobs whose GPUs change, in snapshot order.

        Most jobs of a round keep what they hold (placement hands back their own placement
        tuple) or keep waiting: for them this costs one comparison, not a ``Decision``.
        """
        get = self.placements.get
        return tuple(
            self.decide(job) for job in self.jobs
            if job.placement != get(job.id, ()) and set(job.placement) != set(get(job.id, ()))
        )

    def decisions(self, changes: Sequence[Decision]) -> dict[str, Decision]:
        changed = {decision.job_id: decision for decision in changes}
        return {job.id: changed[job.id] if job.id in changed else self.decide(job) for job in self.jobs}


@dataclass(frozen=True)
class CycleResult:
    """A round's answer.

    ``changes`` are the decisions that move GPUs (start, rescale, preempt), in snapshot
    order: what a driver applies. ``decisions`` has one per job of the snapshot, a KEEP or
    WAIT with its reason for every other job; it is built on first use, because the
    simulator never reads it and building hundreds of unchanged decisions a round was a
    large share of a simulated round.
    """

    changes: tuple[Decision, ...]
    state: PolicyState  # JSON: the policy's state and the rescale history
    wake_at: float | None
    _outcome: _Outcome = field(repr=False, compare=False)
    note: str = ""  # the policy's word on the round as a whole (PolicyResult.note)

    @cached_property
    def decisions(self) -> Mapping[str, Decision]:
        return self._outcome.decisions(self.changes)


class PolicyContractError(ValueError):
    """A policy returned counts outside a job's bounds, for unknown jobs, or over capacity."""


def run_cycle(
    snap: ClusterSnapshot, policy: Policy, state: PolicyState | None = None, config: CycleConfig | None = None,
    restart_delay: RestartDelay = _default_restart_delay,
) -> CycleResult:
    """One round. ``restart_delay`` is what a restart costs a job of a profile (``SchedulingConfig.restart_delay``):
    the payback guard weighs it, and a move between GPU types says it."""
    config = config or CycleConfig()
    state = state or {}
    admitted, rejected = admit(snap)
    result = policy.allocate(admitted, state.get("policy"))
    counts = checked_counts(admitted, result, policy.name)
    history = RescaleHistory.of(state, snap.now)
    capabilities = policy.capabilities
    if capabilities.prices_restarts:  # its objective already weighs a restart against the gain
        config = dataclasses.replace(config, min_rescale_gain=0.0)
    guards = Guards(admitted, result.gpu_types, history, config, restart_delay, result.batch_sizes)
    counts, stage_reasons, held = guards.stabilise(counts)
    if config.enforce_quotas:
        counts, quota_reasons = reclaim_for_owners(admitted, counts)
        stage_reasons.update(quota_reasons)
    # A policy that places node by node (Pollux) moves a growing job whole onto one node rather than spread it.
    # A type the policy chose goes with the count it chose: a job the guards held or a quota resized stays where
    # it is rather than move with a count the policy did not price there.
    types = {job_id: t for job_id, t in result.gpu_types.items()
             if counts[job_id] == result.allocations[job_id] and job_id not in held}
    placed = place(admitted, counts, consolidate=capabilities.consolidates_on_growth, gpu_types=types,
                   even_spread=config.even_spread)
    stages = (result.reasons, stage_reasons, placed.notes, placed.unplaced, rejected)
    outcome = _Outcome(snap.jobs, placed.placements, stages, result.batch_sizes, placed.type_notes,
                       snap if config.explain_counts else None, capabilities.count_rule, restart_delay)
    changes = outcome.changes()
    recorded = history.after(_rescaled(snap, changes), snap.jobs, snap.now)
    new_state = {"policy": result.state, **recorded.state()}
    return CycleResult(changes, new_state, result.wake_at, outcome, result.note)


def admit(snap: ClusterSnapshot) -> tuple[ClusterSnapshot, dict[str, str]]:
    """The snapshot without jobs that cannot run on this cluster at all, and why each was left out."""
    by_type, rejected = snap.usable_by_type, {}
    one_type = max(by_type.values(), default=0)  # a job never spans GPU types
    for job in snap.jobs:
        usable = by_type.get(job.gpu_type, 0) if job.gpu_type else one_type
        if job.min_gpus > usable:
            kind = f"{job.gpu_type} " if job.gpu_type else ""
            rejected[job.id] = (f"unschedulable: needs {job.min_gpus} {kind}GPUs, the cluster has {usable} usable"
                                + ("" if job.gpu_type else " of any one type"))
    if not rejected:
        return snap, rejected  # the common case: no second snapshot to build and validate
    jobs = tuple(job for job in snap.jobs if job.id not in rejected)
    return dataclasses.replace(snap, jobs=jobs), rejected


def checked_counts(snap: ClusterSnapshot, result: PolicyResult, policy: str) -> dict[str, int]:
    """The policy's counts, after checking its contract (a broken policy must not touch the cluster)."""
    counts = dict(result.allocations)
    # Job ids are unique (the snapshot checks), so as many counts as jobs, each job named, is exactly the jobs.
    if len(counts) != len(snap.jobs):
        raise PolicyContractError(f"{policy}: allocations must name exactly the snapshot's jobs")
    for job in snap.jobs:
        gpus = counts.get(job.id)
        if gpus is None:
            raise PolicyContractError(f"{policy}: allocations must name exactly the snapshot's jobs")
        if gpus and not job.min_gpus <= gpus <= job.max_gpus:
            raise PolicyContractError(f"{policy}: job {job.id} got {gpus} GPUs, bounds {job.min_gpus}..{job.max_gpus}")
    if not demand_fits(snap, counts):
        raise PolicyContractError(f"{policy}: GPUs over capacity ({sum(counts.values())} given)")
    _check_types(snap, counts, result.gpu_types, policy)
    return counts


def _check_types(snap: ClusterSnapshot, counts: Mapping[str, int], gpu_types: Mapping[str, str], policy: str) -> None:
    """A type a policy chose must exist, be the job's own if it requires one, and hold all it was given."""
    if not gpu_types:
        return
    usable, given = snap.usable_by_type, dict.fromkeys(snap.usable_by_type, 0)
    required = {job.id: job.gpu_type for job in snap.jobs}
    for job_id, gpu_type in gpu_types.items():
        if job_id not in counts or gpu_type not in usable or required[job_id] not in (None, gpu_type):
            raise PolicyContractError(f"{policy}: job {job_id} cannot go on GPU type {gpu_type!r}")
        given[gpu_type] += counts[job_id]
    over = [t for t, count in given.items() if count > usable[t]]
    if over:
        raise PolicyContractError(f"{policy}: more {over[0]} GPUs given ({given[over[0]]}) than usable")


def _decide(job: JobInfo, gpus: tuple[str, ...], reason: str | None, batch_size: int | None) -> Decision:
    previous = job.placement
    if not previous and not gpus:
        action, default = Action.WAIT, "waiting for GPUs"
    elif not previous:
        action, default = Action.START, f"started on {len(gpus)} GPU{'' if len(gpus) == 1 else 's'}"
    elif not gpus:
        action, default = Action.PREEMPT, "preempted to free GPUs for other jobs"
    elif set(previous) == set(gpus):
        action, default = Action.KEEP, f"keeps {len(gpus)} GPUs"
    else:
        action, default = Action.RESCALE, _rescale_text(previous, gpus)
    return Decision(job.id, action, gpus, previous, reason or default, batch_size)


def _rescale_text(previous: tuple[str, ...], gpus: tuple[str, ...]) -> str:
    if len(previous) == len(gpus):
        return f"moved to other GPUs ({len(set(previous) - set(gpus))} changed)"
    return f"rescaled from {len(previous)} to {len(gpus)} GPUs"


def _rescaled(snap: ClusterSnapshot, changes: Sequence[Decision]) -> dict[str, bool]:
    """This round's rescales: job id → whether the job yielded (it runs slower after the change: a shrink or a move
    to slower GPUs, made for other jobs' sake). A job whose speed is unknown counts as changing for its own."""
    jobs = {job.id: job for job in snap.jobs}
    type_of = snap.index.type_of
    rescaled = {}
    for decision in changes:
        if decision.action is not Action.RESCALE:
            continue
        job = jobs[decision.job_id]
        before = (len(decision.previous), type_of.get(decision.previous[0]))
        after = (len(decision.gpus), type_of.get(decision.gpus[0]))
        now, then = speeds_across(job, snap, before, after, decision.batch_size)
        rescaled[job.id] = then < now
    return rescaled
