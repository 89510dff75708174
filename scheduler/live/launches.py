"""Telling the executor, after the commit: a launch for every job whose allocation it has not acknowledged.

Every round resends what an executor has not acknowledged (``Job.generation`` ahead of
``Job.launched_generation``), so a launch lost to a crash is repaired by the next round.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db.models import F

from scheduler.backends import GpuPlace, Launch

from ..models import Allocation, Job, Node
from .snapshot import read_inventory


def unlaunched(gpu_place: Mapping[str, GpuPlace] | None = None) -> list[Launch]:
    """A launch for every job whose allocation the executor has not acknowledged yet, in job order."""
    jobs = list(Job.objects.filter(generation__gt=F("launched_generation")).order_by("pk").values_list(
        "pk", "generation", "progress", "restarts", "policy_batch_size"))
    if not jobs:
        return []
    if gpu_place is None:
        gpu_place = read_inventory().gpu_place
    held: dict[int, list[GpuPlace]] = {}
    open_rows = Allocation.objects.filter(ended_at__isnull=True, job_id__in=[pk for pk, *_ in jobs])
    for job_id, gpu_uuid in open_rows.order_by("gpu__node__hostname", "gpu__index").values_list(
            "job_id", "gpu__uuid"):
        held.setdefault(job_id, []).append(gpu_place[gpu_uuid])
    return [Launch(pk, generation, tuple(held.get(pk, ())), restart=progress > 0 or restarts > 0,
                   batch_size=batch_size)
            for pk, generation, progress, restarts, batch_size in jobs]


def node_hostnames() -> list[str]:
    return list(Node.objects.values_list("hostname", flat=True))
