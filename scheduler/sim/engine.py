"""The what-if simulator: a discrete-event replay of a workload through ``run_cycle``.

Events are arrivals, completions, the end of a restart delay and scheduling rounds. Rounds
fall on multiples of ``round_seconds``. Elastic policies run every round while any job is
active; event-driven policies (``Policy.event_driven``) run only at the first round after
something that can change their answer — an arrival, a completion, a timer they asked for
(``PolicyResult.wake_at``) — so short rounds cost nothing on quiet stretches.

The executor model (execution.py): a job progresses at ``job_speed`` (its goodput model at
its allocation, best batch size) × the speed factor of the GPUs it holds (a power cap slows
throughput: ``speed_factor`` for every type, ``speed_factor_by_type`` for some). Every
rescale, and every start after a preemption, first pays ``restart_seconds`` with no
progress while holding its GPUs. A rigid trace job without a profile progresses one
second of work per second at its requested GPUs, so it runs exactly its duration plus
restart delays.

With the Pollux artifact's measurements (``grad_curves``, ``step_times``), jobs run as the
artifact's simulator runs them instead: execution.py, the executor model.

A simulation starts at 0 on an idle cluster, or from a ``StartState`` (a forecast: the clock of the
live cluster or of a replay's checkpoint, jobs running on their GPUs with their progress, the policy's
memory); ``on_checkpoint`` hands out such states as a replay passes them (the forecast backtest).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduler.core.admission import start_waiting_jobs
from scheduler.core.cycle import Action, Decision, run_cycle
from scheduler.core.policy import Policy
from scheduler.core.types import ClusterSnapshot, NodeIndex, NodeInfo, PolicyState, TenantInfo

from .config import SimConfig
from .execution import Execution
from .grad_curves import GradCurves
from .job_run import JobRun, checkpoint_of
from .limits import MAX_SIMULATED_SECONDS, refuse_endless
from .powerdown import NodePower
from .records import SimulationResult, WorkloadJob
from .start import Checkpoint, CheckpointCallback, RuntimeEstimator, StartState
from .step_times import StepTimes
from .usage import UsageRecorder

ProgressCallback = Callable[[int, int], None]  # (jobs finished, jobs in the workload)


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
    start: StartState | None = None,
    estimator: RuntimeEstimator | None = None,
    on_checkpoint: tuple[float, CheckpointCallback] | None = None,
) -> SimulationResult:
    """Replay ``workload`` on ``nodes`` under ``policy``; returns every job's outcome and the cluster's usage.

    ``grad_curves`` (by profile): measured gradient statistics that a job's efficiency follows
    (module docstring); without them every job keeps its profile's one noise scale.
    ``step_times`` (by profile, then GPU type): measured step times a job on one GPU type
    runs at (module docstring); without them it runs as its fitted model says.
    ``start``: begin at that moment with those jobs running, instead of at 0 on an idle cluster (forecasts).
    ``estimator``: sets ``expected_seconds`` of each arriving job without a profile and none given, from the
    jobs finished so far in this run only.
    ``on_checkpoint`` (every, callback): the callback gets a ``Checkpoint`` at every multiple of ``every``
    seconds while jobs remain (the backtest forecasts from each).
    """
    engine = _Engine(workload, nodes, policy, tenants, profiles or {}, config or SimConfig(), on_progress,
                     grad_curves or {}, step_times or {}, start, estimator, on_checkpoint)
    return engine.run()


class _Engine:
    def __init__(
        self, workload: Sequence[WorkloadJob], nodes: tuple[NodeInfo, ...], policy: Policy,
        tenants: tuple[TenantInfo, ...], profiles: Mapping[str, Mapping[str, Any]], config: SimConfig,
        on_progress: ProgressCallback | None, grad_curves: Mapping[str, GradCurves],
        step_times: Mapping[str, Mapping[str, StepTimes]], start: StartState | None = None,
        estimator: RuntimeEstimator | None = None, on_checkpoint: tuple[float, CheckpointCallback] | None = None,
    ) -> None:
        ids = [job.id for job in workload]
        if len(set(ids)) != len(ids):
            raise ValueError("workload job ids must be unique")
        self.start = start or StartState(0.0)
        refuse_endless(workload, nodes, profiles, self.start.now)
        self.arrivals = sorted(workload, key=lambda job: (job.submit_time, job.id))
        self.nodes, self.policy, self.tenants, self.config = nodes, policy, tenants, config
        self.static = ClusterSnapshot(0.0, nodes, (), tenants, profiles)
        self._indexed = (nodes, self.static.index)  # the nodes of the last snapshot, and their index
        self.node_of = {gpu.id: node.name for node in nodes for gpu in node.gpus}
        self.node_index = {node.name: index for index, node in enumerate(nodes)}
        self.type_of = {gpu.id: node.gpu_type for node in nodes for gpu in node.gpus}
        self.on_progress = on_progress
        self.active: dict[str, JobRun] = {}
        self.done: list[JobRun] = []
        self.completions: list[tuple[float, int, str]] = []
        self.restart_ends: list[tuple[float, int, str]] = []
        self.usage = UsageRecorder(nodes)
        self.state: PolicyState | None = None
        self.now, self.next_arrival, self.rounds, self.running = self.start.now, 0, 0, 0
        self.quiet_rounds = 0  # rounds in a row that changed nothing
        self.growable = 0  # running jobs below their max_gpus
        self.decision_at: float | None = None
        self.power = NodePower(nodes, config.power_down) if config.power_down else None
        self.active_integral, self.integral_at = 0.0, self.start.now
        self.execution = Execution(grad_curves, step_times)
        self.slowdown = self.config.slowdown_by_profile
        self.estimator = estimator
        self.on_checkpoint = on_checkpoint
        self.next_checkpoint = math.inf
        if on_checkpoint is not None:
            if not 0 < on_checkpoint[0] < math.inf:
                raise ValueError("checkpoints need a finite interval > 0")
            self.next_checkpoint = (math.floor(self.start.now / on_checkpoint[0]) + 1) * on_checkpoint[0]

    # --- the loop ------------------------------------------------------------------

    def run(self) -> SimulationResult:
        started = time.perf_counter()
        self._resume(self.start)
        self._plan_power()  # an idle cluster starts with its surplus nodes off
        horizon = min(self.config.horizon or math.inf, self.start.now + MAX_SIMULATED_SECONDS)
        while self._more_to_do():
            when = self._next_event_time()
            self._checkpoints_until(min(when, horizon))
            if when > horizon:
                self._advance(horizon)
                break
            self._advance(when)
            self._finish_completed()
            arrived = self._admit_arrivals()
            if self.decision_at is not None and self.decision_at <= self.now:
                self._decide()
            elif arrived:  # between rounds
                self._start_between_rounds()
        return self._result(time.perf_counter() - started)

    def _checkpoints_until(self, when: float) -> None:
        while self.on_checkpoint is not None and self.next_checkpoint <= when:
            self._advance(self.next_checkpoint)
            self.on_checkpoint[1](self._checkpoint())
            self.next_checkpoint += self.on_checkpoint[0]

    def _checkpoint(self) -> Checkpoint:
        return checkpoint_of(self.now, self.active.values(), self.done, self.state)

    def _more_to_do(self) -> bool:
        if self.next_arrival < len(self.arrivals):
            return True
        if self.config.stop_once_only and self._only_endless_jobs_run():
            return False
        # Jobs remain; stop only when none runs and the last round could place none of them.
        return any(run.gpus for run in self.active.values()) or (bool(self.active) and self.decision_at is not None)

    def _only_endless_jobs_run(self) -> bool:
        stop = self.config.stop_once_only
        return all(job_id in stop and run.gpus for job_id, run in self.active.items())

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
        step, phase = self.config.round_seconds, self.config.round_phase
        return math.ceil((at - phase) / step - 1e-9) * step + phase

    def _request_decision(self, at: float) -> None:
        tick = self._tick(at)
        self.decision_at = tick if self.decision_at is None else min(self.decision_at, tick)

    def _resume(self, start: StartState) -> None:
        """Admit the jobs submitted by ``start.now``, with their progress, and put the running ones on their GPUs."""
        self.state = start.policy_state
        if not (start.running or start.progress):
            return  # nothing ran before: jobs arrive through the loop, after the idle cluster's power plan
        held_gpus = [gpu for held in start.running.values() for gpu in held.gpus]
        if len(set(held_gpus)) != len(held_gpus):
            raise ValueError("a GPU is held by two running jobs at the start")
        self._admit_arrivals()
        for job_id, held in start.running.items():
            run = self.active.get(job_id)
            if run is None:
                raise ValueError(f"job {job_id!r} runs at the start but is not in the workload by then")
            unknown = [gpu for gpu in held.gpus if gpu not in self.type_of]
            if unknown or not held.gpus:
                raise ValueError(f"job {job_id!r} holds GPUs not in the cluster: {unknown[:3]}")
            run.resume_running(held, self.now)
            self._hold(run, held.gpus, held.batch_size)
            if run.restart_until > self.now:
                heapq.heappush(self.restart_ends, (run.restart_until, run.version, job_id))
        for job_id, done in start.progress.items():
            if (run := self.active.get(job_id)) is not None and not run.gpus:
                run.resume_waiting(done, start.attained_gpu_seconds.get(job_id, 0.0))

    # --- arrivals and completions -------------------------------------------------------

    def _admit_arrivals(self) -> bool:
        """Admit the jobs submitted by now; whether any was."""
        arrived = self.next_arrival
        while self.next_arrival < len(self.arrivals) and self.arrivals[self.next_arrival].submit_time <= self.now:
            spec = self.arrivals[self.next_arrival]
            if self.estimator is not None and spec.profile is None and spec.expected_seconds is None:
                spec = dataclasses.replace(spec, expected_seconds=self.estimator.estimate(spec, self.now))
            self.active[spec.id] = JobRun(spec, self.active_integral, progress_at=self.now)
            self.next_arrival += 1
            self._request_decision(self.now)
        return self.next_arrival > arrived

    def _start_between_rounds(self) -> None:
        """Arrivals to idle GPUs start at once (admission.py) rather than at the next round."""
        if not self.config.cycle.start_between_rounds:
            return
        if self.running == len(self.active) or sum(len(run.gpus) for run in self.active.values()) >= len(self.type_of):
            return  # nobody waits, or no GPU is idle: the snapshot is not worth building
        result = start_waiting_jobs(self._snapshot(), self.policy, self.state, self.config.restart_delay)
        for decision in result.changes if result else ():
            self._apply(self.active[decision.job_id], decision)

    def _finish_completed(self) -> None:
        while self.completions and self.completions[0][0] <= self.now + 1e-9:
            _, version, job_id = heapq.heappop(self.completions)
            run = self.active.get(job_id)
            if run is None or run.version != version:
                continue  # superseded by a later allocation change
            if not run.finishing:
                self._end_epoch(run)
                continue
            run.final_gpus = dict(run.gpus_by_type)
            self._release(run)
            run.progress, run.finish_time = run.spec.total_work, self.now
            if self.estimator is not None and run.spec.profile is None:
                self.estimator.finished(run.spec, run.gpu_seconds / run.spec.min_gpus)
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
        result = run_cycle(snapshot, self.policy, self.state, self.config.cycle, self.config.restart_delay)
        self.state, self.rounds = result.state, self.rounds + 1
        self.quiet_rounds = 0 if result.changes else self.quiet_rounds + 1
        for decision in result.changes:
            self._apply(self.active[decision.job_id], decision)
        if self.execution.curves:
            self._retune_batches()
        if not self.policy.event_driven and (self.running > 0 or self.next_arrival < len(self.arrivals)):
            self._request_decision(self.now + self._next_round_in())
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
        if nodes is not self._indexed[0]:  # nodes powered on or off: index the new view once
            self._indexed = (nodes, NodeIndex.of(nodes))
        # Unchecked: ids were checked once, in __init__, and jobs hold only GPUs run_cycle placed.
        return ClusterSnapshot(self.now, nodes, jobs, self.tenants, self.static.profiles, self._indexed[1],
                               check=False)

    def _next_round_in(self) -> float:
        step, most = self.config.round_seconds, self.config.quiet_rounds_up_to
        if most is None or self.quiet_rounds == 0:
            return step
        return max(step, min(step * 2 ** min(self.quiet_rounds, 30), most))

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

    def _apply(self, run: JobRun, decision: Decision) -> None:
        self._release(run)
        if decision.action == Action.PREEMPT:
            run.preemptions += 1
            return
        started = decision.action == Action.START and (
            run.start_time is not None or run.ran_before or self.config.charge_first_start)
        restart = decision.action == Action.RESCALE or started
        if decision.action == Action.RESCALE:
            run.rescales += 1
        if restart:
            run.restarts += 1
            run.restart_until = self.now + self.config.restart_delay(run.spec.profile)
        if run.start_time is None:
            run.start_time = self.now
        self._hold(run, decision.gpus, decision.batch_size)
        if run.restart_until > self.now:
            heapq.heappush(self.restart_ends, (run.restart_until, run.version, run.spec.id))

    def _hold(self, run: JobRun, gpus: tuple[str, ...], batch_size: int | None) -> None:
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

    def _set_rate(self, run: JobRun) -> None:
        """The running job's speed from its banked progress on, and its next completion or epoch-end event."""
        rate, curves = self.execution.rate(run, self.static, self.now)
        run.waiting_info = run.running_info = None  # φ may have changed
        run.rate = rate * self.config.speed_factor_of(run.gpus_by_type) / self.slowdown.get(run.spec.profile or "", 1.0)
        run.version += 1
        heapq.heappush(self.completions, (run.event_eta(curves), run.version, run.spec.id))

    def _rerate(self, run: JobRun, at_least: float = 0.0) -> None:
        """Bank a running job's progress (≥ ``at_least``) and recompute its speed, without a restart."""
        run.progress, run.progress_at = max(run.progress_now(self.now), at_least), self.now
        self._set_rate(run)
        if run.restart_until > self.now:  # the new version must still end the restart delay
            heapq.heappush(self.restart_ends, (run.restart_until, run.version, run.spec.id))

    def _end_epoch(self, run: JobRun) -> None:
        """The job reached the end of an epoch: the next epoch's statistics, and a batch re-picked for them.

        Its progress is set to the boundary itself, so that rounding cannot leave it a hair short.
        """
        curves = self.execution.curves[run.spec.profile]  # type: ignore[index]  # only jobs with curves get epochs
        self._rerate(run, at_least=min(curves.next_boundary(run.progress), run.spec.total_work))

    def _retune_batches(self) -> None:
        """Each round, a job that tunes its batch moves to the best batch for the φ it last measured."""
        for run in self.active.values():
            if run.gpus and self.execution.retunes(run, self.static, self.now):
                self._rerate(run)

    def _release(self, run: JobRun) -> None:
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
        outcomes = tuple(run.outcome(self.now, self.active_integral, self.static)
                         for run in [*self.done, *self.active.values()])
        return SimulationResult(
            policy=self.policy.name, jobs=outcomes, usage=self.usage.intervals(),
            gpus_by_type=dict(self.static.gpus_by_type),
            tenant_quotas={tenant.name: tenant.quota for tenant in self.tenants},
            rounds=self.rounds, wall_seconds=wall,
        )
