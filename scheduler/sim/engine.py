"""The what-if simulator: a discrete-event replay of a workload through ``run_cycle``.

Events are arrivals, completions, the end of a restart delay and scheduling rounds. Rounds
fall on multiples of ``round_seconds``. Elastic policies run every round while any job is
active; event-driven policies (``Policy.event_driven``) run only at the first round after
something that can change their answer — an arrival, a completion, a timer they asked for
(``PolicyResult.wake_at``) — so short rounds cost nothing on quiet stretches.

The executor model: a job progresses at ``job_speed`` (its goodput model at its
allocation, best batch size) × the speed factor of the GPUs it holds (a power cap slows
throughput: ``speed_factor`` for every type, ``speed_factor_by_type`` for some). Every
rescale, and every start after a preemption, first pays ``restart_seconds`` with no
progress while holding its GPUs. A rigid trace job without a profile progresses one
second of work per second at its requested GPUs, so it runs exactly its duration plus
restart delays.

Measured gradient statistics (``grad_curves``, optional, by profile): a job's efficiency
then follows its validation curves as in the Pollux artifact's simulator (grad_curves.py).
Its φ is the one measured at the batch it trains at in its current epoch; the rate is
recomputed at every epoch's end (an event) and the job reports that φ to the policy
(``JobInfo.grad_noise_scale``). A job that tunes its own batch (the policy chose one, or
the job asked for none: Pollux's jobs) re-picks the goodput-optimal batch for the φ it
last measured at every epoch's end and every round, without a restart, as AdaptDL's
trainer does (``Job.update_local_bsz``); before it has measured anything it starts at
max(M0, smallest per-GPU batch × GPUs).

Measured step times (``step_times``, optional, by profile and GPU type): a job then runs
at the step times measured for its placement (GPUs on each node) and micro-batch, as
the artifact's ``Job.step`` does (step_times.py), instead of its fitted model's. Only
the executor: policies still rank allocations with the fitted models, as the artifact's
scheduler only knows the jobs' fitted models. A job that tunes its batch picks it with
its fitted model, as the artifact's jobs do (``GoodputFunction.optimize``).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.core.cycle import Action, CycleConfig, Decision, run_cycle
from scheduler.core.goodput import GoodputModel
from scheduler.core.policy import Policy
from scheduler.core.speed import job_speed, model_for
from scheduler.core.types import ClusterSnapshot, JobInfo, NodeInfo, PolicyState, TenantInfo

from .grad_curves import GradCurves
from .metrics import fair_share_seconds
from .powerdown import NodePower, PowerDownConfig
from .records import JobOutcome, SimulationResult, WorkloadJob
from .step_times import StepTimes
from .usage import UsageRecorder

ProgressCallback = Callable[[int, int], None]  # (jobs finished, jobs in the workload)


@dataclass(frozen=True)
class SimConfig:
    round_seconds: float = 60.0
    restart_seconds: float = 30.0
    speed_factor: float = 1.0  # throughput multiplier, e.g. from a power cap (telemetry/power.py)
    speed_factor_by_type: Mapping[str, float] = field(default_factory=dict)  # GPU type → its own multiplier
    cycle: CycleConfig = field(default_factory=CycleConfig)
    horizon: float | None = None  # stop here even if jobs remain
    charge_first_start: bool = False  # also charge the restart delay on a job's first start (Pollux's simulator does)
    power_down: PowerDownConfig | None = None  # switch idle nodes off (powerdown.py)

    def __post_init__(self) -> None:
        if self.round_seconds <= 0 or self.restart_seconds < 0:
            raise ValueError("round_seconds must be > 0 and restart_seconds ≥ 0")
        for name, factor in [("all types", self.speed_factor), *self.speed_factor_by_type.items()]:
            if not 0 < factor <= 1:
                raise ValueError(f"speed factor ({name}) must be in (0, 1], got {factor}")

    def speed_factor_of(self, gpu_types: Iterable[str]) -> float:
        """The speed factor of a job holding GPUs of ``gpu_types``: the slowest type's, since a data-parallel step
        waits for every replica."""
        return min((self.speed_factor_by_type.get(t, self.speed_factor) for t in gpu_types),
                   default=self.speed_factor)


@dataclass(slots=True)
class _Run:
    """A job's mutable state inside one simulation."""

    spec: WorkloadJob
    active_integral_at_submit: float
    progress: float = 0.0
    progress_at: float = 0.0
    gpus: tuple[str, ...] = ()
    gpus_by_type: dict[str, int] = field(default_factory=dict)
    rate: float = 0.0
    restart_until: float = 0.0
    start_time: float | None = None
    finish_time: float | None = None
    gpu_seconds: float = 0.0
    held_since: float = 0.0
    restarts: int = 0
    rescales: int = 0
    preemptions: int = 0
    version: int = 0  # invalidates stale completion and restart events
    waiting_info: JobInfo | None = None  # a waiting job's JobInfo does not change: built once per wait
    running_info: JobInfo | None = None  # built once per allocation; each round only advances its progress
    nodes: int = 0  # nodes its GPUs span
    placement: tuple[int, ...] = ()  # its GPUs on each node it spans, in the nodes' order
    policy_batch: int | None = None  # the global batch the policy chose at its allocation, if any
    # With measured gradient statistics only (grad_curves.py):
    adaptive: bool = False  # it tunes its own batch size
    batch: int | None = None  # global batch it trains at
    phi: float | None = None  # the noise scale it last measured (None: nothing yet)
    finishing: bool = True  # its pending event is its completion, not the end of an epoch

    def progress_now(self, now: float) -> float:
        """Work done by ``now``, at most the job's total; none accrues during a restart delay.

        ``min`` and ``max`` written as comparisons, same results: this runs for every
        running job every round, and the builtins cost as much as the rest of it.
        """
        since = self.restart_until if self.restart_until > self.progress_at else self.progress_at
        done = self.progress + self.rate * (now - since) if now > since else self.progress
        total = self.spec.total_work
        return total if total < done else done

    def attained_now(self, now: float) -> float:
        return self.gpu_seconds + len(self.gpus) * (now - self.held_since)

    def info(self, now: float) -> JobInfo:
        """The job as a policy sees it at ``now``.

        A waiting job's ``JobInfo`` does not change, and a running one's changes only in
        progress and attained GPU-time: each is built once per wait or allocation, then
        advanced. Every active job passes here every round, hence the cache.
        """
        if not self.gpus:
            if self.waiting_info is None:
                self.waiting_info = self.job_info(now)
            return self.waiting_info
        if self.running_info is None:
            self.running_info = self.job_info(now)
        return self.running_info.progressed(self.progress_now(now), self.attained_now(now))

    def job_info(self, now: float) -> JobInfo:
        spec = self.spec
        return JobInfo(
            id=spec.id, tenant=spec.tenant, submit_time=spec.submit_time, min_gpus=spec.min_gpus,
            max_gpus=spec.max_gpus, total_work=spec.total_work,
            progress=self.progress_now(now), profile=spec.profile,
            gpu_type=spec.gpu_type, placement=self.gpus, attained_gpu_seconds=self.attained_now(now),
            restarts=self.restarts, batch_size=spec.batch_size, grad_noise_scale=self.phi,
        )

    def event_eta(self, curves: GradCurves | None) -> float:
        """When it finishes or, with measured gradient statistics, ends its epoch (``finishing`` says which)."""
        total = self.spec.total_work
        boundary = curves.next_boundary(self.progress) if curves is not None else math.inf
        self.finishing = boundary >= total
        remaining = min(boundary, total) - self.progress
        if remaining <= 0:
            return max(self.progress_at, self.restart_until)
        return max(self.progress_at, self.restart_until) + remaining / self.rate if self.rate > 0 else math.inf


