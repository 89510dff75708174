"""Sia: heterogeneity-aware, goodput-optimised allocation solved as a mixed-integer program.

Jayaram Subramanya, Arfeen, Lin, Qiao, Ho, Ganger, Xing, "Sia: Heterogeneity-aware, goodput-optimized
ML-cluster scheduling", SOSP'23 (§3). Constants and rules below are those of the authors' simulator,
github.com/siasosp23/artifacts @ aaf7a0d, ``sia-simulator/`` (file:line in ``TRACES_DIR/sia/
REFERENCE-SETUP.md`` §4); this is our own code, written from that description.

Configurations (§3.2; ``sia.py:13-17, 100-121``): on a type of s-GPU nodes, 1, 2, 4 … GPUs up to s
within one node (powers of two, and s), then s·n GPUs on n whole nodes, n up to the type's nodes. Kept
to the job's ``min_gpus``..``max_gpus``; a job with no configuration in that range (a rigid job of 6 on
4-GPU nodes) gets its ``min_gpus`` as one. A job never spans types; a job that requires a type has that
type's configurations only.

Goodput matrix (§3.1; ``sia.py:673-719``): G[j, c] is job j's speed in configuration c from its goodput
model *on c's type* (speed.py; a type never measured gets an estimate), at its best batch, on fewest
nodes; each row divided by its smallest positive entry, so every job counts alike whatever its scale.
A job may grow at most to twice the most GPUs it has held (``cluster.py:376-379``: "start at 1 GPU, at
most 2× per round"; new jobs start at ``min_gpus``); the most it has held is kept in the policy state.

Restart factor (``sia.py:722-739``): a running job's configurations other than the one it holds are
multiplied by r = max(age − N·S, 0) / (age + S), N its restarts, S its restart cost: the configured delay
of its profile (``SchedulingConfig``, what is charged), or Sia's own table ``RESTART_SECONDS`` (``sia.py:23-35``)
where the authors' simulator is reproduced; r = 1 while age < S. Where jobs are weighted (``sia-hesrpt``), the
weight does not scale this price (``Problem._weighted``).

A job restoring its checkpoint (paying a restart delay, ``JobInfo.restart_until``) keeps its configuration: Sia's
hard constraint on jobs "blocked on checkpoint-restore" (``sia.py:763-785, 1011-1027``, on by default in its
simulator, ``preserve_ckpt_allocs``). It binds jobs whose restart outlasts a round (ImageNet's 250 s). ``sia``
keeps it; ours (``ProfiledSiaPolicy``) price a change instead.

Objective (§3.3; ``sia.py:907-971``): with p = −0.5, A = G^p rounded to 2 decimals and at most 3000;
minimise Σ X·A + λ_n·(jobs left without a configuration), λ_n = 1.1 (> any A of a useful
configuration, so the most jobs run first), X binary, at most one configuration per job, each type's
GPUs at most its usable ones. λ_a, the paper's change penalty λ_a·Σ|X − X_prev| (0.01), is used by the authors'
physical-cluster scheduler (``adaptdl/sched/adaptdl_sched/policy/mip.py``) but not by their simulator: ``sia``
leaves it out (``lambda_a`` 0), ``sia-profiled`` prices it. For a running job it is −λ_a on the configuration it
holds and +λ_a on every other (Σ|X − X_prev| less its constant): a change costs 2·λ_a, a preemption λ_a.
Solved exactly with HiGHS through ``scipy.optimize.milp`` (the authors use CBC through CVXPY, relative gap
1e-4; the paper says GLPK); a job holding GPUs that are all still usable starts the search from its current
configuration only through the restart factor (and, in ``sia-profiled``, λ_a), as in Sia.

Outputs: a GPU count and type per job (``PolicyResult.gpu_types``), the best batch at that
configuration (``batch_sizes``), reasons. Deterministic: a tie between jobs goes to the earlier arrival. Each job's
pairs carry a nudge far below the costs' resolution that grows with the job's place in arrival order
(``TIE_BREAK``), and HiGHS is asked to prove the optimum (``MIP_GAP``), so that order is the one it returns.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array

from ..policy import Capabilities, hold_allocations, register
from ..restarts import PricesRestarts
from ..speed import TypeGrid, adaptive_grid, fewest_nodes, gpus_per_node, held_type, model_for, remaining_seconds
from ..types import ClusterSnapshot, JobInfo, PolicyResult, PolicyState
from ._ordering import arrival_key
from .hesrpt import hesrpt_shares

# Sia's restart costs S by model, seconds (``sia.py:23-35``; 30 s for any other), which its policy prices while its
# simulator charges other delays (profiles.SIA_RESTART_SECONDS). Only the reproduction of that artifact prices
# these (sim/runner.py); elsewhere Sia prices the configured delays, the ones charged.
RESTART_SECONDS: Mapping[str, float] = {
    "deepspeech2": 25.0, "imagenet": 250.0, "cifar10": 30.0, "bert": 120.0, "yolov3": 45.0,
}
RAMPS = ("always", "estimated")
WEIGHTINGS = ("none", "hesrpt")
# heSRPT's speed-up exponent p (s(k) = k^p): its default, as in policies/hesrpt.py. Fitted each round from the
# jobs' speeds over all their configurations (mean slope 0.8–0.9: with its batch scaled, goodput grows nearly
# linearly), it made the weights SRPT-like: worst FTF 4.0 and 4.5 on philly and helios, average JCT no better.
HESRPT_P = 0.5
MAX_COST = 3000.0  # A is clipped here (``sia.py:907-971``)
COST_DIGITS = 2  # A is rounded to this many decimals (``sia.py:907-971``)
# The most a pair's cost is nudged for its place in the arrival order (Problem.costs): far below 10^-COST_DIGITS.
# HiGHS returns any optimum of a tie, and rounded costs tie often: every waiting job's one GPU costs 1.00, as does a
# running one's. Left to the solver, a loaded round swapped equal jobs in and out: on helios-rate-50/workload-1
# `sia` restarted a job 10.4 times (2.20 h average JCT), 3.0 times with this order (1.65 h); Sia's own simulator,
# whose CBC breaks ties its own way, 5.6 (1.96 h). On Sia's default sets it moves `sia` by ≤ 1 % where GPU types
# differ and by +3.7 % on the homogeneous set, where every GPU is alike and ties are commonest.
TIE_BREAK = 1e-3
# HiGHS's relative MIP gap (its default is 1e-4, CBC's in the authors' scripts too): small enough that the solver
# proves the tie-break's order rather than stop at any solution within 10^-4 of the objective, which for a
# 400-job round is more than a job's whole nudge.
MIP_GAP = 1e-9


@dataclass(frozen=True)
class Configuration:
    gpu_type: str
    gpus: int
    nodes: int


def configurations(snap: ClusterSnapshot) -> list[Configuration]:
    """Sia's configuration set of the cluster: per type, powers of two within a node, then whole nodes."""
    configs = []
    for gpu_type in sorted(snap.usable_by_type):
        size = gpus_per_node(snap, gpu_type)
        nodes = sum(1 for name, t in snap.index.node_type.items() if t == gpu_type and snap.index.usable_by_node[name])
        within = sorted({1 << i for i in range(size.bit_length()) if 1 << i <= size} | {size})
        configs += [Configuration(gpu_type, gpus, 1) for gpus in within]
        configs += [Configuration(gpu_type, size * n, n) for n in range(2, nodes + 1)]
    return configs


