"""When will each job start and finish: the cluster as it is now, run forward through the simulator.

The same ``simulate`` every what-if uses, started from a ``StartState`` (the running jobs on their GPUs, with
their progress; the policy's memory) under the live policy, round interval and restart delay, until every
current job has finished. Jobs with a profile run at their goodput model's speed, as the simulated executor
and the what-ifs run them; a job without one runs its predicted service time (sim/runtimes.py), from where it
is: one past its prediction is re-estimated, never due in the past.

No arrivals by default: a point forecast. Given samples of future arrivals (``sample_arrivals``: the recent
jobs, resampled at their recent rate, one sample a seed), it runs once a sample and reports each job's median
with its p10–p90 range. Pure: no Django; the live forecast (scheduler/forecasting/forecasts.py) and the backtest
(sim/backtest.py) build its inputs.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.core.policy import Policy
from scheduler.core.types import NodeInfo, TenantInfo

from .config import SimConfig
from .engine import simulate
from .limits import cannot_finish_within
from .records import JobOutcome, WorkloadJob
from .start import StartState

ARRIVAL_PREFIX = "arrival:"  # ids of sampled future arrivals, never a real job's
# While an elastic policy's rounds change nothing, a forecast runs them ever less often, at most this far apart: a
# queue that waits days for a long job takes hundreds of rounds, not one per interval (86,400 at 30 s a month).
QUIET_ROUNDS_UP_TO = 3600.0


@dataclass(frozen=True)
class Estimate:
    """One job's forecast, in the clock of the ``StartState``. ``start`` is None for a job running already
    (it started at ``started_at``); ``finish`` None when it does not finish within the forecast's horizon."""

    job_id: str
    start: float | None
    finish: float | None
    start_range: tuple[float, float] | None = None  # (p10, p90) over the arrival samples
    finish_range: tuple[float, float] | None = None
    # What frees its GPUs (waiting jobs): the job that finishes last before its start, and what that one held.
    after_job: str | None = None
    after_gpus: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Forecast:
    made_at: float
    estimates: Mapping[str, Estimate]
    samples: int  # arrival samples run (0: a point forecast)
    wall_seconds: float


@dataclass(frozen=True)
class ForecastInput:
    """Everything one forecast simulates: the current jobs (submitted by ``start.now``) and the cluster."""

    jobs: Sequence[WorkloadJob]
    nodes: tuple[NodeInfo, ...]
    tenants: tuple[TenantInfo, ...]
    profiles: Mapping[str, Mapping[str, Any]]
    start: StartState
    config: SimConfig


def forecast(given: ForecastInput, policy: Policy, arrivals: Sequence[Sequence[WorkloadJob]] = ()) -> Forecast:
    """Each current job's estimated start and finish (module docstring); ``arrivals``: one sample per run."""
    began = time.perf_counter()
    point = _run(given, policy, ())
    usable = {job.id: job.gpu_type for job in given.jobs}
    estimates = {job_id: _estimate(outcome, point, given.start.now, usable.get(job_id))
                 for job_id, outcome in point.items()}
    if arrivals:
        # Arrivals never end: a sample stops well after the point forecast's last finish.
        bounded = dataclasses.replace(given, config=dataclasses.replace(
            given.config, horizon=given.start.now + 3 * horizon_of(estimates, given.start.now)))
        runs = [_run(bounded, policy, sample) for sample in arrivals]
        estimates = {job_id: _ranged(estimate, [run[job_id] for run in runs])
                     for job_id, estimate in estimates.items()}
    return Forecast(given.start.now, estimates, len(arrivals), time.perf_counter() - began)


def _run(given: ForecastInput, policy: Policy, sample: Sequence[WorkloadJob]) -> dict[str, JobOutcome]:
    result = simulate([*given.jobs, *sample], given.nodes, policy, tenants=given.tenants, profiles=given.profiles,
                      config=_bounded_by_work(given), start=given.start)
    return {job.id: job for job in result.jobs if not job.id.startswith(ARRIVAL_PREFIX)}


def _bounded_by_work(given: ForecastInput) -> SimConfig:
    """The run's settings, told which jobs cannot finish by its horizon however the cluster treats them: once only
    they remain, running, the run stops instead of simulating them round by round to the horizon (one job with
    years of work made every forecast run out of time); and rounds that change nothing come ever less often."""
    horizon = given.config.horizon
    if horizon is None or not math.isfinite(horizon):
        return given.config
    done = {**given.start.progress, **{job_id: run.progress for job_id, run in given.start.running.items()}}
    endless = cannot_finish_within(given.jobs, done, given.nodes, given.profiles, horizon - given.start.now)
    quiet = given.config.quiet_rounds_up_to or QUIET_ROUNDS_UP_TO
    return dataclasses.replace(given.config, stop_once_only=endless, quiet_rounds_up_to=quiet)