def simulate(
    workload: Sequence[WorkloadJob],
    nodes: tuple[NodeInfo, ...],
    policy: Policy,
    *,
    tenants: tuple[TenantInfo, ...] = (),
    profiles: Mapping[str, Mapping[str, Any]] | None = None,
    config: SimConfig | None = None,
    on_progress: ProgressCallback | None = None,
    grad_curves: Mapping[str, GradCurves] | None = None,
    step_times: Mapping[str, Mapping[str, StepTimes]] | None = None,
) -> SimulationResult:
    """Replay ``workload`` on ``nodes`` under ``policy``; returns every job's outcome and the cluster's usage.

    ``grad_curves`` (by profile): measured gradient statistics that a job's efficiency follows
    (module docstring); without them every job keeps its profile's one noise scale.
    ``step_times`` (by profile, then GPU type): measured step times a job on one GPU type
    runs at (module docstring); without them it runs as its fitted model says.
    """
    engine = _Engine(workload, nodes, policy, tenants, profiles or {}, config or SimConfig(), on_progress,
                     grad_curves or {}, step_times or {})
    return engine.run()


class _Engine:
    def __init__(
        self, workload: Sequence[WorkloadJob], nodes: tuple[NodeInfo, ...], policy: Policy,
        tenants: tuple[TenantInfo, ...], profiles: Mapping[str, Mapping[str, Any]], config: SimConfig,
        on_progress: ProgressCallback | None, grad_curves: Mapping[str, GradCurves],
        step_times: Mapping[str, Mapping[str, StepTimes]],
    ) -> None:
        ids = [job.id for job in workload]
        if len(set(ids)) != len(ids):
            raise ValueError("workload job ids must be unique")
        self.arrivals = sorted(workload, key=lambda job: (job.submit_time, job.id))
        self.nodes, self.policy, self.tenants, self.config = nodes, policy, tenants, config
        self.static = ClusterSnapshot(0.0, nodes, (), tenants, profiles)
        self.node_of = {gpu.id: node.name for node in nodes for gpu in node.gpus}
        self.node_index = {node.name: index for index, node in enumerate(nodes)}
        self.type_of = {gpu.id: node.gpu_type for node in nodes for gpu in node.gpus}
        self.on_progress = on_progress
        self.active: dict[str, _Run] = {}
        self.done: list[_Run] = []
        self.completions: list[tuple[float, int, str]] = []
        self.restart_ends: list[tuple[float, int, str]] = []
        self.usage = UsageRecorder(nodes)
        self.state: PolicyState | None = None
        self.now, self.next_arrival, self.rounds, self.running = 0.0, 0, 0, 0
        self.growable = 0  # running jobs below their max_gpus
        self.decision_at: float | None = None
        self.power = NodePower(nodes, config.power_down) if config.power_down else None
        self.active_integral, self.integral_at = 0.0, 0.0
        self.curves = grad_curves
        self.step_times = step_times
        self.best_batches: dict[tuple[int, int, int, float], int] = {}  # (model, nodes, GPUs, φ) → batch

    # --- the loop ------------------------------------------------------------------

    def run(self) -> SimulationResult:
        started = time.perf_counter()
        self._plan_power()  # an idle cluster starts with its surplus nodes off
        while self._more_to_do():
            when = self._next_event_time()
            if self.config.horizon is not None and when > self.config.horizon:
                self._advance(self.config.horizon)
                break
            self._advance(when)
            self._finish_completed()
            self._admit_arrivals()
            if self.decision_at is not None and self.decision_at <= self.now:
                self._decide()
        return self._result(time.perf_counter() - started)

    def _more_to_do(self) -> bool:
        if self.next_arrival < len(self.arrivals):
            return True
        # Jobs remain; stop only when none runs and the last round could place none of them.
        return any(run.gpus for run in self.active.values()) or (bool(self.active) and self.decision_at is not None)

    def _next_event_time(self) -> float:
        candidates = [math.inf]
        if self.next_arrival < len(self.arrivals):
            candidates.append(self.arrivals[self.next_arrival].submit_time)
        if self.completions:
            candidates.append(self.completions[0][0])
        if self.restart_ends:
            candidates.append(self.restart_ends[0][0])
        if self.decision_at is not None:
            candidates.append(self.decision_at)
        return max(min(candidates), self.now)

    def _advance(self, when: float) -> None:
        self.usage.record(self.now, when)
        self.active_integral += len(self.active) * (when - self.now)
        self.now = when
        while self.restart_ends and self.restart_ends[0][0] <= when:
            _, version, job_id = heapq.heappop(self.restart_ends)
            run = self.active.get(job_id)
            if run is not None and run.version == version:
                self.usage.restarted(run.gpus_by_type, run.spec.tenant)

    def _tick(self, at: float) -> float:
        """The first round at or after ``at``."""
        step = self.config.round_seconds
        return math.ceil(at / step - 1e-9) * step

    def _request_decision(self, at: float) -> None:
        tick = self._tick(at)
        self.decision_at = tick if self.decision_at is None else min(self.decision_at, tick)

    # --- arrivals and completions -------------------------------------------------------

    def _admit_arrivals(self) -> None:
        while self.next_arrival < len(self.arrivals) and self.arrivals[self.next_arrival].submit_time <= self.now:
            spec = self.arrivals[self.next_arrival]
            self.active[spec.id] = _Run(spec, self.active_integral, progress_at=self.now)
            self.next_arrival += 1
            self._request_decision(self.now)

    def _finish_completed(self) -> None:
        while self.completions and self.completions[0][0] <= self.now + 1e-9:
            _, version, job_id = heapq.heappop(self.completions)
            run = self.active.get(job_id)
            if run is None or run.version != version:
                continue  # superseded by a later allocation change
            if not run.finishing:
                self._end_epoch(run)
                continue
            self._release(run)
            run.progress, run.finish_time = run.spec.total_work, self.now
            del self.active[job_id]
            self.done.append(run)
            if not self.policy.event_driven or self._someone_could_use_gpus():
                self._request_decision(self.now)
            if self.on_progress:
                self.on_progress(len(self.done), len(self.arrivals))
            self._plan_power()  # the node it ran on may now go down

    # --- rounds -----------------------------------------------------------------------

    def _decide(self) -> None:
        self.decision_at = None  # requests made during this round (a node booting) stand
        self._plan_power()
        snapshot = self._snapshot()
        result = run_cycle(snapshot, self.policy, self.state, self.config.cycle)
        self.state, self.rounds = result.state, self.rounds + 1
        for decision in result.changes:
            self._apply(self.active[decision.job_id], decision)
        if self.curves:
            self._retune_batches()
        if not self.policy.event_driven and (self.running > 0 or self.next_arrival < len(self.arrivals)):
            self._request_decision(self.now + self.config.round_seconds)
        if result.wake_at is not None and math.isfinite(result.wake_at) and self._someone_could_use_gpus():
            self._request_decision(max(result.wake_at, self.now + self.config.round_seconds))

    def _someone_could_use_gpus(self) -> bool:
        """Whether an event-driven policy could decide anything new: a job waits, or a running one could grow.

        Otherwise freed GPUs and queue timers change nothing (no one to start, preempt for, or grow), and
        skipping those rounds is what keeps a lightly loaded 82,000-job trace fast. A later arrival brings
        its own round.
        """
        return self.running < len(self.active) or self.growable > 0

    def _snapshot(self) -> ClusterSnapshot:
        now = self.now
        jobs = tuple(run.info(now) for run in self.active.values())
        nodes = self.power.view if self.power else self.nodes
        # Unchecked: ids were checked once, in __init__, and jobs hold only GPUs run_cycle placed.
        return ClusterSnapshot(self.now, nodes, jobs, self.tenants, self.static.profiles, check=False)

    def _plan_power(self) -> None:
        """Node power-down what-if: switch nodes on for waiting jobs, idle ones beyond the spares off."""
        if self.power is None:
            return
        busy = {self.node_of[gpu] for run in self.active.values() for gpu in run.gpus}
        waiting = sum(run.spec.min_gpus for run in self.active.values() if not run.gpus)
        held = sum(len(run.gpus) for run in self.active.values())
        for ready in self.power.plan(self.now, busy, waiting, held):
            self._request_decision(ready)
        off = set(self.power.off_since)
        self.usage.off = Counter(self.type_of[gpu.id] for node in self.nodes if node.name in off for gpu in node.gpus)

    def _apply(self, run: _Run, decision: Decision) -> None:
        self._release(run)
        if decision.action == Action.PREEMPT:
            run.preemptions += 1
            return
        started = decision.action == Action.START and (run.start_time is not None or self.config.charge_first_start)
        restart = decision.action == Action.RESCALE or started
        if decision.action == Action.RESCALE:
            run.rescales += 1
        if restart:
            run.restarts += 1
            run.restart_until = self.now + self.config.restart_seconds
        if run.start_time is None:
            run.start_time = self.now
        self._hold(run, decision.gpus, decision.batch_size)
        if run.restart_until > self.now:
            heapq.heappush(self.restart_ends, (run.restart_until, run.version, run.spec.id))

    def _hold(self, run: _Run, gpus: tuple[str, ...], batch_size: int | None) -> None:
        run.gpus, run.held_since = gpus, self.now
        run.gpus_by_type = dict(Counter(self.type_of[gpu] for gpu in gpus))
        run.waiting_info = run.running_info = None
        self.running += 1
        self.growable += len(gpus) < run.spec.max_gpus
        self.usage.hold(run.gpus_by_type, run.spec.tenant, run.restart_until > self.now)
        run.nodes = len({self.node_of[gpu] for gpu in gpus})
        by_node = Counter(self.node_index[self.node_of[gpu]] for gpu in gpus)
        run.placement = tuple(by_node[index] for index in sorted(by_node))
        run.policy_batch = None if run.spec.fixed_batch else batch_size
        run.adaptive = not run.spec.fixed_batch and (batch_size is not None or run.spec.batch_size is None)
        self._set_rate(run)

    def _set_rate(self, run: _Run) -> None:
        """The running job's speed from its banked progress on, and its next completion or epoch-end event."""
        profile = run.spec.profile
        curves = self.curves.get(profile) if profile else None
        table = self._step_table(run)
        batch = run.policy_batch
        model = model_for(run.job_info(self.now), self.static) if curves is not None or table is not None else None
        if model is None:
            curves = table = None
        if model is not None and (curves is not None or run.adaptive):
            batch = run.batch = self._batch(run, model, curves is not None)
        if table is not None and model is not None:
            rate = self._measured_rate(run, model, table, batch or run.spec.batch_size or model.init_batch_size, curves)
        else:
            if curves is not None:
                run.phi = curves.noise_scale(batch, curves.epoch(run.progress))  # type: ignore[arg-type]
                run.waiting_info = run.running_info = None  # φ changed: the JobInfo below must carry it
            rate = job_speed(run.job_info(self.now), self.static, len(run.gpus), run.nodes, batch)
        run.waiting_info = run.running_info = None  # φ may have changed
        run.rate = rate * self.config.speed_factor_of(run.gpus_by_type)
        run.version += 1
        heapq.heappush(self.completions, (run.event_eta(curves), run.version, run.spec.id))

    def _step_table(self, run: _Run) -> StepTimes | None:
        """Measured step times of the job's profile on the one GPU type it holds, if any."""
        if not (self.step_times and run.spec.profile and len(run.gpus_by_type) == 1):
            return None
        return self.step_times.get(run.spec.profile, {}).get(next(iter(run.gpus_by_type)))

    def _measured_rate(
        self, run: _Run, model: GoodputModel, table: StepTimes, batch: int, curves: GradCurves | None,
    ) -> float:
        """Progress per second with measured step times, as the artifact's ``Job.step`` computes it.

        ``Job.update_local_bsz``: the global batch's per-GPU share in s + 1 micro-batches
        (``GoodputModel.micro_batches``) of ⌈share / (s + 1)⌉ samples, at most
        ⌊max_batch_size / (GPUs · (s + 1))⌋; the batch trained is GPUs · micro-batch · (s + 1).
        ``Job.step``: a step takes step_time + s · (step_time − sync_time) (step_times.py); the
        gain is (var + sqr) / (var / scale + sqr) = E · batch / M0 with φ measured at the batch
        trained (``get_grad_stats``), or the job's own φ without curves.
        """
        gpus = len(run.gpus)
        count = model.micro_batches(gpus, batch)
        micro = min(math.ceil(batch / gpus / count - 1e-8), int(model.max_batch_size / (gpus * count)))
        micro = max(micro, 1)
        trained = gpus * micro * count
        if curves is not None:
            run.phi = curves.noise_scale(trained, curves.epoch(run.progress))
        phi = run.phi if run.phi is not None else model.noise_scale
        seconds = table.step_seconds(run.placement, micro, count - 1)
        return float(model.efficiency(trained, phi)) * trained / model.init_batch_size / seconds

    def _batch(self, run: _Run, model: GoodputModel, measured: bool = True) -> int:
        """The global batch a running job trains at (measured gradient statistics or step times only).

        ``measured``: its φ comes from gradient curves, so before it has measured any it starts
        small; otherwise it uses the φ it reports (its profile's when none).
        """
        gpus = len(run.gpus)
        if not run.adaptive:
            return run.policy_batch or run.spec.batch_size or model.init_batch_size
        if run.phi is None and measured:  # nothing measured yet: AdaptDL starts at M0, or the least per-GPU batch
            return min(max(model.init_batch_size, model.min_local_bsz * gpus), model.max_batch_size)
        phi = run.phi if run.phi is not None else model.noise_scale
        key = (id(model), run.nodes, gpus, phi)
        if key not in self.best_batches:
            self.best_batches[key] = model.best_global_batch(run.nodes, gpus, phi)
        return self.best_batches[key]

    def _rerate(self, run: _Run, at_least: float = 0.0) -> None:
        """Bank a running job's progress (≥ ``at_least``) and recompute its speed, without a restart."""
        run.progress, run.progress_at = max(run.progress_now(self.now), at_least), self.now
        self._set_rate(run)
        if run.restart_until > self.now:  # the new version must still end the restart delay
            heapq.heappush(self.restart_ends, (run.restart_until, run.version, run.spec.id))

    def _end_epoch(self, run: _Run) -> None:
        """The job reached the end of an epoch: the next epoch's statistics, and a batch re-picked for them.

        Its progress is set to the boundary itself, so that rounding cannot leave it a hair short.
        """
        curves = self.curves[run.spec.profile]  # type: ignore[index]  # only jobs with curves get epoch events
        self._rerate(run, at_least=min(curves.next_boundary(run.progress), run.spec.total_work))

    def _retune_batches(self) -> None:
        """Each round, a job that tunes its batch moves to the best batch for the φ it last measured."""
        for run in self.active.values():
            if not (run.gpus and run.adaptive and run.batch is not None):
                continue
            model = model_for(run.running_info or run.job_info(self.now), self.static)
            if model is not None and self._batch(run, model, run.spec.profile in self.curves) != run.batch:
                self._rerate(run)

    def _release(self, run: _Run) -> None:
        """Bank the job's progress and GPU-time up to now and take its GPUs away."""
        run.progress = run.progress_now(self.now)
        run.gpu_seconds = run.attained_now(self.now)
        if run.gpus:
            self.usage.release(run.gpus_by_type, run.spec.tenant, run.restart_until > self.now)
            self.running -= 1
            self.growable -= len(run.gpus) < run.spec.max_gpus
            run.waiting_info = run.running_info = None
        run.progress_at, run.held_since = self.now, self.now
        run.gpus, run.gpus_by_type, run.rate = (), {}, 0.0
        run.version += 1

    # --- the result ---------------------------------------------------------------------

    def _result(self, wall: float) -> SimulationResult:
        for run in self.active.values():
            self._release(run)
        outcomes = tuple(self._outcome(run) for run in [*self.done, *self.active.values()])
        return SimulationResult(
            policy=self.policy.name, jobs=outcomes, usage=self.usage.intervals(),
            gpus_by_type=dict(self.static.gpus_by_type),
            tenant_quotas={tenant.name: tenant.quota for tenant in self.tenants},
            rounds=self.rounds, wall_seconds=wall,
        )

    def _outcome(self, run: _Run) -> JobOutcome:
        spec = run.spec
        return JobOutcome(
            id=spec.id, tenant=spec.tenant, submit_time=spec.submit_time, start_time=run.start_time,
            finish_time=run.finish_time, min_gpus=spec.min_gpus, max_gpus=spec.max_gpus, profile=spec.profile,
            gpu_seconds=run.gpu_seconds, restarts=run.restarts, rescales=run.rescales,
            preemptions=run.preemptions, fair_share_seconds=self._fair_share_seconds(run),
        )

    def _fair_share_seconds(self, run: _Run) -> float:
        """Time the job would take alone on 1/N of the cluster, N the average number of jobs active in its life."""
        end = run.finish_time if run.finish_time is not None else self.now
        lived = end - run.spec.submit_time
        contention = (self.active_integral - run.active_integral_at_submit) / lived if lived > 0 else 1.0
        info = run.job_info(self.now)
        return fair_share_seconds(run.spec.total_work, lambda gpus: job_speed(info, self.static, gpus),
                                  self.static.total_gpus, contention, run.spec.min_gpus, run.spec.max_gpus)
