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
Nodes are kept in buckets by free-GPU count, so each choice costs O(GPUs per node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .types import ClusterSnapshot, JobInfo


@dataclass(frozen=True)
class PlacementResult:
    placements: Mapping[str, tuple[str, ...]]  # job id → GPU ids, for every job given > 0 GPUs
    unplaced: Mapping[str, str]  # job id → why it got no GPUs
    notes: Mapping[str, str]  # job id → why it got fewer GPUs than its target (it kept what it held)


class _FreeGpus:
    """Free GPU ids per node, with nodes bucketed by GPU type and free count.

    Starts from the index's all-free buckets (copied in C) and re-files only the nodes
    where kept GPUs are taken: a round touches few of a large cluster's nodes.
    """

    def __init__(self, snap: ClusterSnapshot, taken: set[str]) -> None:
        index = snap.index
        self.type_of, self._usable = index.node_type, index.usable_by_node
        self.buckets = {t: {size: dict(nodes) for size, nodes in by_size.items()}
                        for t, by_size in index.free_buckets.items()}
        self.totals = dict(index.usable_by_type)
        self._free: dict[str, list[str]] = {}  # nodes whose free GPUs differ from all their usable ones
        for node in {index.node_of[gpu] for gpu in taken}:
            self._unfile(node)
            self._free[node] = [gpu for gpu in self._usable[node] if gpu not in taken]
            self._file(node, len(self._free[node]))

    def free(self, node: str) -> list[str]:
        if node not in self._free:
            self._free[node] = list(self._usable[node])
        return self._free[node]

    def _file(self, node: str, count: int) -> None:
        gpu_type = self.type_of[node]
        self.buckets.setdefault(gpu_type, {}).setdefault(count, {})[node] = None
        self.totals[gpu_type] = self.totals.get(gpu_type, 0) + count

    def _unfile(self, node: str) -> None:
        gpu_type, count = self.type_of[node], len(self.free(node))
        del self.buckets[gpu_type][count][node]
        self.totals[gpu_type] -= count

    def take(self, node: str, count: int) -> list[str]:
        self._unfile(node)
        free = self.free(node)
        taken, self._free[node] = free[:count], free[count:]
        self._file(node, len(self._free[node]))
        return taken

    def put_back(self, node: str, gpus: Iterable[str]) -> None:
        self._unfile(node)
        self._free[node] = self.free(node) + list(gpus)
        self._file(node, len(self._free[node]))

    def total(self, types: Iterable[str]) -> int:
        return sum(self.totals.get(t, 0) for t in types)

    def best_fit(self, types: list[str], need: int) -> str | None:
        """The node with the fewest free GPUs that still holds ``need`` (None if none does)."""
        sizes = sorted({size for t in types for size, nodes in self.buckets.get(t, {}).items() if nodes})
        for size in (s for s in sizes if s >= need):
            for t in types:
                nodes = self.buckets.get(t, {}).get(size)
                if nodes:
                    return next(iter(nodes))
        return None

    def largest(self, types: list[str]) -> str:
        sizes = [(size, t) for t in types for size, nodes in self.buckets.get(t, {}).items() if nodes and size]
        size, gpu_type = max(sizes, key=lambda st: (st[0], -types.index(st[1])))
        return next(iter(self.buckets[gpu_type][size]))


def place(snap: ClusterSnapshot, targets: Mapping[str, int]) -> PlacementResult:
    """Concrete GPUs for every job with a positive target count."""
    jobs = {job.id: job for job in snap.jobs}
    node_of, usable, type_of = snap.index.node_of, snap.index.usable, snap.index.type_of
    kept = {jid: _kept_gpus(jobs[jid], count, usable, node_of, type_of) for jid, count in targets.items() if count}
    if all(len(kept[jid]) == targets[jid] for jid in kept):  # nobody needs new GPUs: no pool to build
        return PlacementResult({jid: tuple(gpus) for jid, gpus in kept.items()}, {}, {})
    pool = _FreeGpus(snap, {gpu for ids in kept.values() for gpu in ids})
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
            _put_back(pool, kept[jid], node_of)
    return PlacementResult(placements, unplaced, notes)


def _kept_gpus(
    job: JobInfo, count: int, usable: frozenset[str], node_of: Mapping[str, str], type_of: Mapping[str, str]
) -> list[str]:
    """The GPUs ``job`` keeps: its usable ones (of its type), fullest nodes first, at most ``count``."""
    if count >= len(job.placement) and usable.issuperset(job.placement) and (
        job.gpu_type is None or all(type_of[gpu] == job.gpu_type for gpu in job.placement)
    ):
        return list(job.placement)  # the common case: it keeps everything it holds
    per_node: dict[str, list[str]] = {}
    for gpu in job.placement:
        if gpu in usable and (job.gpu_type is None or type_of[gpu] == job.gpu_type):
            per_node.setdefault(node_of[gpu], []).append(gpu)
    ordered = sorted(per_node.values(), key=lambda ids: (-len(ids), ids[0]))
    return [gpu for ids in ordered for gpu in ids][:count]


def _grow(
    pool: _FreeGpus, job: JobInfo, kept: list[str], need: int, node_of: Mapping[str, str]
) -> list[str] | None:
    """``need`` more GPUs for ``job``: on its own nodes first, then packed; None if impossible."""
    own_nodes = sorted({node_of[gpu] for gpu in kept})
    extra: list[str] = []
    for node in own_nodes:
        extra += pool.take(node, need - len(extra))
    if len(extra) == need:
        return extra
    types = [pool.type_of[own_nodes[0]]] if own_nodes else _types_for(pool, job, need - len(extra))
    rest = _pack(pool, types, need - len(extra))
    if rest is None:
        _put_back(pool, extra, node_of)
        return None
    return extra + rest


def _types_for(pool: _FreeGpus, job: JobInfo, need: int) -> list[str]:
    """GPU types to draw from: the job's own; else the single type that fits tightest; else all."""
    if job.gpu_type:
        return [job.gpu_type]
    fitting = sorted((total, t) for t, total in pool.totals.items() if total >= need)
    return [fitting[0][1]] if fitting else sorted(pool.totals, key=lambda t: (-pool.totals[t], t))


def _pack(pool: _FreeGpus, types: list[str], need: int) -> list[str] | None:
    """Whole free nodes, largest first, until the remainder fits one node, chosen by best fit."""
    if pool.total(types) < need:
        return None
    taken: list[str] = []
    while need > 0:
        node = pool.best_fit(types, need) or pool.largest(types)
        got = pool.take(node, need)
        taken += got
        need -= len(got)
    return taken


def _put_back(pool: _FreeGpus, gpus: list[str], node_of: Mapping[str, str]) -> None:
    per_node: dict[str, list[str]] = {}
    for gpu in gpus:
        per_node.setdefault(node_of[gpu], []).append(gpu)
    for node, ids in per_node.items():
        pool.put_back(node, ids)


def _why_unplaced(pool: _FreeGpus, job: JobInfo, need: int) -> str:
    kind = f"{job.gpu_type} " if job.gpu_type else ""
    free = pool.total([job.gpu_type] if job.gpu_type else list(pool.totals))
    return f"cannot place: {need} more {kind}GPUs needed, {free} free"