def _estimate(outcome: JobOutcome, run: Mapping[str, JobOutcome], now: float, gpu_type: str | None = None) -> Estimate:
    """``gpu_type``: the one type the job may run on (None: any), so that what it waits for is GPUs it can use."""
    if outcome.start_time is not None and outcome.start_time < now - 1e-6:  # running at the start
        return Estimate(outcome.id, None, outcome.finish_time)
    start = outcome.start_time
    after = _freed_by(start, run, outcome.id, gpu_type) if start is not None and start > now + 1e-6 else None
    freed = {} if after is None else {kind: n for kind, n in after.final_gpus_by_type.items()
                                      if gpu_type is None or kind == gpu_type}
    return Estimate(outcome.id, start, outcome.finish_time, after_job=after.id if after else None, after_gpus=freed)


def _freed_by(start: float, run: Mapping[str, JobOutcome], job_id: str, gpu_type: str | None) -> JobOutcome | None:
    """The job that finished last at or before ``start`` holding GPUs the waiting job can use (of ``gpu_type``,
    when it needs one): the one whose GPUs it waited for."""
    before = [o for o in run.values() if o.id != job_id and o.finish_time is not None and o.finish_time <= start
              and (gpu_type is None or o.final_gpus_by_type.get(gpu_type, 0) > 0)]
    return max(before, key=lambda o: (o.finish_time, o.id), default=None)


def _ranged(point: Estimate, samples: Sequence[JobOutcome]) -> Estimate:
    starts = [o.start_time for o in samples]
    finishes = [o.finish_time for o in samples]
    start_range = _percentiles(starts) if point.start is not None else None
    finish_range = _percentiles(finishes)
    return dataclasses.replace(
        point, start=_median(starts) if point.start is not None else None, finish=_median(finishes),
        start_range=start_range, finish_range=finish_range,
    )


def _percentiles(values: Sequence[float | None]) -> tuple[float, float] | None:
    known = [v for v in values if v is not None]
    if len(known) < len(values) or not known:
        return None  # some sample never starts or finishes it: no honest upper bound
    low, high = np.percentile(known, [10, 90])
    return float(low), float(high)


def _median(values: Sequence[float | None]) -> float | None:
    known = sorted(v for v in values if v is not None)
    if len(known) * 2 <= len(values) or not known:
        return None  # not in most samples
    return float(np.median(known))


# --- future arrivals ------------------------------------------------------------------


def sample_arrivals(recent: Sequence[WorkloadJob], window_seconds: float, now: float, horizon_seconds: float,
                    seed: int) -> list[WorkloadJob]:
    """A seeded sample of the jobs that may arrive in the next ``horizon_seconds``: a Poisson process at the
    rate of ``recent`` (the jobs submitted in the last ``window_seconds``), each arrival a copy of one of them
    drawn at random (a bootstrap of the recent mix). Empty without recent jobs."""
    if not recent or window_seconds <= 0 or horizon_seconds <= 0:
        return []
    rng = random.Random(seed)
    rate = len(recent) / window_seconds
    arrivals: list[WorkloadJob] = []
    at = now
    limit = 10 * len(recent) + 100  # bounded whatever the rates: ten windows' worth at most
    while len(arrivals) < limit:
        at += rng.expovariate(rate)
        if at > now + horizon_seconds:
            break
        template = rng.choice(recent)
        arrivals.append(dataclasses.replace(template, id=f"{ARRIVAL_PREFIX}{seed}:{len(arrivals)}", submit_time=at))
    return arrivals


def predicted_rigid(job: WorkloadJob, served: float, predicted: float, remaining: float) -> WorkloadJob:
    """A job without a profile as a forecast runs it: ``served`` seconds done (its progress) and ``remaining``
    still to run (``RuntimePredictor.remaining`` of its ``predicted`` seconds), in seconds at its GPUs."""
    return dataclasses.replace(job, total_work=served + remaining, expected_seconds=predicted)


def horizon_of(estimates: Mapping[str, Estimate], now: float) -> float:
    """Seconds until the last current job finishes in a point forecast (at least an hour)."""
    ends = [e.finish for e in estimates.values() if e.finish is not None and math.isfinite(e.finish)]
    return max(max(ends, default=now) - now, 3600.0)
