"""Pollux: goodput-optimised allocation, fair by the power mean of speedups.

Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI'21: §3 the goodput model (goodput.py), §4.2 the cluster-wide objective
and the re-allocation penalty.

Inputs: each job's goodput model (its profile on its GPU type, speed.py; jobs without a
profile speed up linearly from ``min_gpus``), gradient noise scale φ, ``min_gpus``..
``max_gpus``, ``gpu_type``, the GPUs it holds, its age (``now − submit_time``) and
``restarts``; the usable GPUs by type. Pollux does not know job lengths.
Outputs: a GPU count per job (0 or within its bounds), the global batch size each job with
a profile should train at (``batch_sizes``), a reason for each job waiting or resized.

Objective. SPEEDUP_j(a) = goodput_j(a) / goodput_j(fair share), each at its best batch
size (with gradient accumulation, goodput.py); a on fewest nodes, the fair share ceil(U_j / J)
GPUs on one node as Pollux's simulator prices it (``speedups``), U_j the usable GPUs of the
job's type and J the number of jobs. Pollux maximises
FITNESS_p = (mean_j SPEEDUP_j^p)^(1/p) with p = −1 (a harmonic mean: a GPU goes where it
lifts a slow job most). A running job whose count would change has its speedup multiplied
by Pollux's REALLOC_FACTOR = max(T_j − R_j·δ, 0) / (T_j + δ) — T_j its age, R_j its
restarts so far, δ = ``restart_seconds`` — the share of its life it would spend training,
not restarting, after one more restart. A job moves only for a gain that outweighs that
(about 5 % at 10 minutes of age, less as it ages; more after many restarts). A waiting job
that starts pays nothing: it holds nothing to lose.

At most one distributed job per node (Pollux's ``Problem._repair``): a job on more than one
node holds its nodes' distributed slot, so the nodes spanned by multi-node jobs (fewest-node
packing) sum to at most the cluster's nodes (``Search.slots``). With many large jobs this
makes some of them wait on one node while others run wide, as in Pollux, instead of all
sharing equally and finishing together.

Jobs at 0 GPUs. Their speedup is 0, and one zero makes every p < 0 mean 0. Pollux's
simulator adds 1e-3 to every speedup, which makes an unallocated job cost more than any
allocation can win back: it maximises first the number of running jobs, then the mean.
Here that order is explicit and fair: jobs are admitted at ``min_gpus`` in arrival order
``(submit_time, id)`` while they fit (later, smaller jobs backfill), and FITNESS is the
mean over the admitted jobs, each kept ≥ its ``min_gpus``.

Search. Pollux runs a genetic algorithm; this solves the same problem faster. FITNESS
with p < 0 is maximised by minimising Σ_j c_j(a_j), c_j = SPEEDUP_j^p (−SPEEDUP_j^p for
p > 0), tabulated for every count at once (numpy). (1) Greedy: the next GPUs go to the job with the largest fall of c
per GPU, looking at every larger count it could still get (goodput dips when a job spills
onto another node, so one-GPU steps would stop too early). (2) Local search: move 1, 2, 4 …
one node of GPUs from one job (or the free pool) to another while that lowers Σ c. Both run
from the minimum allocation and from the current one (Pollux seeds its GA with it too);
the better result wins (ties to the current one). Both keep to the node slots. GPU types: typed jobs draw only on their
type, untyped ones on any GPU (all typed demand of a type ≤ its usable GPUs, all demand ≤
all usable GPUs). Deterministic: ties go to the earlier arrival. No state.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from ..capacity import Capacity
from ..policy import Capabilities, register
from ..restarts import PricesRestarts
from ..speed import fewest_nodes, gpus_per_node, model_for
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import SpeedMemo, arrival_key, grant_in_order, resize_note

# Floor under a speedup: a job that cannot progress at some count costs 1/ε, not ∞.
EPSILON = 1e-6
# A move: (fall of Σ c, taking job, giving job, GPUs moved); −1 stands for the free pool.
Move = tuple[float, int, int, int]
# A guard: local search stops after this many moves (it converges in far fewer).
MAX_MOVES = 20_000


@register
@dataclass(frozen=True)
class PolluxPolicy(PricesRestarts):
    name: ClassVar[str] = "pollux"
    summary: ClassVar[str] = (
        "Pollux: GPUs and batch size for the most goodput, fair by "
        "the power mean of speed-ups; elastic"
    )
    event_driven: ClassVar[bool] = False
    # REALLOC_FACTOR prices restarts (no extra hysteresis in the round); the search is node by node, pricing the
    # nodes a job spans (placement.place, ``consolidate``).
    capabilities: ClassVar[Capabilities] = Capabilities(prices_restarts=True, consolidates_on_growth=True)
    p: float = -1.0  # power-mean exponent; more negative is fairer

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.p == 0 or not math.isfinite(self.p):
            raise ValueError("pollux needs a finite p ≠ 0")

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        order = sorted(snap.jobs, key=arrival_key)
        admitted, waiting = grant_in_order(snap, order, Capacity(snap), backfill=True, ahead="earlier")
        search = Search(snap, [job for job in order if admitted[job.id]], self)
        counts = search.solve()
        allocations = {job.id: 0 for job in order} | dict(zip(search.ids, map(int, counts), strict=True))
        reasons = {job_id: why for job_id, why in waiting.items() if allocations[job_id] == 0}
        reasons |= search.resize_reasons(counts)
        return PolicyResult(allocations=allocations, reasons=reasons, batch_sizes=batch_sizes(snap, allocations))

    def fitness(self, snap: ClusterSnapshot, allocations: Mapping[str, int]) -> float:
        """FITNESS_p of ``allocations`` (restart factors included) over the jobs given GPUs."""
        jobs = [job for job in sorted(snap.jobs, key=arrival_key) if allocations.get(job.id, 0) > 0]
        search = Search(snap, jobs, self)
        counts = np.array([allocations[job.id] for job in jobs], dtype=int)
        if np.any(counts < search.lo) or np.any(counts > search.hi):
            raise ValueError("an allocation is outside its job's bounds or usable GPUs")
        return search.mean(search.cost(counts))


def batch_sizes(snap: ClusterSnapshot, allocations: Mapping[str, int],
                gpu_types: Mapping[str, str] | None = None) -> dict[str, int]:
    """The goodput-optimal global batch of every job with a profile and GPUs (goodput.best_batch), on the type
    ``gpu_types`` names for it, else the type it is priced on."""
    sizes = {}
    known: dict[tuple[int, int, int, float | None], int] = {}  # jobs of one profile and φ share answers
    for job in snap.jobs:
        gpus = allocations.get(job.id, 0)
        kind = (gpu_types or {}).get(job.id)
        model = model_for(job, snap, kind) if gpus else None
        if model is None:
            continue
        nodes = fewest_nodes(gpus, gpus_per_node(snap, kind or job.gpu_type))
        key = (id(model), nodes, gpus, job.grad_noise_scale)
        if key not in known:
            known[key] = model.best_global_batch(nodes, gpus, job.grad_noise_scale)
        sizes[job.id] = known[key]
    return sizes


def speedups(
    speeds: NDArray, job: JobInfo, snap: ClusterSnapshot, usable: int, n_jobs: int,
    bases: dict[tuple[int, int, float | None], float] | None = None,
) -> NDArray:
    """SPEEDUP at 0..max_gpus: speed ÷ speed at the fair share (speeds are goodput ÷ M0).

    The fair share is ceil(U / J) GPUs on one node, priced at the best batch, as Pollux's
    simulator prices it (``pollux.py``, ``Problem.__init__``: fair_replicas = ceil(1 / share / J),
    fair_nodes = ceil(nodes × share) = 1 for one GPU per replica). A job without a profile
    uses its own table at that count, within its bounds.
    """
    fair = max(1, math.ceil(usable / max(n_jobs, 1)))
    model = model_for(job, snap)
    if model is not None:
        bases = {} if bases is None else bases  # jobs of one profile and φ share the base: pass one dict to all
        key = (id(model), fair, job.grad_noise_scale)
        if key not in bases:
            bases[key] = float(model.speed(1, fair, job.grad_noise_scale)[0])
        base = bases[key]
    else:
        count = min(job.max_gpus, max(job.min_gpus, fair))
        base = float(speeds[count]) if count < len(speeds) else 0.0
    if base <= 0:
        base = speeds[1:].max(initial=0.0) or 1.0
    return speeds / base


def realloc_factor(job: JobInfo, now: float, delay: float) -> float:
    """Pollux's REALLOC_FACTOR: the share of the job's life left for training after one more restart."""
    if delay == 0:
        return 1.0
    age = max(now - job.submit_time, 0.0)
    return max(age - job.restarts * delay, 0.0) / (age + delay)


class Search:
    """The allocation problem over the admitted jobs, as flat cost tables and a GPU-type ledger.

    Job j may hold ``lo[j]``..``hi[j]`` GPUs; its cost at k GPUs is ``flat[off[j] + k]``.
    """

    def __init__(self, snap: ClusterSnapshot, jobs: Sequence[JobInfo], policy: PolluxPolicy) -> None:
        self.jobs, self.ids, self.policy = list(jobs), [job.id for job in jobs], policy
        empty = Capacity(snap)
        self.usable = empty.total_free
        pools = {job.gpu_type: empty.free_for(job) for job in jobs if job.gpu_type}
        types = sorted(pools)
        self.pool = np.array([pools[t] for t in types], dtype=int)
        self.code = np.array([types.index(job.gpu_type) if job.gpu_type else -1 for job in jobs], dtype=int)
        self.lo = np.array([job.min_gpus for job in jobs], dtype=int)
        self.hi = np.array([min(job.max_gpus, empty.free_for(job), empty.one_type_most) for job in jobs], dtype=int)
        self.held = np.array([job.gpus for job in jobs], dtype=int)
        self.units = sorted({1 << i for i in range(16) if 1 << i <= gpus_per_node(snap)} | {gpus_per_node(snap)})
        # At most one distributed job per node: jobs spanning nodes hold whole nodes' worth of node slots.
        self.node_size = gpus_per_node(snap)
        nodes = sum(1 for gpus in snap.index.usable_by_node.values() if gpus)
        self.node_slots = max(nodes, int(self.slots(self.lo).sum()))
        memo = SpeedMemo(snap, adaptive_batch=True)
        bases: dict[tuple[int, int, float | None], float] = {}
        self.speedups = [speedups(memo.table(job), job, snap, empty.free_for(job), len(snap.jobs), bases)[: top + 1]
                         for job, top in zip(jobs, self.hi, strict=True)]
        self.flat, self.off = self._costs(snap)

    # --- the objective -------------------------------------------------------------------
    def _costs(self, snap: ClusterSnapshot) -> tuple[NDArray, NDArray]:
        sign = 1.0 if self.policy.p < 0 else -1.0
        tables = []
        for job, speedup in zip(self.jobs, self.speedups, strict=True):
            factor = np.ones(len(speedup))
            if job.running:  # every count but the one it holds means a restart
                factor[:] = realloc_factor(job, snap.now, self.policy.restart_delay(job))
                factor[job.gpus : job.gpus + 1] = 1.0
            tables.append(sign * np.maximum(speedup * factor, EPSILON) ** self.policy.p)
        sizes = np.array([len(t) for t in tables], dtype=int)
        off = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(int)
        return (np.concatenate(tables) if tables else np.zeros(0)), off

    def cost(self, counts: NDArray) -> float:
        """Σ c_j: lower is better."""
        return float(self.flat[self.off + counts].sum())

    def mean(self, total: float) -> float:
        """FITNESS_p from Σ c_j."""
        n = len(self.jobs)
        if n == 0:
            return 0.0
        p = self.policy.p
        return float((abs(total) / n) ** (1.0 / p))

    # --- the ledger ------------------------------------------------------------------------
    def usage(self, counts: NDArray) -> tuple[int, NDArray]:
        typed = self.code >= 0
        per_type = np.bincount(self.code[typed], weights=counts[typed], minlength=len(self.pool)).astype(int)
        return int(counts.sum()), per_type

    def slots(self, counts: NDArray | int) -> NDArray:
        """Nodes a job of ``counts`` GPUs spans when it spans more than one (fewest nodes), else 0.

        Pollux's simulator allows at most one distributed job per node (``pollux.py``,
        ``Problem._repair``), so these nodes are the distributed jobs' own: their sum is at most
        the cluster's nodes. Jobs on one node share nodes freely.
        """
        counts = np.asarray(counts)
        return np.where(counts > self.node_size, -(-counts // self.node_size), 0)

    def room(self, j: int, used: int, per_type: NDArray) -> int:
        """GPUs job ``j`` could still get."""
        free = self.usable - used
        return free if self.code[j] < 0 else min(free, int(self.pool[self.code[j]] - per_type[self.code[j]]))

    # --- the search ------------------------------------------------------------------------
    def solve(self) -> NDArray:
        best = self.improve(self.greedy(self.lo.copy()))
        warm = self.improve(self.greedy(self.warm_start()))
        return warm if self.cost(warm) <= self.cost(best) else best

    def warm_start(self) -> NDArray:
        """Admitted jobs at ``min_gpus``, then running ones back towards what they hold, in arrival order."""
        counts = self.lo.copy()
        used, per_type = self.usage(counts)
        for j in range(len(self.jobs)):
            add = max(min(int(self.held[j]), int(self.hi[j])) - int(counts[j]), 0)
            add = min(add, self.room(j, used, per_type))
            if self.slots(counts + add * (np.arange(len(counts)) == j)).sum() > self.node_slots:
                add = 0
            counts[j] += add
            used += add
            if self.code[j] >= 0:
                per_type[self.code[j]] += add
        return counts

    def best_jump(self, j: int, count: int, room: int, free_slots: int) -> tuple[float, int]:
        """(fall of cost per GPU, GPUs to add) of the best growth of job ``j`` from ``count``."""
        top = min(int(self.hi[j]), count + room)
        if top <= count:
            return 0.0, 0
        costs = self.flat[self.off[j] + count : self.off[j] + top + 1]
        per_gpu = (costs[0] - costs[1:]) / np.arange(1, top - count + 1)
        fits = self.slots(np.arange(count + 1, top + 1)) - self.slots(count) <= free_slots
        per_gpu = np.where(fits, per_gpu, -np.inf)
        best = int(np.argmax(per_gpu))
        return (float(per_gpu[best]), best + 1) if fits[best] else (0.0, 0)

    def greedy(self, counts: NDArray) -> NDArray:
        """Grow jobs by their best jump, largest fall of cost per GPU first (lazy max-heap)."""
        used, per_type = self.usage(counts)

        def jump(j: int) -> tuple[float, int]:
            free_slots = self.node_slots - int(self.slots(counts).sum())
            return self.best_jump(j, int(counts[j]), self.room(j, used, per_type), free_slots)

        heap = [(-gain, j, add) for j, (gain, add) in enumerate(map(jump, range(len(counts)))) if gain > 0]
        heapq.heapify(heap)
        while heap:
            neg_gain, j, add = heapq.heappop(heap)
            gain, now_add = jump(j)
            if (gain, now_add) == (-neg_gain, add):
                counts[j] += add
                used += add
                if self.code[j] >= 0:
                    per_type[self.code[j]] += add
                gain, now_add = jump(j)
            if gain > 0:
                heapq.heappush(heap, (-gain, j, now_add))
        return counts

    def improve(self, counts: NDArray) -> NDArray:
        """Apply the best single move (see ``best_move``) while it lowers Σ c."""
        for _ in range(MAX_MOVES):
            value, taker, giver, unit = self.best_move(counts)
            if value <= 1e-12 * (1.0 + abs(self.cost(counts))):
                break
            if taker >= 0:
                counts[taker] += unit
            if giver >= 0:
                counts[giver] -= unit
        return counts

    def best_move(self, counts: NDArray) -> Move:
        """(fall of Σ c, taker, giver, GPUs) of the best move; −1 stands for the free pool."""
        used, per_type = self.usage(counts)
        free = self.usable - used
        # Room left in each job's type; untyped jobs (code −1) read the last entry: all free GPUs.
        type_room = np.append(self.pool - per_type, free)[self.code]
        here = self.flat[self.off + counts]
        slots_now = self.slots(counts)
        free_slots = self.node_slots - int(slots_now.sum())
        best: Move = (0.0, -1, -1, 0)
        for unit in self.units:
            up = counts + unit <= self.hi
            gain = np.where(up, here - self.flat[self.off + np.minimum(counts + unit, self.hi)], -np.inf)
            down = counts - unit >= self.lo
            loss = np.where(down, self.flat[self.off + np.maximum(counts - unit, self.lo)] - here, np.inf)
            # Node slots each job would take (> 0) or free (< 0) by the move.
            more = self.slots(counts + unit) - slots_now
            fewer = self.slots(np.maximum(counts - unit, 0)) - slots_now
            for move in self._moves(gain, loss, unit, free, type_room, (free_slots, more, fewer)):
                if move[0] > best[0]:
                    best = move
        return best

    def _moves(
        self, gain: NDArray, loss: NDArray, unit: int, free: int, type_room: NDArray,
        slots: tuple[int, NDArray, NDArray],
    ) -> list[Move]:
        """The best move of each kind for one unit size: from the pool, to the pool, job to job.

        ``slots``: (free node slots, slots each job would take growing, slots each would give back shrinking).
        """
        moves: list[Move] = []
        if len(gain) == 0:
            return moves
        free_slots, more, fewer = slots
        if free >= unit:
            fits = (np.minimum(type_room, free) >= unit) & (more <= free_slots)
            taker = int(np.argmax(np.where(fits, gain, -np.inf)))
            moves.append((float(gain[taker]) if fits[taker] else -np.inf, taker, -1, unit))
        giver = int(np.argmin(loss))
        moves.append((-float(loss[giver]), -1, giver, unit))
        # Job to job: the cheapest giver other than the taker; a typed taker whose type is full
        # may only take from a job of its own type (total use is unchanged by a transfer).
        donor_loss, donor = _cheapest_other(loss, np.ones(len(loss), dtype=bool))
        for code in np.unique(self.code[(self.code >= 0) & (type_room < unit)]):
            same = self.code == code
            full = same & (type_room < unit)
            own_loss, own = _cheapest_other(loss, same)
            donor_loss, donor = np.where(full, own_loss, donor_loss), np.where(full, own, donor)
        value = np.where(more <= free_slots - fewer[donor], gain - donor_loss, -np.inf)
        taker = int(np.argmax(value))
        moves.append((float(value[taker]), taker, int(donor[taker]), unit))
        return [move for move in moves if np.isfinite(move[0])]

    # --- reporting -------------------------------------------------------------------------
    def resize_reasons(self, counts: NDArray) -> dict[str, str]:
        reasons = {}
        for j, job in enumerate(self.jobs):
            old, new, speedup = int(self.held[j]), int(counts[j]), self.speedups[j]
            before = f"{speedup[old]:.2f}" if old < len(speedup) else "?"
            why = f"goodput share (speedup over fair share {before}→{speedup[new]:.2f})"
            if note := resize_note(job, new, why):
                reasons[job.id] = note
        return reasons


def _cheapest_other(loss: NDArray, among: NDArray) -> tuple[NDArray, NDArray]:
    """For every job, the smallest ``loss`` over the jobs in ``among`` other than itself, and which job."""
    masked = np.where(among, loss, np.inf)
    first = int(np.argmin(masked))
    rest = masked.copy()
    rest[first] = np.inf
    second = int(np.argmin(rest))
    itself = np.arange(len(loss)) == first
    return np.where(itself, rest[second], masked[first]), np.where(itself, second, first)
