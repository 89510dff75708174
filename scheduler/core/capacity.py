"""GPU counts a policy may still hand out in one round, by GPU type.

Policies decide counts, not GPUs; this ledger keeps their counts placeable. It is exact:
counts fit the cluster if and only if every GPU type holds the jobs that require it and
all jobs together fit the usable GPUs (untyped jobs may go anywhere). Usable means
healthy and on a schedulable node. Created fresh inside each ``allocate`` call.
"""

from __future__ import annotations

from collections.abc import Mapping

from .types import ClusterSnapshot, JobInfo


class Capacity:
    def __init__(self, snap: ClusterSnapshot) -> None:
        self._usable = snap.usable_by_type
        self._total = sum(self._usable.values())
        self._typed_used: dict[str, int] = {}
        self._used = 0

    @property
    def total_free(self) -> int:
        return self._total - self._used

    def free_for(self, job: JobInfo) -> int:
        """GPUs ``job`` could still get."""
        if job.gpu_type is None:
            return self.total_free
        typed_free = self._usable.get(job.gpu_type, 0) - self._typed_used.get(job.gpu_type, 0)
        return min(typed_free, self.total_free)

    def fits(self, job: JobInfo, gpus: int) -> bool:
        return gpus <= self.free_for(job)

    def take(self, job: JobInfo, gpus: int) -> None:
        """Hand ``gpus`` to ``job``; raises ValueError when they are not free."""
        if not self.fits(job, gpus):
            raise ValueError(f"job {job.id}: {gpus} GPUs asked, {self.free_for(job)} free")
        self._count(job, gpus)

    def give_back(self, job: JobInfo, gpus: int) -> None:
        """Return GPUs ``job`` was given."""
        self._count(job, -gpus)

    def _count(self, job: JobInfo, gpus: int) -> None:
        self._used += gpus
        if job.gpu_type is not None:
            self._typed_used[job.gpu_type] = self._typed_used.get(job.gpu_type, 0) + gpus


def demand_fits(snap: ClusterSnapshot, counts: Mapping[str, int]) -> bool:
    """Whether ``counts`` (job id → GPUs) fit the usable GPUs: each type holds its typed demand, and all fit."""
    typed: dict[str, int] = {}
    total = 0
    for job in snap.jobs:
        gpus = counts.get(job.id, 0)
        total += gpus
        if gpus and job.gpu_type is not None:
            typed[job.gpu_type] = typed.get(job.gpu_type, 0) + gpus
    usable = snap.usable_by_type
    return total <= sum(usable.values()) and all(gpus <= usable.get(t, 0) for t, gpus in typed.items())
