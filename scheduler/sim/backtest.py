"""How good are the forecasts: replay a trace, forecast from the simulated state every hour, compare.

Two passes of the same deterministic replay. The first gives what happened: each job's first start and its
finish. The second stops at every multiple of ``every`` seconds (``simulate``'s checkpoints) and forecasts from
the state there exactly as the live cluster does (sim/forecast.py): no future arrivals, the jobs without a
profile run their *predicted* service time, the predictor having seen only the jobs finished by then
(sim/runtimes.py). A forecast is scored against the first pass: start errors for the jobs waiting then that
had never run, finish errors for every job active then.

Two baselines at the same moments, from the same state:

* **queue position**: the k-th waiting job in arrival order starts k × the mean duration (first start to
  finish) of the jobs finished so far from now, and finishes a mean duration later; a running job finishes a
  mean duration after its start (now, if that is past).
* **requested time** (Slurm's backfill plan): every job asks for twice its true duration (a common
  over-request, where a trace has no requests); running jobs end at start + request (now, if past), and the
  waiting jobs in arrival order each start at the earliest moment their GPUs are free for their whole request.

Pure: no Django; ``manage.py backtest_forecast`` prints it.
"""

from __future__ import annotations

import bisect
import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.core.policy import Policy
from scheduler.core.types import NodeInfo, TenantInfo

from .config import SimConfig
from .engine import simulate
from .forecast import ForecastInput, forecast, predicted_rigid
from .records import WorkloadJob
from .runtimes import OnlineEstimator, estimator_for, workload_features
from .start import Checkpoint

TEN_MINUTES = 600.0
REQUEST_FACTOR = 2.0  # the requested time of the Slurm-style baseline: twice the true duration


@dataclass(frozen=True)
class Errors:
    """Absolute errors of one kind of prediction (start or finish), over every scored job and forecast."""

    count: int
    median_abs_error_s: float | None
    p90_abs_error_s: float | None
    within_10min: float | None  # share of predictions within ±10 minutes
    within_25pct: float | None  # share within ±25 % of the time actually left (truth − forecast moment)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "count"} | {"count": self.count}


@dataclass
class _Scores:
    """Predictions of one method, paired with the truth as ``(moment, predicted, actual)``."""

    start: list[tuple[float, float, float]] = field(default_factory=list)
    finish: list[tuple[float, float, float]] = field(default_factory=list)

    def errors(self) -> dict[str, Errors]:
        return {"start": _errors(self.start), "finish": _errors(self.finish)}


@dataclass(frozen=True)
class BacktestResult:
    policy: str
    forecasts: int
    start: Errors
    finish: Errors
    baselines: Mapping[str, Mapping[str, Errors]]
    forecast_wall_s: Mapping[str, float | None]

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy, "forecasts": self.forecasts, "start": self.start.as_dict(),
            "finish": self.finish.as_dict(),
            "baselines": {name: {kind: e.as_dict() for kind, e in errors.items()}
                          for name, errors in self.baselines.items()},
            "forecast_wall_s": dict(self.forecast_wall_s),
        }


def backtest(workload: Sequence[WorkloadJob], nodes: tuple[NodeInfo, ...], policy_factory: Callable[[], Policy],
             *, tenants: tuple[TenantInfo, ...] = (), profiles: Mapping[str, Mapping[str, Any]] | None = None,
             config: SimConfig | None = None, every: float = 3600.0,
             execution: Mapping[str, Any] | None = None) -> BacktestResult:
    """Forecasts every ``every`` simulated seconds of ``workload``'s replay, scored (module docstring).

    ``execution``: ``simulate``'s ``grad_curves`` and ``step_times``, for the replays only. Jobs then run as
    measured while the forecasts, like the live ones, know only the fitted models in ``profiles``: the score
    includes the models' own error.
    """
    profiles, config, execution = profiles or {}, config or SimConfig(), execution or {}
    truth = simulate(workload, nodes, policy_factory(), tenants=tenants, profiles=profiles, config=config,
                     estimator=estimator_for(policy_factory()), **execution)
    actual = {job.id: (job.start_time, job.finish_time) for job in truth.jobs}
    durations = {job.id: job.finish_time - job.start_time for job in truth.jobs
                 if job.start_time is not None and job.finish_time is not None}
    scores = {"forecast": _Scores(), "queue_position": _Scores(), "requested_time": _Scores()}
    walls: list[float] = []
    estimator = OnlineEstimator()

    def at_checkpoint(point: Checkpoint) -> None:
        if not point.jobs:
            return
        given = _forecast_input(point, estimator, nodes, tenants, profiles, _forecast_config(config))
        result = forecast(given, policy_factory())
        walls.append(result.wall_seconds)
        predicted = {job_id: (e.start, e.finish) for job_id, e in result.estimates.items()}
        _score(scores["forecast"], point, predicted, actual)
        _score(scores["queue_position"], point, _queue_position(point), actual)
        _score(scores["requested_time"], point, _requested_time(point, durations, nodes), actual)

    simulate(workload, nodes, policy_factory(), tenants=tenants, profiles=profiles, config=config,
             estimator=estimator, on_checkpoint=(every, at_checkpoint), **execution)
    errors = {name: s.errors() for name, s in scores.items()}
    return BacktestResult(
        policy=truth.policy, forecasts=len(walls), start=errors["forecast"]["start"],
        finish=errors["forecast"]["finish"],
        baselines={name: errors[name] for name in ("queue_position", "requested_time")},
        forecast_wall_s={"median": statistics.median(walls) if walls else None, "max": max(walls, default=None)},
    )