@register
@dataclass(frozen=True)
class SiaPolicy(PricesRestarts):
    name: ClassVar[str] = "sia"
    summary: ClassVar[str] = (
        "Sia as published: a goodput MIP over GPU types, each job "
        "grown at most 2× a round; elastic"
    )
    event_driven: ClassVar[bool] = False
    # The restart factor prices restarts (no extra hysteresis in the round); configurations within one node stay
    # on one node.
    capabilities: ClassVar[Capabilities] = Capabilities(prices_restarts=True, consolidates_on_growth=True)
    p: float = -0.5  # power of the goodput in the objective (§4.3, the scripts' --policy_p_val)
    lambda_n: float = 1.1  # cost of a job left without a configuration (--mip_lambda_n)
    time_limit_seconds: float = 10.0  # HiGHS stops here with its best solution (a guard; it takes ms)
    lambda_a: float = 0.0  # the change penalty (--mip_lambda_a), priced by Sia's physical scheduler only
    # Where a job grows at most to twice the most GPUs it has held: "always" (Sia), or "estimated" (only on a
    # type where its model is an estimate, ``GoodputModel.estimated_from``; see ProfiledSiaPolicy).
    ramp: str = "always"
    # Each job's term in the objective: alike ("none", Sia), or weighted by its heSRPT share ("hesrpt"; Weights).
    weighting: str = "none"
    # A job restoring its checkpoint keeps its configuration (Sia's hard constraint; Problem._kept).
    keep_restoring: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        # The solver's limit stays within a round's own time limit: a round must finish for the next to run.
        finite = math.isfinite(self.p) and math.isfinite(self.lambda_n)
        if not finite or self.p == 0 or self.lambda_n <= 0 or not 0 < self.time_limit_seconds <= 600 \
                or not 0 <= self.lambda_a < 1:
            raise ValueError("sia needs a finite p ≠ 0, a finite lambda_n > 0, 0 < time_limit_seconds ≤ 600 and "
                             "0 ≤ lambda_a < 1")
        if self.ramp not in RAMPS:
            raise ValueError(f"sia's ramp must be one of {', '.join(RAMPS)}")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"sia's weighting must be one of {', '.join(WEIGHTINGS)}")

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        jobs = sorted(snap.jobs, key=arrival_key)
        largest = _largest_held(jobs, (state or {}).get("largest", {}))
        problem = Problem(snap, jobs, self, largest)
        chosen = problem.solve()
        if chosen is None:  # no answer within the limit: a slow solve must never empty the cluster
            return hold_allocations(snap, state, f"sia: the solver gave no answer within {self.time_limit_seconds:g} s")
        allocations = {job.id: 0 for job in jobs}
        gpu_types, batch_sizes, reasons = {}, {}, {}
        for job in jobs:
            config = chosen.get(job.id)
            if config is None:
                reasons[job.id] = problem.why_waiting(job)
                continue
            allocations[job.id], gpu_types[job.id] = config.gpus, config.gpu_type
            reasons[job.id] = problem.reason(job, config)
            batch = problem.grids[config.gpu_type].batch(job.id, config.gpus)
            if batch is not None:
                batch_sizes[job.id] = batch
        state_out = {"largest": {job_id: count for job_id, count in largest.items() if count}}
        return PolicyResult(allocations=allocations, state=state_out, reasons=reasons, batch_sizes=batch_sizes,
                            gpu_types=gpu_types)


