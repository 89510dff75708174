"""Placement: GPU counts → concrete GPUs.

Rules, in order of importance:
1. only healthy GPUs on schedulable nodes, of the job's GPU type when it names one;
2. fewest moves: a job keeps the GPUs it holds (a shrinking job gives up GPUs on the
   nodes where it has the fewest, a growing job grows on its own nodes first);
3. fewest nodes per job, without stranding GPUs: a job that fits on one node goes to the
   node with the least room that still fits it (best fit); a larger job takes whole free
   nodes and best-fits its remainder;
4. on a back-end that runs one GPU count per node (``even_spread``: Slurm asks for GPUs per node), a job
   spanning nodes holds the same count on each: of the GPUs it would get, the most that make such a shape
   (3 + 1 becomes 2 + 2 if another node has room, else 3 on one; the rest go back), said in ``notes``;
5. a job never spans GPU types (as in Sia): it goes on the type a policy chose for it
   (``PolicyResult.gpu_types``), else the type it requires, else the type it holds, else, among the types
   with room for it, the one where it goes fastest (``speed.type_speeds``), and says so in
   ``type_notes`` ("on a100: 2.7× its v100 speed"); ties go to the type it fits tightest. An elastic job
   that no one type has room for gets as many GPUs of one type as there are, if that is ≥ its minimum.
Large jobs are placed first. A job that cannot be placed gets no GPUs and a reason.
Nodes are kept in buckets by free-GPU count, so each choice costs O(GPUs per node).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

from .speed import held_type, type_speeds
from .types import ClusterSnapshot, JobInfo


@dataclass(frozen=True)
class PlacementResult:
    placements: Mapping[str, tuple[str, ...]]  # job id → GPU ids, for every job given > 0 GPUs
    unplaced: Mapping[str, str]  # job id → why it got no GPUs
    notes: Mapping[str, str]  # job id → why it got fewer GPUs than its target (it kept what it held)
    type_notes: Mapping[str, str] = field(default_factory=dict)  # job id → why it went on the type it went on


class _FreeGpus:
    """Free GPU ids per node, with nodes bucketed by GPU type and free count.

    Starts from the index's all-free buckets (copied in C) and re-files only the nodes
    where kept GPUs are taken, by count: a node's list of free GPUs is made the first time
    a job draws from it, which few of a large cluster's nodes are in a round. Nodes are
    re-filed in the order of the kept GPUs, so equal choices do not depend on hashing.
    """

    def __init__(self, snap: ClusterSnapshot, kept: Iterable[Sequence[str]]) -> None:
        index = snap.index
        self.type_of, self._usable = index.node_type, index.usable_by_node
        self.buckets = {t: {size: dict(nodes) for size, nodes in by_size.items()}
                        for t, by_size in index.free_buckets.items()}
        self.totals = dict(index.usable_by_type)
        held = list(chain.from_iterable(kept))
        self._taken = set(held)
        self._count: dict[str, int] = {}  # free GPUs of the nodes where that differs from their usable ones
        self._free: dict[str, list[str]] = {}  # the free GPU ids of the nodes drawn from so far
        for node, taken in Counter(map(index.node_of.__getitem__, held)).items():
            self._refile(node, len(self._usable[node]) - taken)

    def free(self, node: str) -> list[str]:
        if node not in self._free:
            self._free[node] = [gpu for gpu in self._usable[node] if gpu not in self._taken]
        return self._free[node]

    def _refile(self, node: str, count: int) -> None:
        """Move the node to the bucket of ``count`` free GPUs."""
        gpu_type, before = self.type_of[node], self._count.get(node, len(self._usable[node]))
        del self.buckets[gpu_type][before][node]
        self.buckets[gpu_type].setdefault(count, {})[node] = None
        self.totals[gpu_type] += count - before
        self._count[node] = count

    def take(self, node: str, count: int) -> list[str]:
        free = self.free(node)
        self._free[node] = free[count:]
        self._refile(node, len(self._free[node]))
        return free[:count]

    def put_back(self, node: str, gpus: Iterable[str]) -> None:
        self._free[node] = self.free(node) + list(gpus)
        self._refile(node, len(self._free[node]))

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


def place(
    snap: ClusterSnapshot, targets: Mapping[str, int], consolidate: bool = False,
    gpu_types: Mapping[str, str] | None = None, even_spread: bool = False,
) -> PlacementResult:
    """Concrete GPUs for every job with a positive target count.

    ``consolidate``: a growing job that does not fit on its own node but fits whole on another
    moves there instead of spanning nodes (``_grow``), for policies that place node by node.
    ``gpu_types``: the GPU type a policy chose for a job (it moves there if it holds another).
    ``even_spread``: every job spanning nodes gets one GPU count per node (rule 4).
    """
    if even_spread:
        return _evenly(snap, place(snap, targets, consolidate, gpu_types), targets)
    index, chosen = snap.index, gpu_types or {}
    kept: dict[str, tuple[str, ...]] = {}  # job id → GPUs it keeps, for every job with a target
    growing: list[JobInfo] = []  # jobs that need GPUs beyond those they keep
    for job in snap.jobs:
        count = targets.get(job.id, 0)
        if not count:
            continue
        wanted = chosen.get(job.id) or job.gpu_type
        if count == len(job.placement) and wanted is None and index.usable.issuperset(job.placement):
            kept[job.id] = job.placement  # the common case, inline: it keeps what it holds and needs no more
            continue
        kept[job.id] = _kept_gpus(job, count, index.usable, index.node_of, index.type_of, wanted)
        if len(kept[job.id]) < count:
            growing.append(job)
    if not growing:  # nobody needs new GPUs: no pool to build
        return PlacementResult(kept, {}, {})
    # Only growing jobs draw from the pool, so only they need placing in order; the others keep theirs.
    pool = _FreeGpus(snap, kept.values())
    placements, unplaced = dict(kept), {}
    notes: dict[str, str] = {}
    type_notes: dict[str, str] = {}
    for job in sorted(growing, key=lambda j: (-targets[j.id], j.submit_time, j.id)):
        have, need = kept[job.id], targets[job.id] - len(kept[job.id])
        wanted = chosen.get(job.id) or job.gpu_type or (held_type(job, snap) if have else None)
        types = [wanted] if wanted else _fastest_with_room(snap, pool, job, targets[job.id], type_notes)
        grown = _grow(pool, job, have, need, index.node_of, types, consolidate)
        if grown is None and not have and not wanted and job.elastic:
            grown = _largest_on_one_type(pool, job, notes)
        if grown is not None:
            placements[job.id] = grown
        elif len(have) >= job.min_gpus:  # could not grow: keep running as it is
            notes[job.id] = f"kept {len(have)} GPUs: {_why_unplaced(pool, job, need, types)}"
        else:
            unplaced[job.id] = _why_unplaced(pool, job, need, types)
            del placements[job.id]
            _put_back(pool, have, index.node_of)
    for job_id in type_notes.keys() - placements.keys():
        del type_notes[job_id]
    return PlacementResult(placements, unplaced, notes, type_notes)


def _evenly(snap: ClusterSnapshot, placed: PlacementResult, targets: Mapping[str, int]) -> PlacementResult:
    """``placed`` with every uneven spread over nodes made even: first from GPUs it leaves free (the largest
    even shape of the job's count on the nodes with room, fewest nodes first), else the largest even part of what
    it got. Jobs are taken largest first; a job left below its minimum is unplaced (or keeps what it holds)."""
    index, jobs = snap.index, {job.id: job for job in snap.jobs}
    per_node = {job_id: _by_node(gpus, index.node_of) for job_id, gpus in placed.placements.items()}
    uneven = [job_id for job_id, nodes in per_node.items() if len({len(ids) for ids in nodes.values()}) > 1]
    if not uneven:
        return placed
    placements, unplaced = dict(placed.placements), dict(placed.unplaced)
    notes, type_notes = dict(placed.notes), dict(placed.type_notes)
    taken = {gpu for gpus in placements.values() for gpu in gpus}
    for job_id in sorted(uneven, key=lambda j: (-len(placements[j]), j)):
        job, decided = jobs[job_id], per_node[job_id]
        taken -= set(placements[job_id])
        # What no other job has now: a GPU this job held but was given to another stays that job's.
        nodes = {node: [gpu for gpu in index.usable_by_node[node] if gpu not in taken]
                 for node in index.usable_by_node if index.node_type[node] == index.node_type[next(iter(decided))]}
        shape = _even_shape(decided, nodes, len(placements[job_id]), set(job.placement))
        shape_text = " + ".join(str(len(ids)) for ids in decided.values())
        if shape is None or len(shape) < job.min_gpus:
            del placements[job_id]
            unplaced[job_id] = f"cannot place: no even spread of ≥ {job.min_gpus} GPUs over nodes ({shape_text} free)"
            continue
        placements[job_id] = shape
        taken |= set(shape)
        if len(shape) < targets.get(job_id, len(shape)):
            count = len(_by_node(shape, index.node_of))
            notes[job_id] = (f"{len(shape)} GPUs as {count} × {len(shape) // count}: the cluster runs one GPU count "
                             f"per node ({shape_text} was free)")
    for job_id in type_notes.keys() - placements.keys():
        del type_notes[job_id]
    return PlacementResult(placements, unplaced, notes, type_notes)


def _by_node(gpus: Iterable[str], node_of: Mapping[str, str]) -> dict[str, list[str]]:
    """GPU ids grouped by their node, in the order given."""
    nodes: dict[str, list[str]] = {}
    for gpu in gpus:
        nodes.setdefault(node_of[gpu], []).append(gpu)
    return nodes


def _even_shape(decided: Mapping[str, list[str]], free: Mapping[str, list[str]], count: int,
                held: set[str]) -> tuple[str, ...] | None:
    """The most GPUs, at most ``count``, as k nodes × c GPUs (fewest nodes among the largest), from the nodes'
    ``free`` GPUs; nodes the job holds or was given first, and on them the GPUs it holds first."""
    preferred = sorted(free, key=lambda node: (node not in decided, -len(free[node]), node))
    best: tuple[int, int] = (0, 0)  # (GPUs, −nodes)
    for per_node in range(1, count + 1):
        fitting = [node for node in preferred if len(free[node]) >= per_node]
        nodes = min(len(fitting), count // per_node)
        if nodes and (per_node * nodes, -nodes) > best:
            best, chosen = (per_node * nodes, -nodes), (fitting[:nodes], per_node)
    if not best[0]:
        return None
    names, per_node = chosen
    return tuple(gpu for node in names
                 for gpu in sorted(free[node], key=lambda gpu: (gpu not in held, gpu))[:per_node])


def _fastest_with_room(snap: ClusterSnapshot, pool: _FreeGpus, job: JobInfo, count: int,
                       type_notes: dict[str, str]) -> list[str]:
    """The one type to place a new untyped job on: among those with ``count`` free GPUs, the one where it goes
    fastest (at its ``min_gpus``, ``speed.type_speeds``), ties to the tightest fit (a job without a profile is
    as fast everywhere); noted when it matters."""
    fitting = [t for t, total in pool.totals.items() if total >= count]
    if len(fitting) == 0 or len(snap.gpus_by_type) == 1:
        return fitting
    speeds = type_speeds(job, snap)
    best = min(fitting, key=lambda t: (-speeds[t], pool.totals[t], t))
    others = sorted((speed, t) for t, speed in speeds.items() if t != best)
    if others and speeds[best] > 0 and others[-1][0] > 0 and speeds[best] != others[-1][0]:
        speed, other = others[-1]
        type_notes[job.id] = f"on {best}: {speeds[best] / speed:.1f}× its {other} speed"
    return [best]


def _largest_on_one_type(pool: _FreeGpus, job: JobInfo, notes: dict[str, str]) -> tuple[str, ...] | None:
    """As many GPUs of one type as are free (the type with most), if that is at least ``job.min_gpus``."""
    if not pool.totals:
        return None
    most, gpu_type = max((total, t) for t, total in pool.totals.items())
    if most < job.min_gpus:
        return None
    got = _pack(pool, [gpu_type], min(most, job.max_gpus))
    if got is not None:
        notes[job.id] = f"placed on {len(got)} {gpu_type} GPUs: a job stays on one GPU type"
    return tuple(got) if got is not None else None


def _kept_gpus(
    job: JobInfo, count: int, usable: frozenset[str], node_of: Mapping[str, str], type_of: Mapping[str, str],
    wanted: str | None,
) -> tuple[str, ...]:
    """The GPUs ``job`` keeps: its usable ones (of the ``wanted`` type), fullest nodes first, at most ``count``."""
    if count >= len(job.placement) and usable.issuperset(job.placement) and (
        wanted is None or all(type_of[gpu] == wanted for gpu in job.placement)
    ):
        return job.placement  # the common case: it keeps everything it holds (the round sees it unchanged)
    per_node: dict[str, list[str]] = {}
    for gpu in job.placement:
        if gpu in usable and (wanted is None or type_of[gpu] == wanted):
            per_node.setdefault(node_of[gpu], []).append(gpu)
    ordered = sorted(per_node.values(), key=lambda ids: (-len(ids), ids[0]))
    return tuple(gpu for ids in ordered for gpu in ids)[:count]


def _grow(
    pool: _FreeGpus, job: JobInfo, kept: Sequence[str], need: int, node_of: Mapping[str, str], types: list[str],
    consolidate: bool = False,
) -> tuple[str, ...] | None:
    """``job``'s GPUs grown by ``need``: on its own nodes first, then packed on ``types``; None if impossible.

    ``consolidate``: unless it fits on its own (one) node, a job that fits whole on one node
    moves there (best fit), leaving the GPUs it held. A job that grows restarts anyway
    (Pollux's ``Problem._evaluate`` in the artifact's ``simulator/pollux.py`` counts any change
    of a job's GPUs as a restart), so moving costs nothing more, while spanning nodes slows it
    (Pollux searches node by node and prices an allocation on the nodes it spans,
    ``Problem._get_job_speedups``).
    """
    own_nodes = sorted({node_of[gpu] for gpu in kept})
    if consolidate and (len(own_nodes) != 1 or len(pool.free(own_nodes[0])) < need):
        node = pool.best_fit(types, len(kept) + need) if own_nodes else None
        if node is not None:
            moved = pool.take(node, len(kept) + need)
            _put_back(pool, kept, node_of)
            return tuple(moved)
    extra: list[str] = []
    for node in own_nodes:
        extra += pool.take(node, need - len(extra))
    if len(extra) == need:
        return (*kept, *extra)
    rest = _pack(pool, types, need - len(extra))
    if rest is None:
        _put_back(pool, extra, node_of)
        return None
    return (*kept, *extra, *rest)


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


def _put_back(pool: _FreeGpus, gpus: Iterable[str], node_of: Mapping[str, str]) -> None:
    for node, ids in _by_node(gpus, node_of).items():
        pool.put_back(node, ids)


def _why_unplaced(pool: _FreeGpus, job: JobInfo, need: int, types: list[str]) -> str:
    kinds = types or ([job.gpu_type] if job.gpu_type else [])
    kind = f"{kinds[0]} " if len(kinds) == 1 else ""
    free = max((pool.total([t]) for t in (kinds or pool.totals)), default=0)
    where = "" if kinds else " on any one type"
    return f"cannot place: {need} more {kind}GPUs needed, {free} free{where}"
