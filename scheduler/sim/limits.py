"""How long a simulation may run: no run goes past ``MAX_SIMULATED_SECONDS``, and a workload with a job that
could not finish by then even alone on the cluster is refused before the replay starts."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.core.speed import job_speed
from scheduler.core.types import ClusterSnapshot, NodeInfo

from .job_run import JobRun
from .records import WorkloadJob

# No simulation runs past this simulated time: a year and a half covers every public trace (Philly's is ~3 months)
# with room for queueing, and bounds a what-if's work whatever the workload says (1e308 work ran forever).
MAX_SIMULATED_SECONDS = 550 * 86_400.0


class WorkloadTooLong(ValueError):
    """A job that could not finish within ``MAX_SIMULATED_SECONDS`` even alone on the cluster's fastest GPUs."""

    def __init__(self, job_id: str, seconds: float) -> None:
        days = "forever" if not math.isfinite(seconds) else f"{seconds / 86_400:,.0f} simulated days"
        super().__init__(f"job {job_id!r} cannot finish within {MAX_SIMULATED_SECONDS / 86_400:.0f} simulated days "
                         f"even alone on the whole cluster ({days}): its total work is too large for this cluster")
        self.job_id = job_id


def refuse_endless(workload: Sequence[WorkloadJob], nodes: tuple[NodeInfo, ...],
                   profiles: Mapping[str, Mapping[str, Any]], origin: float = 0.0) -> None:
    """``WorkloadTooLong`` for the first job whose arrival plus its shortest possible run (all the GPUs it may use,
    on the GPU type where it goes fastest, no restarts) is past ``MAX_SIMULATED_SECONDS``. A job that fits no GPU
    type at all is the round's to set aside (it ends the run unfinished), not refused here."""
    alone = ShortestRun(nodes, profiles)
    for spec in workload:
        seconds = alone.seconds(spec, spec.total_work)
        if seconds is not None and max(spec.submit_time, origin) - origin + seconds > MAX_SIMULATED_SECONDS:
            raise WorkloadTooLong(spec.id, seconds)


def cannot_finish_within(workload: Sequence[WorkloadJob], done: Mapping[str, float], nodes: tuple[NodeInfo, ...],
                         profiles: Mapping[str, Mapping[str, Any]], seconds: float) -> frozenset[str]:
    """The jobs whose work left (their total less ``done``) takes longer than ``seconds`` even alone on the
    cluster's fastest GPUs: a forecast over ``seconds`` can say at once that they do not finish in it."""
    alone = ShortestRun(nodes, profiles)
    endless = set()
    for spec in workload:
        needed = alone.seconds(spec, max(spec.total_work - done.get(spec.id, 0.0), 0.0))
        if needed is not None and needed > seconds:
            endless.add(spec.id)
    return frozenset(endless)


class ShortestRun:
    """How long a job's work takes at the least: all the GPUs it may use, on the GPU type where it goes fastest,
    no restarts."""

    def __init__(self, nodes: tuple[NodeInfo, ...], profiles: Mapping[str, Mapping[str, Any]]) -> None:
        self.by_type = Counter(node.gpu_type for node in nodes for _ in node.gpus)
        self.snapshots = {kind: ClusterSnapshot(0.0, tuple(n for n in nodes if n.gpu_type == kind), (), (), profiles)
                          for kind in self.by_type}

    def seconds(self, spec: WorkloadJob, work: float) -> float | None:
        """None for a job that fits no GPU type at all (the round sets it aside)."""
        fastest = max((_alone_speed(spec, snap, self.by_type[kind]) for kind, snap in self.snapshots.items()),
                      default=0.0)
        return work / fastest if fastest > 0 else None


def _alone_speed(spec: WorkloadJob, snap: ClusterSnapshot, gpus_of_type: int) -> float:
    gpus = min(spec.max_gpus, gpus_of_type)
    if gpus < spec.min_gpus or (spec.gpu_type and snap.nodes and snap.nodes[0].gpu_type != spec.gpu_type):
        return 0.0
    return job_speed(JobRun(spec, 0.0).job_info(0.0), snap, gpus)
