"""GPU counts a policy may still hand out in one round, by GPU type.

Policies decide counts, not GPUs; this ledger keeps their counts placeable: a job that
requires a GPU type draws only from that type, and no more GPUs are handed out than are
healthy on schedulable nodes. It is created fresh inside each ``allocate`` call.
"""

from __future__ import annotations

from .types import ClusterSnapshot, JobInfo


class Capacity:
    def __init__(self, snap: ClusterSnapshot) -> None:
        self._free: dict[str, int] = {}
        for node in snap.nodes:
            self._free[node.gpu_type] = self._free.get(node.gpu_type, 0) + len(node.usable_gpus)

    @property
    def total_free(self) -> int:
        return sum(self._free.values())

    def free_for(self, job: JobInfo) -> int:
        """GPUs ``job`` could still get."""
        return self._free.get(job.gpu_type, 0) if job.gpu_type else self.total_free

    def fits(self, job: JobInfo, gpus: int) -> bool:
        return gpus <= self.free_for(job)

    def take(self, job: JobInfo, gpus: int) -> None:
        """Hand ``gpus`` to ``job``; raises ValueError when they are not free."""
        if not self.fits(job, gpus):
            raise ValueError(f"job {job.id}: {gpus} GPUs asked, {self.free_for(job)} free")
        for gpu_type in self._draw_order(job):
            if gpus == 0:
                return
            drawn = min(gpus, self._free[gpu_type])
            self._free[gpu_type] -= drawn
            gpus -= drawn

    def give_back(self, job: JobInfo, gpus: int, gpu_type: str | None = None) -> None:
        """Return GPUs to the pool of ``gpu_type`` (the job's type, else the largest pool)."""
        pool = gpu_type or job.gpu_type or max(sorted(self._free), key=self._free.__getitem__)
        self._free[pool] = self._free.get(pool, 0) + gpus

    def _draw_order(self, job: JobInfo) -> list[str]:
        if job.gpu_type:
            return [job.gpu_type] if job.gpu_type in self._free else []
        # Untyped jobs draw from the fullest pools first, keeping scarce types for jobs that need them.
        return sorted(self._free, key=lambda t: (-self._free[t], t))