def _forecast_config(config: SimConfig) -> SimConfig:
    """What a live forecast knows of the settings: the round interval and one restart delay; not the artifact's
    per-model delays or speed calibrations."""
    return SimConfig(round_seconds=config.round_seconds, restart_seconds=config.restart_seconds,
                     charge_first_start=config.charge_first_start)


def _forecast_input(point: Checkpoint, estimator: OnlineEstimator, nodes: tuple[NodeInfo, ...],
                    tenants: tuple[TenantInfo, ...], profiles: Mapping[str, Mapping[str, Any]],
                    config: SimConfig) -> ForecastInput:
    """The checkpoint as the live forecast sees a cluster: jobs without a profile at their predicted length."""
    start, predictor = point.start, estimator.predictor
    rigid = [job for job in point.jobs if job.profile is None]
    predictions = predictor.predict_many([workload_features(job) for job in rigid])
    jobs = {job.id: job for job in point.jobs}
    running, progress = dict(start.running), dict(start.progress)
    for job, prediction in zip(rigid, predictions, strict=True):
        served = running[job.id].progress if job.id in running else progress.get(job.id, 0.0)
        remaining = predictor.remaining(prediction.seconds, served)
        jobs[job.id] = predicted_rigid(job, served, prediction.seconds, remaining)
    return ForecastInput(tuple(jobs.values()), nodes, tenants, profiles, start, config)


def _score(scores: _Scores, point: Checkpoint, predicted: Mapping[str, tuple[float | None, float | None]],
           actual: Mapping[str, tuple[float | None, float | None]]) -> None:
    now = point.start.now
    for job in point.jobs:
        start, finish = predicted.get(job.id, (None, None))
        true_start, true_finish = actual[job.id]
        never_ran = job.id not in point.start.running and job.id not in point.start.progress
        if never_ran and start is not None and true_start is not None:
            scores.start.append((now, start, true_start))
        if finish is not None and true_finish is not None:
            scores.finish.append((now, finish, true_finish))


def _errors(pairs: Sequence[tuple[float, float, float]]) -> Errors:
    if not pairs:
        return Errors(0, None, None, None, None)
    moment, predicted, truth = (np.array(column) for column in zip(*pairs, strict=True))
    error = np.abs(predicted - truth)
    left = np.maximum(truth - moment, 1.0)
    return Errors(len(pairs), float(np.median(error)), float(np.percentile(error, 90)),
                  float(np.mean(error <= TEN_MINUTES)), float(np.mean(error <= 0.25 * left)))


# --- the baselines ---------------------------------------------------------------------


def _waiting_in_arrival_order(point: Checkpoint) -> list[WorkloadJob]:
    return sorted((job for job in point.jobs if job.id not in point.start.running),
                  key=lambda job: (job.submit_time, job.id))


def _queue_position(point: Checkpoint) -> dict[str, tuple[float | None, float | None]]:
    now = point.start.now
    lengths = [finish - start for start, finish in point.finished.values()]
    mean = statistics.fmean(lengths) if lengths else 3600.0
    predicted: dict[str, tuple[float | None, float | None]] = {}
    for job_id, held in point.start.running.items():
        predicted[job_id] = (None, max(held.started_at + mean, now))
    for position, job in enumerate(_waiting_in_arrival_order(point)):
        start = now + position * mean
        predicted[job.id] = (start, start + mean)
    return predicted


def _requested_time(point: Checkpoint, durations: Mapping[str, float],
                    nodes: tuple[NodeInfo, ...]) -> dict[str, tuple[float | None, float | None]]:
    """Slurm-style planning with requests of ``REQUEST_FACTOR`` × the true duration (module docstring)."""
    now = point.start.now
    plan = _FreePlan(now, sum(len(node.usable_gpus) for node in nodes))
    predicted: dict[str, tuple[float | None, float | None]] = {}
    for job_id, held in point.start.running.items():
        end = max(held.started_at + REQUEST_FACTOR * durations.get(job_id, 0.0), now)
        plan.reserve(now, end, len(held.gpus))
        predicted[job_id] = (None, end)
    for job in _waiting_in_arrival_order(point):
        request = REQUEST_FACTOR * durations.get(job.id, 0.0)
        start = plan.earliest(job.min_gpus, request)
        if start is None:
            continue
        plan.reserve(start, start + request, job.min_gpus)
        predicted[job.id] = (start, start + request)
    return predicted


class _FreePlan:
    """Free GPUs over future time, as a step function: ``times[i]`` on, ``free[i]`` GPUs are free."""

    def __init__(self, now: float, gpus: int) -> None:
        self.times, self.free, self.gpus = [now], [gpus], gpus

    def _split(self, at: float) -> int:
        index = bisect.bisect_right(self.times, at) - 1
        if self.times[index] != at:
            self.times.insert(index + 1, at)
            self.free.insert(index + 1, self.free[index])
            index += 1
        return index

    def reserve(self, start: float, end: float, gpus: int) -> None:
        if end <= start:
            return
        first, last = self._split(start), self._split(end)
        for index in range(first, last):
            self.free[index] -= gpus

    def earliest(self, gpus: int, seconds: float) -> float | None:
        """The first breakpoint from which ``gpus`` stay free for ``seconds``; None if it never fits."""
        if gpus > self.gpus:
            return None
        for index, at in enumerate(self.times):
            end = at + seconds
            fits = True
            for later in range(index, len(self.times)):
                if self.times[later] >= end and later > index:
                    break
                if self.free[later] < gpus:
                    fits = False
                    break
            if fits:
                return at
        return None
