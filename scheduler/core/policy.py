"""The one interface every scheduling policy implements, and the registry that names them.

A policy maps a ``ClusterSnapshot`` (and the state it returned last round) to a GPU count
per job. It never reads a clock, never mutates its inputs, keeps no memory on ``self``
(the next round may run in another worker) and is deterministic for the same input.
Configuration, such as Tiresias' queue thresholds, is passed to the constructor; policies are
built from a ``SchedulingConfig`` by ``config.build_policy``, the one place that does; ``config`` also names
them (``policy_names``, ``get_policy``), once the built-in ones have registered themselves.

What the round and the simulator need to know of a policy beyond its answer is declared on
it as ``capabilities``, a typed record (``Capabilities``), never discovered by ``getattr``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar

from .speed import held_type
from .types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState


@dataclass(frozen=True)
class Capabilities:
    """What a policy tells the round and the simulator about itself.

    ``prices_restarts``: its own objective charges for a restart (Pollux's re-allocation factor, Sia's restart
    factor), so the round skips its small-gain hysteresis, which would count the same cost twice (the per-job
    cap on rescales per hour still applies). ``consolidates_on_growth``: it prices the nodes a job spans, so a
    growing job is moved whole onto fewer nodes rather than spread. ``count_rule``: how a policy that gives
    every job its min_gpus says so in a start's reason ("which tiresias gives every job"; explain.py).
    ``predicts_runtimes``: it reads ``JobInfo.expected_seconds``, which the simulator then predicts.
    """

    prices_restarts: bool = False
    consolidates_on_growth: bool = False
    count_rule: str | None = None
    predicts_runtimes: bool = False


class Policy(Protocol):
    name: ClassVar[str]
    # One line for an operator choosing a policy: what it favours and what it gives up (``SUMMARY_LIMIT``).
    summary: ClassVar[str]
    # Ours, not a published policy (a variant measured here: docs/validation.md); marked so in every list. Optional.
    experimental: ClassVar[bool]
    # Elastic policies are re-run every round; event-driven ones only when something can change.
    event_driven: ClassVar[bool]
    capabilities: ClassVar[Capabilities]

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult: ...


def hold_allocations(snap: ClusterSnapshot, state: PolicyState | None, why: str) -> PolicyResult:
    """The answer of a policy that has none this round (its solver gave no solution): nothing moves.

    Every running job keeps its count on the type it holds, every waiting job waits, and ``why`` becomes
    the round's note and each job's reason. An optimising policy returns this rather than an empty
    allocation, which the round would carry out as preempting every running job.
    """
    # A job that now requires another type than it holds (an operator changed it) cannot keep its GPUs: it waits.
    misplaced = {job.id for job in snap.jobs if job.gpu_type not in (None, held_type(job, snap) or job.gpu_type)}
    allocations = {job.id: 0 if job.id in misplaced else _within_bounds(job.gpus, job.min_gpus, job.max_gpus)
                   for job in snap.jobs}
    usable = snap.usable_by_type
    gpu_types = {job.id: kind for job in snap.jobs
                 if allocations[job.id] and (kind := _sole_type(job, snap)) is not None and kind in usable}
    reasons = {job.id: f"{why}; " + ("waits: its GPUs are not of the type it requires" if job.id in misplaced
                                     else "keeps its GPUs" if job.gpus else "waits") for job in snap.jobs}
    return PolicyResult(allocations=allocations, state=dict(state or {}), reasons=reasons, gpu_types=gpu_types,
                        note=f"{why}: running jobs keep their GPUs")


def _sole_type(job: JobInfo, snap: ClusterSnapshot) -> str | None:
    """The one type of the GPUs ``job`` holds; None when it holds none, or GPUs of several types (counted by number
    only: booking all of them on the type of most would overbook that type)."""
    kinds = {snap.index.type_of.get(gpu) for gpu in job.placement}
    return kinds.pop() if len(kinds) == 1 else None


def _within_bounds(held: int, least: int, most: int) -> int:
    """What a job keeps: what it holds, cut to its bounds (an operator may have lowered max_gpus); 0 below min."""
    return min(held, most) if held >= least else 0


class UnknownPolicy(KeyError):
    def __str__(self) -> str:
        return f"unknown policy {self.args[0]!r}; known: {', '.join(sorted(POLICIES))}"


POLICIES: dict[str, type[Policy]] = {}
P = TypeVar("P", bound=type)
SUMMARY_LIMIT = 100  # characters: a summary is read in a drop-down beside the name


def register(cls: P) -> P:
    """Class decorator: make a policy available by its ``name``."""
    name = cls.name  # type: ignore[attr-defined]
    if not isinstance(getattr(cls, "capabilities", None), Capabilities):
        raise TypeError(f"policy {name!r} must declare its capabilities (a Capabilities record)")
    # Its own: a subclass inheriting its parent's summary would describe the parent in the operator's list.
    summary = cls.__dict__.get("summary")
    if not isinstance(summary, str) or not summary.strip() or "\n" in summary or len(summary) > SUMMARY_LIMIT:
        raise TypeError(f"policy {name!r} must declare its own summary: one line of at most {SUMMARY_LIMIT} characters")
    if name in POLICIES and POLICIES[name] is not cls:
        raise ValueError(f"two policies are named {name!r}")
    POLICIES[name] = cls  # type: ignore[assignment]
    return cls