def _largest_held(jobs: Sequence[JobInfo], remembered: Mapping[str, int]) -> dict[str, int]:
    """The most GPUs each present job has held: remembered from earlier rounds, or held now."""
    out = {}
    for job in jobs:
        before = remembered.get(job.id, 0)
        out[job.id] = max(before if isinstance(before, int) else 0, job.gpus)
    return out


def restart_factor(job: JobInfo, now: float, seconds: float) -> float:
    """Sia's r: the share of the job's life left for training after one more restart; 1 while age < S."""
    age = max(now - job.submit_time, 0.0)
    if age < seconds or seconds == 0:
        return 1.0
    return max(age - job.restarts * seconds, 0.0) / (age + seconds)


class Problem:
    """The MIP over (job, configuration) pairs that a job may take."""

    def __init__(self, snap: ClusterSnapshot, jobs: Sequence[JobInfo], policy: SiaPolicy,
                 largest: Mapping[str, int]) -> None:
        self.snap, self.policy = snap, policy
        self.configs = configurations(snap)
        self.configs_of: dict[str, list[Configuration]] = {t: [] for t in snap.usable_by_type}
        for config in self.configs:
            self.configs_of[config.gpu_type].append(config)
        self.usable = dict(snap.usable_by_type)
        self.grids = self._grids(jobs)
        self.pairs: list[tuple[JobInfo, Configuration]] = []
        costs: list[float] = []
        self.goodput: dict[tuple[str, Configuration], float] = {}
        with_options = [(job, self._options(job, largest.get(job.id, 0))) for job in jobs]
        with_options = [(job, options) for job, options in with_options if options]
        self.options_of = {job.id for job, _ in with_options}  # jobs with at least one configuration
        self.weights = Weights.of(with_options, policy)
        self.pinned: dict[str, int] = {}  # job restoring a checkpoint → the column of the configuration it keeps
        for job, options in with_options:
            normalised = _normalised(options)
            current = self._current(job)
            kept = self._kept(job, current, normalised)
            if kept is not None:
                self.pinned[job.id] = len(self.pairs)
                normalised = {kept: normalised[kept]}
            factor = restart_factor(job, snap.now, policy.restart_delay(job)) if job.running else 1.0
            weight = self.weights.of_job.get(job.id, 1.0)
            for config, goodput in normalised.items():
                self.goodput[(job.id, config)] = goodput
                priced = goodput if config == current else goodput * factor
                costs.append(self._weighted(self._cost(priced), self._cost(goodput), self._change_cost(config, current),
                                            weight))
                self.pairs.append((job, config))
        self.costs = np.array(costs, dtype=float) + self._tie_breaks(len(jobs))

    def _kept(self, job: JobInfo, current: Configuration | None,
              options: Mapping[Configuration, float]) -> Configuration | None:
        """The configuration a job restoring its checkpoint must keep, if any (Sia's hard constraint,
        ``sia.py:763-785, 1011-1027``: a job mid checkpoint-restore keeps its allocation; a change now would waste
        the restart it is paying). Only where every GPU it holds is still usable, so the pins always fit."""
        if not self.policy.keep_restoring or current not in options or not job.restoring(self.snap.now):
            return None
        return current if all(gpu in self.snap.index.usable for gpu in job.placement) else None

    def _tie_breaks(self, jobs: int) -> np.ndarray:
        """Each pair's nudge: ``TIE_BREAK`` spread over the jobs in arrival order, the same for a job's pairs (its
        own configurations keep the order of their costs, and the solver's)."""
        rank = {job_id: n for n, job_id in enumerate(dict.fromkeys(job.id for job, _ in self.pairs))}
        return np.array([TIE_BREAK * rank[job.id] / max(jobs, 1) for job, _ in self.pairs])

    def _grids(self, jobs: Sequence[JobInfo]) -> dict[str, TypeGrid]:
        """Every job's speed and best batch on each type, at every count a configuration of that type can have
        (the type's configurations, and the jobs' minimums where none is in their range)."""
        grids = {}
        for gpu_type in sorted(self.usable):
            counts = {c.gpus for c in self.configs_of[gpu_type]}
            counts |= {job.min_gpus for job in jobs if 0 < job.min_gpus <= self.usable[gpu_type]}
            takers = [job for job in jobs if job.gpu_type in (None, gpu_type)]
            grids[gpu_type] = adaptive_grid(takers, self.snap, gpu_type, counts)
        return grids

    def _options(self, job: JobInfo, largest: int) -> dict[Configuration, float]:
        """The job's feasible configurations and its speed in each (0-speed ones dropped)."""
        ramped = max(job.min_gpus, min(job.max_gpus, 2 * largest))
        options: dict[Configuration, float] = {}
        for gpu_type in sorted(self.usable):
            if job.gpu_type not in (None, gpu_type) or self.usable[gpu_type] < job.min_gpus:
                continue
            cap = ramped if self._ramps(job, gpu_type) else job.max_gpus
            own = [c for c in self.configs_of[gpu_type] if job.min_gpus <= c.gpus <= cap]
            if not own and job.min_gpus <= self.usable[gpu_type]:  # no configuration in its range: its minimum
                size = gpus_per_node(self.snap, gpu_type)
                own = [Configuration(gpu_type, job.min_gpus, fewest_nodes(job.min_gpus, size))]
            for config in own:
                if config.gpus > self.usable[gpu_type]:
                    continue
                speed = self.grids[gpu_type].speed(job.id, config.gpus)
                if speed > 0:
                    options[config] = speed
        return options

    def _ramps(self, job: JobInfo, gpu_type: str) -> bool:
        if self.policy.ramp == "always":
            return True
        model = model_for(job, self.snap, gpu_type)
        return model is not None and model.estimated_from is not None

    def _current(self, job: JobInfo) -> Configuration | None:
        if not job.running:
            return None
        gpu_type = held_type(job, self.snap) or ""
        return Configuration(gpu_type, job.gpus, fewest_nodes(job.gpus, gpus_per_node(self.snap, gpu_type)))

    def _change_cost(self, config: Configuration, current: Configuration | None) -> float:
        """λ_a·Σ|X − X_prev| of choosing ``config``, less its constant: −λ_a to keep the configuration held, +λ_a
        for any other (a waiting job holds none: no change cost)."""
        if current is None or self.policy.lambda_a == 0:
            return 0.0
        # The solver minimises for either sign of p (p > 0 as −G^p): a change always costs.
        return -self.policy.lambda_a if config == current else self.policy.lambda_a

    def _cost(self, goodput: float) -> float:
        p = self.policy.p
        if goodput <= 0:
            value = MAX_COST if p < 0 else 0.0
        else:
            # Weighted terms keep every digit: rounded, a job weighted 1/m saw its configurations at one value and
            # left GPUs idle (philly/workload-1: 162 → 253 idle GPU-hours).
            exact = self.policy.weighting != "none"  # (see _weighted)
            value = min(goodput**p if exact else round(goodput**p, COST_DIGITS), MAX_COST)
        return value if p < 0 else -value  # p > 0: maximise Σ G^p

    def _weighted(self, priced: float, unpriced: float, change: float, weight: float) -> float:
        """The pair's cost, weighted where the job's weight speaks for it: A₁ + w·(A + change − A₁) + (A_r − A), A the
        configuration's cost (``unpriced``), A_r the same after the restart factor (``priced``), A₁ the cost of the
        job's least configuration (normalised goodput 1).

        - What running saves (λ_n − A₁) stays Sia's, so every job still runs where GPUs allow (weighted too, a job
          of weight ~0 was indifferent to running and its GPUs went idle).
        - What more GPUs and the change penalty are worth to the job scale by w (a change penalty left unweighted
          froze long jobs where they were: worst FTF 5.3 on philly, measured with p fitted per round).
        - What a restart costs the job (Sia's restart factor) stays Sia's. A restart stalls a job for its delay
          whatever its rank, and in an average of JCTs every job's seconds count alike. Unlike λ_a, the factor
          prices nothing until the job's restarts eat into its life (``restart_factor``), so only a job that has
          been moved often grows sticky. Weighted, a long job of weight ~0.05 was moved for any gain of another's:
          on newtrace/workload-1 the ImageNet jobs restarted 75 times each, at 250 s a restart."""
        if weight == 1.0:
            return priced + change
        least = self._cost(1.0)
        return least + weight * (unpriced + change - least) + (priced - unpriced)

    def solve(self) -> dict[str, Configuration] | None:
        """The chosen configuration of every job that gets one; None when HiGHS found no solution (its time
        limit, or a model it could not solve)."""
        if not self.pairs:
            return {}
        job_ids = sorted({job.id for job, _ in self.pairs})
        row_of_job = {job_id: row for row, job_id in enumerate(job_ids)}
        types = sorted(self.usable)
        row_of_type = {t: len(job_ids) + row for row, t in enumerate(types)}
        rows, cols, values = [], [], []
        for col, (job, config) in enumerate(self.pairs):
            rows += [row_of_job[job.id], row_of_type[config.gpu_type]]
            cols += [col, col]
            values += [1.0, float(config.gpus)]
        matrix = csr_array((values, (rows, cols)), shape=(len(job_ids) + len(types), len(self.pairs)))
        upper = np.array([1.0] * len(job_ids) + [float(self.usable[t]) for t in types])
        # Each job's λ_n is saved by giving it any configuration: its pairs cost A − λ_n.
        objective = self.costs - (self.policy.lambda_n if self.policy.p < 0 else 0.0)
        lower = np.zeros(len(objective))
        lower[list(self.pinned.values())] = 1.0  # restoring jobs keep their configuration
        with _quiet_stdout():
            result = milp(objective, constraints=LinearConstraint(matrix, -np.inf, upper),
                          integrality=np.ones(len(objective)), bounds=Bounds(lower, 1),
                          options={"time_limit": self.policy.time_limit_seconds, "mip_rel_gap": MIP_GAP})
        if result.x is None:
            return None
        return {job.id: config for (job, config), x in zip(self.pairs, result.x, strict=True) if x > 0.5}

    def reason(self, job: JobInfo, config: Configuration) -> str:
        goodput = self.goodput[(job.id, config)]
        spread = f" on {config.nodes} nodes" if config.nodes > 1 else ""
        if job.id in self.pinned:
            left = job.restart_until - self.snap.now
            return f"sia: kept on {config.gpus} {config.gpu_type} GPUs{spread} while it restores its checkpoint " \
                   f"({left:.0f} s left)"
        weighed = self.weights.reason(job.id)
        return (f"sia: {config.gpus} {config.gpu_type} GPUs{spread}, {goodput:.1f}× its least configuration's goodput"
                f"{'; ' + weighed if weighed else ''}")

    def why_waiting(self, job: JobInfo) -> str:
        verb = "preempted" if job.running else "waiting"
        if job.id not in self.options_of:
            kind = f"{job.gpu_type} " if job.gpu_type else ""
            return f"{verb}: no configuration of {job.min_gpus}+ {kind}GPUs fits this cluster"
        return f"{verb}: the GPUs of every configuration it could take do more for other jobs"


