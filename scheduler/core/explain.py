"""Reasons that explain the number: what set a job's GPU count this round, and who holds the GPUs a waiting job
needs. Pure, like the rest of the core; ``cycle`` appends these to the decisions' reasons.

What sets a count, in the order it is named:

* the job's own bounds: a rigid job's size, its ``max_gpus``, or its ``min_gpus`` — with the policy's rule when it
  is one that gives every job its minimum (``Policy.count_rule``);
* its goodput optimum on its GPU type: one more GPU would add less than ``FLAT_GAIN`` (speed.py's model);
* the GPUs left: none of its type is free after the round, so it could not have had more;
* otherwise the policy's trade-off (``count_rule`` when the policy states one), e.g. another job gained more.

A job that shrinks is told which jobs its GPUs went to: those starting or growing on that type this round.

A job that cannot be placed is told who holds the GPUs of its type: how many jobs, the largest, how many GPUs they
hold above their minimum (a policy that shrinks jobs could take those), and that it starts when that many finish,
shrink or are preempted.
"""

from __future__ import annotations

from collections.abc import Mapping

from .speed import job_speed, priced_type
from .types import ClusterSnapshot, JobInfo

FLAT_GAIN = 0.01  # one more GPU adding under 1 % of speed: the count is at the job's goodput optimum


def left_free_by_type(snap: ClusterSnapshot, placements: Mapping[str, tuple[str, ...]]) -> dict[str, int]:
    """Usable GPUs of each type that no job holds after the round."""
    type_of = snap.index.type_of
    free = dict(snap.usable_by_type)
    for gpus in placements.values():
        for gpu in gpus:
            kind = type_of.get(gpu)
            if kind in free:
                free[kind] -= 1
    return free


def count_reason(job: JobInfo, count: int, snap: ClusterSnapshot, gpu_type: str | None, left_free: int,
                 rule: str | None) -> str:
    """Why ``job`` got ``count`` GPUs (of ``gpu_type``) this round, ``left_free`` of that type being free after it:
    "24 GPUs: its min_gpus, which tiresias gives every job", "16 GPUs: its goodput optimum on a100 (on 17 it would
    run +0.4%)", "40 GPUs: no a100 GPU left free"."""
    kind = f"{gpu_type} " if gpu_type else ""
    factors: list[str] = []
    if job.min_gpus == job.max_gpus:
        factors.append("its fixed size")
    elif count == job.max_gpus:
        factors.append(f"its max_gpus ({job.max_gpus})")
    elif count == job.min_gpus:
        factors.append(f"its min_gpus ({job.min_gpus})" + (f", {rule}" if rule else ""))
    else:
        gain = _next_gpu_gain(job, count, snap, gpu_type)
        if gain is not None and gain < FLAT_GAIN:
            factors.append(f"its goodput optimum on {gpu_type or 'its type'} (on {count + 1} it would run "
                           f"{gain:+.1%})")
    if count < job.max_gpus and left_free <= 0:
        factors.append(f"no {kind}GPU left free")
    if not factors:
        factors.append(rule or "the policy's trade-off between jobs")
    return f"{count} GPU{'' if count == 1 else 's'}: {'; '.join(factors)}"


def _next_gpu_gain(job: JobInfo, count: int, snap: ClusterSnapshot, gpu_type: str | None) -> float | None:
    now = job_speed(job, snap, count, gpu_type=gpu_type)
    return job_speed(job, snap, count + 1, gpu_type=gpu_type) / now - 1 if now > 0 else None


def held_by_type(snap: ClusterSnapshot, placements: Mapping[str, tuple[str, ...]]) -> dict[str, dict[str, int]]:
    """GPU type → job id → GPUs of that type the job holds after the round."""
    type_of = snap.index.type_of
    held: dict[str, dict[str, int]] = {}
    for job_id, gpus in placements.items():
        for gpu in gpus:
            per_job = held.setdefault(type_of.get(gpu, ""), {})
            per_job[job_id] = per_job.get(job_id, 0) + 1
    return held


def holders_reason(job: JobInfo, snap: ClusterSnapshot, held_on: Mapping[str, Mapping[str, int]],
                   left_free: Mapping[str, int]) -> str:
    """Who holds the GPUs a job that could not be placed needs (``held_on``: ``held_by_type``), and what would free
    them."""
    jobs = {other.id: other for other in snap.jobs}
    kind = job.gpu_type or priced_type(job, snap) or ""
    held = {other: count for other, count in held_on.get(kind, {}).items() if other != job.id}
    short = job.min_gpus - left_free.get(kind, 0)
    if not held or short <= 0:
        return ""
    ranked = sorted(held.items(), key=lambda item: (-item[1], item[0]))
    above_min = sum(max(0, gpus - jobs[other].min_gpus) for other, gpus in held.items() if other in jobs)
    freed, needed = 0, 0
    for _, count in ranked:
        if freed >= short:
            break
        freed, needed = freed + count, needed + 1
    largest_id, largest = ranked[0]
    # The reason is stored as the job's pending_reason, which its tenant reads: another tenant's job is not named.
    owner = jobs[largest_id].tenant if largest_id in jobs else None
    largest_job = f"job {largest_id}" if owner == job.tenant else "another tenant's job"
    return (f"the {sum(held.values())} other {kind} GPUs are held by {len(held)} job{'s' if len(held) > 1 else ''} "
            f"(largest: {largest_job} with {largest}; {above_min} above their min_gpus); it starts when {short} "
            f"more are free: at least {needed} of them finishing, shrinking or being preempted")


def gainers_by_type(snap: ClusterSnapshot, placements: Mapping[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """GPU type → the jobs holding more GPUs of that type after the round than before it, in snapshot order."""
    type_of = snap.index.type_of
    gainers: dict[str, list[str]] = {}
    for job in snap.jobs:
        after = placements.get(job.id, ())
        if not after:
            continue
        kind = type_of.get(after[0], "")
        before = sum(1 for gpu in job.placement if type_of.get(gpu) == kind)
        if len(after) > before:
            gainers.setdefault(kind, []).append(job.id)
    return gainers


def given_to_reason(job: JobInfo, previous: tuple[str, ...], snap: ClusterSnapshot,
                    gainers: Mapping[str, list[str]], named: int = 3) -> str:
    """Which jobs the GPUs a shrinking job gave up went to: "its v100 GPUs went to 2 jobs starting or growing (job 7,
    another tenant's job)"; "" when none gained on that type (it shrank for a quota or a guard)."""
    kind = snap.index.type_of.get(previous[0], "") if previous else ""
    others = [other for other in gainers.get(kind, []) if other != job.id]
    if not others:
        return ""
    tenants = {other.id: other.tenant for other in snap.jobs}
    # The reason is stored on the job, which its tenant reads: another tenant's job is not named.
    names = [f"job {other}" if tenants.get(other) == job.tenant else "another tenant's job" for other in others]
    shown = ", ".join(names[:named]) + (f" and {len(names) - named} more" if len(names) > named else "")
    plural = "s" if len(others) > 1 else ""
    return f"its {kind} GPUs went to {len(others)} job{plural} starting or growing ({shown})"
