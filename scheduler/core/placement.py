"""Placement: GPU counts → concrete GPUs.

Rules, in order of importance:
1. only healthy GPUs on schedulable nodes, of the job's GPU type when it names one;
2. fewest moves: a job keeps the GPUs it holds (a shrinking job gives up GPUs on the
   nodes where it has the fewest, a growing job grows on its own nodes first);
3. fewest nodes per job, without stranding GPUs: a job that fits on one node goes to the
   node with the least room that still fits it (best fit); a larger job takes whole free
   nodes and best-fits its remainder;
4. an untyped job stays on one GPU type when one type can hold it.
Large jobs are placed first. A job that cannot be placed gets no GPUs and a reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .types import ClusterSnapshot, JobInfo, NodeInfo


@dataclass(frozen=True)
class PlacementResult:
    placements: Mapping[str, tuple[str, ...]]  # job id → GPU ids, for every job given > 0 GPUs
    unplaced: Mapping[str, str]  # job id → why it got no GPUs
    notes: Mapping[str, str]  # job id → why it got fewer GPUs than its target (it kept what it held)


class _FreeGpus:
    """Free GPU ids per node, in a stable order."""

    def __init__(self, nodes: tuple[NodeInfo, ...], taken: set[str]) -> None:
        self.nodes = {node.name: node for node in nodes}
        self.free = {node.name: [g.id for g in node.usable_gpus if g.id not in taken] for node in nodes}

    def candidates(self, job: JobInfo, gpu_type: str | None) -> list[str]:
        wanted = job.gpu_type or gpu_type
        return [n for n, ids in self.free.items() if ids and (wanted is None or self.nodes[n].gpu_type == wanted)]

    def total(self, job: JobInfo, gpu_type: str | None) -> int:
        return sum(len(self.free[n]) for n in self.candidates(job, gpu_type))

    def take(self, node: str, count: int) -> list[str]:
        taken, self.free[node] = self.free[node][:count], self.free[node][count:]
        return taken


def place(snap: ClusterSnapshot, targets: Mapping[str, int]) -> PlacementResult:
    """Concrete GPUs for every job with a positive target count."""
    jobs = {job.id: job for job in snap.jobs}
    node_of = {gpu.id: node.name for node in snap.nodes for gpu in node.gpus}
    kept = {jid: _kept_gpus(snap, jobs[jid], count, node_of) for jid, count in targets.items() if count > 0}
    pool = _FreeGpus(snap.nodes, {gpu for ids in kept.values() for gpu in ids})
    placements: dict[str, tuple[str, ...]] = {}
    unplaced: dict[str, str] = {}
    notes: dict[str, str] = {}
    for jid in sorted(kept, key=lambda j: (-targets[j], jobs[j].submit_time, j)):
        job, need = jobs[jid], targets[jid] - len(kept[jid])
        extra = _grow(pool, job, kept[jid], need, node_of) if need else []
        if extra is not None:
            placements[jid] = tuple(kept[jid]) + tuple(extra)
        elif len(kept[jid]) >= job.min_gpus:  # could not grow: keep running as it is
            placements[jid] = tuple(kept[jid])
            notes[jid] = f"kept {len(kept[jid])} GPUs: {_why_unplaced(pool, job, need)}"
        else:
            unplaced[jid] = _why_unplaced(pool, job, need)
            _return(pool, kept[jid], node_of)
    return PlacementResult(placements, unplaced, notes)


def _kept_gpus(snap: ClusterSnapshot, job: JobInfo, count: int, node_of: dict[str, str]) -> list[str]:
    """The GPUs ``job`` keeps: its usable ones, fewest nodes first, at most ``count``."""
    usable = {g.id for node in snap.nodes for g in node.usable_gpus}
    if job.gpu_type:
        typed = {g.id for node in snap.nodes if node.gpu_type == job.gpu_type for g in node.gpus}
        usable &= typed
    held = [gpu for gpu in job.placement if gpu in usable]
    per_node: dict[str, list[str]] = {}
    for gpu in held:
        per_node.setdefault(node_of[gpu], []).append(gpu)
    ordered = sorted(per_node.values(), key=lambda ids: (-len(ids), ids[0]))
    return [gpu for ids in ordered for gpu in ids][:count]


def _grow(pool: _FreeGpus, job: JobInfo, kept: list[str], need: int, node_of: dict[str, str]) -> list[str] | None:
    """``need`` more GPUs for ``job``: on its own nodes first, then best fit; None if impossible."""
    own_nodes = sorted({node_of[gpu] for gpu in kept})
    extra: list[str] = []
    for node in own_nodes:
        extra += pool.take(node, need - len(extra))
    if len(extra) == need:
        return extra
    gpu_type = job.gpu_type or (pool.nodes[own_nodes[0]].gpu_type if own_nodes else _best_type(pool, job, need))
    rest = _pack(pool, job, gpu_type, need - len(extra))
    if rest is None:
        for gpu in extra:
            pool.free[node_of[gpu]].append(gpu)
        return None
    return extra + rest


def _best_type(pool: _FreeGpus, job: JobInfo, need: int) -> str | None:
    """For an untyped job: the GPU type with the tightest fit for ``need`` GPUs, if any type can hold it."""
    by_type: dict[str, list[int]] = {}
    for node in pool.candidates(job, None):
        by_type.setdefault(pool.nodes[node].gpu_type, []).append(len(pool.free[node]))
    fitting = [(sum(sizes), gpu_type) for gpu_type, sizes in by_type.items() if sum(sizes) >= need]
    return min(fitting)[1] if fitting else None


def _pack(pool: _FreeGpus, job: JobInfo, gpu_type: str | None, need: int) -> list[str] | None:
    """Whole free nodes largest first until the remainder fits one node, which is chosen by best fit."""
    if pool.total(job, gpu_type) < need:
        return None
    taken: list[str] = []
    while need > 0:
        nodes = pool.candidates(job, gpu_type)
        fitting = [n for n in nodes if len(pool.free[n]) >= need]
        if fitting:
            node = min(fitting, key=lambda n: (len(pool.free[n]), n))
        else:
            node = max(nodes, key=lambda n: (len(pool.free[n]), n))
        got = pool.take(node, need)
        taken += got
        need -= len(got)
    return taken


def _return(pool: _FreeGpus, gpus: list[str], node_of: dict[str, str]) -> None:
    for gpu in gpus:
        pool.free[node_of[gpu]].append(gpu)


def _why_unplaced(pool: _FreeGpus, job: JobInfo, need: int) -> str:
    kind = f"{job.gpu_type} " if job.gpu_type else ""
    return f"cannot place: {need} more {kind}GPUs needed, {pool.total(job, None)} free"