@dataclass(frozen=True)
class Weights:
    """Each job's weight in the objective: 1 for every job (Sia), or its heSRPT share (``weighting="hesrpt"``).

    heSRPT (Berg, Vesilo, Harchol-Balter, SPAA'20; policies/hesrpt.py) splits a cluster among m jobs to minimise
    their mean completion time: ranked by remaining size, the i-th largest gets θ_i = (i/m)^c − ((i−1)/m)^c of it,
    c = 1/(1 − p) for speed-ups k^p — the shorter the job, the larger its share. Sia's
    objective counts every job alike whatever its length; weighted by w = m·θ (mean 1) it leans the same way
    while keeping Sia's goodput and type choices. A job's size is its remaining time at the fastest configuration
    it may take; p is heSRPT's default, 0.5 (``HESRPT_P``). Jobs whose remaining time is unknown (no profile, no
    prediction) weigh 1.
    """

    of_job: Mapping[str, float]
    rank_of: Mapping[str, int]  # 1 = shortest remaining time

    @staticmethod
    def of(with_options: Sequence[tuple[JobInfo, Mapping[Configuration, float]]], policy: SiaPolicy) -> Weights:
        if policy.weighting == "none":
            return Weights({}, {})
        sizes: dict[str, float] = {}
        for job, options in with_options:
            left = remaining_seconds(job, max(options.values()))
            if left is not None and left > 0:
                sizes[job.id] = left
        if not sizes:
            return Weights({}, {})
        order = {job.id: n for n, (job, _) in enumerate(with_options)}  # ties: the earlier arrival first
        shortest_first = sorted(sizes, key=lambda job_id: (sizes[job_id], order[job_id]))
        shares = hesrpt_shares(len(shortest_first), HESRPT_P)
        weights = {job_id: len(shares) * float(share) for job_id, share in zip(shortest_first, shares, strict=True)}
        return Weights(weights, {job_id: rank for rank, job_id in enumerate(shortest_first, start=1)})

    def reason(self, job_id: str) -> str:
        if job_id not in self.of_job:
            return ""
        return (f"weight {self.of_job[job_id]:.2f} (heSRPT: its remaining time ranks {self.rank_of[job_id]} "
                f"of {len(self.rank_of)}, shortest first)")


