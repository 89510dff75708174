"""GPU counts a policy may still hand out in one round, by GPU type.

Policies decide counts, not GPUs; this ledger keeps their counts placeable. It is exact:
counts fit the cluster if and only if every GPU type holds the jobs that require it and
all jobs together fit the usable GPUs (untyped jobs may go on any type). Usable means
healthy and on a schedulable node. Created fresh inside each ``allocate`` call.
"""

from __future__ import annotations

from collections.abc import Mapping

from .types import ClusterSnapshot, JobInfo


class Capacity:
    def __init__(self, snap: ClusterSnapshot) -> None:
        self._usable = snap.usable_by_type
        self._total = sum(self._usable.values())
        # A job never spans GPU types: the most GPUs one job can hold.
        self.one_type_most = max(self._usable.values(), default=0)
        self._typed_used: dict[str, int] = {}
        # GPUs known to be taken on each type: typed jobs', and untyped ones' booked on a type (``take``'s
        # ``on_type``). Untyped GPUs booked without a type count only towards the total.
        self._on_type: dict[str, int] = {}
        self._used = 0

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(sorted(self._usable))

    def free_on(self, gpu_type: str) -> int:
        """GPUs of ``gpu_type`` still free, as far as this ledger knows where its GPUs went."""
        return min(self._usable.get(gpu_type, 0) - self._on_type.get(gpu_type, 0), self.total_free)

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

    def take(self, job: JobInfo, gpus: int, on_type: str | None = None) -> None:
        """Hand ``gpus`` to ``job`` (an untyped one's on ``on_type`` if given); ValueError when they are not free."""
        if not self.fits(job, gpus) or (on_type is not None and gpus > self.free_on(on_type)):
            raise ValueError(f"job {job.id}: {gpus} GPUs asked, {self.free_for(job)} free")
        self._count(job, gpus, on_type)

    def give_back(self, job: JobInfo, gpus: int) -> None:
        """Return GPUs ``job`` was given."""
        self._count(job, -gpus)

    def _count(self, job: JobInfo, gpus: int, on_type: str | None = None) -> None:
        self._used += gpus
        if job.gpu_type is not None:
            self._typed_used[job.gpu_type] = self._typed_used.get(job.gpu_type, 0) + gpus
        where = job.gpu_type or on_type
        if where is not None:
            self._on_type[where] = self._on_type.get(where, 0) + gpus


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
