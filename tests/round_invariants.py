"""What must hold in the database between rounds, whatever killed what: checked by query, not trusted.

``problems()`` returns a list of readable sentences (empty when all is well), so a failing
test says which job or GPU broke which rule instead of only "assert False".
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, F

from scheduler.core.gpu_types import gpu_type_key
from scheduler.models import (
    ACTIVE_STATES,
    Allocation,
    GpuHealth,
    Job,
    JobState,
    RoundStatus,
    SchedulingRound,
)


def open_allocations_per_job() -> dict[int, int]:
    rows = Allocation.objects.filter(ended_at__isnull=True).values("job").annotate(n=Count("id"))
    return {row["job"]: row["n"] for row in rows}


def problems(expected_jobs: Iterable[int] | None = None) -> list[str]:
    """Every broken rule: GPUs held twice, jobs lost or invented, states and open allocations that disagree."""
    found = _doubly_held_gpus() + _bad_placements() + _half_written_rounds()
    held = open_allocations_per_job()
    jobs = list(Job.objects.values_list("pk", "state", "min_gpus", "max_gpus"))
    if expected_jobs is not None:
        expected, present = set(expected_jobs), {pk for pk, *_ in jobs}
        if expected - present:
            found.append(f"jobs lost: {sorted(expected - present)[:20]}")
        if present - expected:
            found.append(f"jobs appeared from nowhere: {sorted(present - expected)[:20]}")
    for pk, state, low, high in jobs:
        gpus = held.get(pk, 0)
        if state not in JobState.values:
            found.append(f"job {pk} is in unknown state {state!r}")
        elif state in ACTIVE_STATES and not low <= gpus <= high:
            found.append(f"job {pk} is {state} on {gpus} GPUs, outside its bounds {low}..{high}")
        elif state not in ACTIVE_STATES and gpus:
            found.append(f"job {pk} is {state} but still holds {gpus} GPUs")
    return found


def _doubly_held_gpus() -> list[str]:
    rows = Allocation.objects.filter(ended_at__isnull=True).values("gpu").annotate(n=Count("id")).filter(n__gt=1)
    return [f"GPU {row['gpu']} has {row['n']} open allocations" for row in rows]


def _bad_placements() -> list[str]:
    """Open allocations on lost GPUs, and typed jobs on GPUs of another type."""
    rows = Allocation.objects.filter(ended_at__isnull=True).select_related("gpu", "job")
    found = [f"job {a.job_id} holds lost GPU {a.gpu.uuid}" for a in rows.filter(gpu__health=GpuHealth.LOST)]
    typed = rows.exclude(job__gpu_type="")
    found += [f"job {a.job_id} needs {a.job.gpu_type} but holds {a.gpu.model}" for a in typed
              if gpu_type_key(a.gpu.model) != a.job.gpu_type]
    return found


def _half_written_rounds() -> list[str]:
    """A round is one transaction: a row still 'running' means part of one was committed."""
    stuck = SchedulingRound.objects.filter(status=RoundStatus.RUNNING).values_list("pk", flat=True)
    return [f"round {pk} is still 'running': a round was committed half-way" for pk in stuck]


def unlaunched_jobs() -> list[int]:
    """Jobs whose GPUs changed but whose executor never acknowledged the change."""
    return list(Job.objects.filter(generation__gt=F("launched_generation")).values_list("pk", flat=True))