def _normalised(options: Mapping[Configuration, float]) -> dict[Configuration, float]:
    """Each speed ÷ the job's smallest positive one (Sia normalises goodput per job)."""
    least = min(options.values())
    return {config: speed / least for config, speed in options.items()}


@contextmanager
def _quiet_stdout() -> Iterator[None]:
    """File descriptor 1 sent to /dev/null while HiGHS solves.

    The HiGHS inside SciPy 1.17 prints a debugging line ("HighsMipSolverData::transformNewIntegerFeasibleSolution
    tmpSolver.run();") from C whatever its options say, which would corrupt a command's JSON output or a worker's
    log. Rounds and simulations solve in single-threaded worker processes, so nothing else writes meanwhile.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as sink:
            os.dup2(sink.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@register
@dataclass(frozen=True)
class ProfiledSiaPolicy(SiaPolicy):
    """Sia, without its growth ramp where a job's speed is known: ours.

    Sia grows a job to at most twice the GPUs it has held, starting at one (``cluster.py:376-379``), because
    its simulator assumes a job's throughput at scale is unknown until observed. This product prices a job on
    its profile's model fitted from measured step times on that GPU type (fitted_profiles.py), so the ramp
    buys no information there and costs a restart per doubling (25-250 s each in Sia's own delays). The ramp
    stays where the model is an estimate (a type never measured). It prices the change penalty λ_a = 0.01, as
    Sia's physical-cluster scheduler does and its simulator does not: a live cluster's rounds should not
    reshuffle jobs for a difference of a hundredth in the objective. Everything else is Sia's.
    Measured (``validate_sia``, docs/validation.md): lower average JCT than ``sia`` on Sia's heterogeneous sets.
    """

    name: ClassVar[str] = "sia-profiled"
    experimental: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "Sia without its growth ramp where speeds are measured "
        "(ours): lower average JCT, tail near Sia's"
    )
    ramp: str = "estimated"
    lambda_a: float = 0.01
    # Sia's pin of a restoring job is left to the restart factor, λ_a and the cycle's payback guard, which price
    # a change instead of forbidding it: pinned, a restoring ImageNet job (250 s) kept GPUs that arrivals waited
    # for, and average JCT rose on philly/workload-1 (sia-profiled 0.429 → 0.440 h, sia-hesrpt 0.439 → 0.457 h).
    keep_restoring: bool = False


@register
@dataclass(frozen=True)
class HesrptSiaPolicy(ProfiledSiaPolicy):
    """``sia-profiled`` with each job's term weighted by its heSRPT share (``Weights``): ours, for the lowest
    average JCT.

    The shorter a job's remaining time, the more GPUs it may take; every job still runs where GPUs allow. It buys
    average JCT with the longest jobs' time: on Sia's sets its p99 JCT and worst finish-time fairness are higher
    than ``sia-profiled``'s, and on the demo's fast rounds it rescales more (docs/validation.md). The
    restart factor's price is not weighted: a long job's low weight does not make its restarts cheap.
    """

    name: ClassVar[str] = "sia-hesrpt"
    experimental: ClassVar[bool] = True
    summary: ClassVar[str] = (
        "Sia weighted toward jobs with less work left (ours): the "
        "lowest average JCT; long jobs finish later"
    )
    weighting: str = "hesrpt"
