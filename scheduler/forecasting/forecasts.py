"""The live forecast: the cluster as the database has it, run forward through ``scheduler.sim.forecast``.

Made on the reports queue: ``scheduler.forecast_soon`` a few seconds after the queue changes (a submission, a
cancel, a round that started or finished jobs, a settings change: ``scheduler.live.forecast_requests``), a point
forecast so that a new job has its estimate within seconds, followed at once by one with arrivals when they are
assumed; and ``scheduler.forecast``, sent by beat every round interval as a safety net: made again when the last
one is ``REFRESH_ROUNDS`` rounds old, assumed other arrivals than this one would, or the queue, the inventory or
the settings changed (their digest) and the last forecast is a round interval old; otherwise a no-op.

**Arrivals**: with ``FORECAST_ARRIVALS=auto`` (the default) forecasts assume new jobs keep arriving like the
recent ones whenever their rate is steady (``arrivals_are_steady``), sampled ``FORECAST_ARRIVAL_SAMPLES`` times up
to a little past the last waiting job's start (``arrival_reach``); every estimate says which it assumed
(``assumption``). Each forecast is stored whole (``Forecast`` and one ``JobForecast`` per job) in one transaction,
with the time it was made; the last ``KEEP_FORECASTS`` are kept.

Clock and units. Forecasts run on the wall clock (epoch seconds), so the policy's own memory (its
``PolicyState``) reads as it does in the live round. Under the simulated executor, which runs jobs
``simulated_speedup`` times faster than the wall, a job's work and the restart delay are divided by the
speed-up. A job without a profile runs its predicted service seconds (``runtime_predictor``).

The runtime predictor and its stored models: ``scheduler.forecasting.runtime_models``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduler.backends import get_backend
from scheduler.bulk import update_many
from scheduler.core.config import SchedulingConfig, build_policy
from scheduler.core.types import ClusterSnapshot, JobInfo
from scheduler.forecasting.runtime_models import FEATURE_FIELDS, job_features, runtime_predictor
from scheduler.live.config import live_settings, scheduling_config, simulated_speedup
from scheduler.live.lease import lease_holder, release_lease, take_lease
from scheduler.live.memory import load_round_state
from scheduler.live.snapshot import LiveSnapshot, build_snapshot
from scheduler.models import (
    QUEUED_STATES,
    Forecast,
    Job,
    JobForecast,
    SchedulerSettings,
    SchedulingRound,
    Tenant,
)
from scheduler.sim.config import SimConfig
from scheduler.sim.forecast import Estimate, ForecastInput, forecast, predicted_rigid, sample_arrivals
from scheduler.sim.records import WorkloadJob
from scheduler.sim.runtimes import RuntimePredictor
from scheduler.sim.start import RunningJob, StartState

logger = logging.getLogger(__name__)

FORECAST_LEASE = "forecast"
# The columns a forecast reads of each job beyond the round's, in the snapshot's one query.
FORECAST_FIELDS = (*FEATURE_FIELDS, "started_at", "restart_until", "policy_batch_size")
REFRESH_ROUNDS = 5  # a forecast at least every this many round intervals, even when nothing changed
KEEP_FORECASTS = 20
HORIZON_SECONDS = 30 * 86_400.0  # a forecast looks this far ahead at most: bounded work whatever the queue
MOVED_SECONDS = 600.0  # a start that moved by more than this (and by a quarter of the wait) says why
ARRIVAL_WINDOW_SECONDS = 3 * 86_400.0  # arrivals are sampled from the jobs submitted in the last three days
ARRIVAL_HORIZON_SECONDS = 86_400.0  # ... for at most the next day (a sample stops at 3 × the point forecast's end)
MIN_ARRIVAL_REACH_SECONDS = 600.0  # ... and at least the next ten minutes (``arrival_reach``)
MAX_SAMPLE_ARRIVALS = 100  # arrivals in one sample: bounded work whatever the rate
MAX_RECENT_JOBS = 5_000  # the most recent of them: bounded whatever the rate
STEADY_BINS = 6  # arrivals_are_steady: slices of the window counted
STEADY_MIN_ARRIVALS = 12  # fewer arrivals say nothing of a rate
# A steady feed: a Poisson process whose rate drifts by at most this share of its mean across the window. Its
# slices' counts then vary by at most mean + (share × mean)² (Poisson noise plus the drift): real traces (the
# demo's Philly replay: 65–100 arrivals per slice) pass; a burst and a feed that stopped (16 and 3 times that) do not.
STEADY_RATE_DRIFT = 0.5


# --- the forecast -------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveForecastInput:
    given: ForecastInput
    predicted_seconds: Mapping[int, float]  # job pk → predicted service seconds (jobs without a profile)
    usable_gpus: int
    digest: str


class ForecastBusy(Exception):
    """Another forecast is being made (``refresh(busy_raises=True)``)."""


def refresh(now: datetime | None = None, *, force: bool = False, samples: int | None = None,
            busy_raises: bool = False, catching_up: bool = False) -> Forecast | None:
    """Make and store a forecast if the last one is stale (module docstring) or ``force``; else None, and None
    while another forecast is being made (``ForecastBusy`` with ``busy_raises``): one at a time, under a lease
    that outlives a forecast's hard limit. ``samples``: arrival samples (None: ``arrival_samples_for``).
    ``catching_up`` (the beat's): a change of the queue is left to the forecast it asked for, unless the last
    forecast is a round interval old (that request was lost); the beat's own forecast fell on the round's tick,
    when the demo's feed lands, and held up the forecast of what it brought."""
    holder = lease_holder()
    if not take_lease(FORECAST_LEASE, holder, settings.FORECAST_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS):
        logger.info("forecast skipped: another one is being made")
        if busy_raises:
            raise ForecastBusy
        return None
    try:
        return _refresh(now or timezone.now(), force, samples, catching_up)
    finally:
        release_lease(FORECAST_LEASE, holder)


def _refresh(now: datetime, force: bool, samples: int | None, catching_up: bool = False) -> Forecast | None:
    row, _ = live_settings()
    config = forecast_scheduling(row)
    live = build_snapshot(now, job_fields=FORECAST_FIELDS)  # the jobs are read once, here
    last = Forecast.objects.first()
    digest = _digest(live.snap, config, simulated_speedup(row))
    fresh_for = timedelta(seconds=REFRESH_ROUNDS * row.round_seconds)
    samples = arrival_samples_for(now) if samples is None else samples
    # Stale: the queue, inventory or settings changed, it is old, or it assumed other arrivals than this one would
    # (a quick point forecast after a queue change is followed by one with arrivals).
    if not force and last is not None:
        age = now - last.made_at
        changed = last.digest != digest and not (catching_up and age < timedelta(seconds=row.round_seconds))
        if not changed and age < fresh_for and last.samples == samples:
            return None
    predictor, version = runtime_predictor()
    given = live_input(live, config, simulated_speedup(row), predictor, digest)
    policy = build_policy(config)
    result = forecast(given.given, policy)
    arrivals: list[list[WorkloadJob]] = []
    if samples:
        reach = arrival_reach(result.estimates, now.timestamp())
        arrivals = _arrival_samples(now, live.snap, row, predictor, samples, reach)
        if arrivals:
            wall = result.wall_seconds
            result = forecast(given.given, policy, arrivals)
            result = dataclasses.replace(result, wall_seconds=result.wall_seconds + wall)
    return _store(now, row, config.policy, given, result.estimates, len(arrivals), result.wall_seconds, version,
                  last)


def forecast_scheduling(row: SchedulerSettings) -> SchedulingConfig:
    """The scheduling a forecast runs: the console's own; or, where the cluster's scheduler decides (an observer),
    the back-end's model of that scheduler (``Backend.forecast_model``: Slurm's backfill on an observed Slurm)."""
    config = scheduling_config(row)
    model = get_backend(row.executor).forecast_model
    return model(config) if model is not None else config


def arrival_reach(estimates: Mapping[str, Estimate], now: float) -> float:
    """How far ahead arrivals are sampled: a quarter beyond the point forecast's last start of a waiting job
    (arrivals after every current job has started cannot delay a start; sampling a day of them made each sample
    simulate thousands of jobs), at least ``MIN_ARRIVAL_REACH_SECONDS``, at most ``ARRIVAL_HORIZON_SECONDS``."""
    starts = [e.start for e in estimates.values() if e.start is not None and math.isfinite(e.start)]
    last = max(starts, default=now) - now
    return min(ARRIVAL_HORIZON_SECONDS, max(MIN_ARRIVAL_REACH_SECONDS, 1.25 * last))


def _digest(snap: ClusterSnapshot, config: SchedulingConfig, speedup: float) -> str:
    """What a forecast depends on beyond time: the jobs and what they hold, the usable GPUs, the settings."""
    parts = {
        "jobs": sorted((job.id, job.placement, job.expected_seconds or 0.0) for job in snap.jobs),
        "usable": sorted(snap.index.usable), "settings": _settings_of(config, speedup),
    }
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _settings_of(config: SchedulingConfig, speedup: float) -> dict[str, Any]:
    return {"policy": config.policy, "policy_config": dict(config.policy_config),
            "round_seconds": config.round_seconds, "restart_seconds": config.restart_seconds, "speedup": speedup}


def live_input(live: LiveSnapshot, config: SchedulingConfig, speedup: float, predictor: RuntimePredictor,
               digest: str = "") -> LiveForecastInput:
    """The snapshot as a forecast's input: work in wall-clock units, jobs without a profile at their predicted
    length, running jobs on their GPUs at the policy's batch with their restart delays, the rounds' memory.
    Everything about the jobs comes from the snapshot's own read (``FORECAST_FIELDS``)."""
    snap, rows = live.snap, live.rows
    rigid = [job for job in snap.jobs if job.profile is None]
    predictions = predictor.predict_many([job_features(rows[job.id]) for job in rigid])
    predicted = dict(zip((int(job.id) for job in rigid), (p.seconds for p in predictions), strict=True))
    jobs, running, progress, attained = [], {}, {}, {}
    for info in snap.jobs:
        row = rows[info.id]
        work, done = _work(info, predictor, predicted, speedup)
        jobs.append(work)
        if info.placement:
            started = (row["started_at"] or timezone.now()).timestamp()
            restart_until = row["restart_until"].timestamp() if row["restart_until"] else 0.0
            running[info.id] = RunningJob(info.placement, started, done, info.attained_gpu_seconds, restart_until,
                                          info.restarts, row["policy_batch_size"])
        elif done > 0:
            progress[info.id], attained[info.id] = done, info.attained_gpu_seconds
    start = StartState(snap.now, running, progress, attained, load_round_state(config.policy))
    # Restart delays are already on the wall clock (live.config.scheduling_config); the simulator reads no reason.
    rounds = dataclasses.replace(config, cycle=dataclasses.replace(config.cycle, explain_counts=False))
    sim = SimConfig.of(rounds, horizon=snap.now + HORIZON_SECONDS, round_phase=round_phase(config.round_seconds))
    given = ForecastInput(tuple(jobs), snap.nodes, snap.tenants, snap.profiles, start, sim)
    return LiveForecastInput(given, predicted, snap.usable_gpus, digest)


def round_phase(round_seconds: float) -> float:
    """Where the live rounds fall in their interval (the last round's start, modulo the interval): the forecast's
    rounds fall there too."""
    rounds = SchedulingRound.objects.rounds_only().order_by("-pk")  # in order; not starts between them
    last = rounds.values_list("started_at", flat=True).first()
    return last.timestamp() % round_seconds if last is not None else 0.0


def _work(info: JobInfo, predictor: RuntimePredictor, predicted: Mapping[int, float],
          speedup: float) -> tuple[WorkloadJob, float]:
    """(the job as the forecast runs it, its progress in those units)."""
    job = WorkloadJob(id=info.id, submit_time=max(info.submit_time, 0.0), tenant=info.tenant,
                      min_gpus=info.min_gpus, max_gpus=info.max_gpus, total_work=info.total_work / speedup,
                      profile=info.profile, batch_size=info.batch_size, gpu_type=info.gpu_type,
                      priority=info.priority, time_limit=info.time_limit)
    if info.profile is not None:
        return job, info.progress / speedup
    served = info.attained_gpu_seconds / info.min_gpus
    seconds = predicted[int(info.id)]
    return predicted_rigid(job, served, seconds, predictor.remaining(seconds, served)), served


def arrival_window(now: datetime) -> tuple[datetime, list[datetime]]:
    """The span arrivals are learnt from — the last ``ARRIVAL_WINDOW_SECONDS``, or since the first submission
    when the cluster is younger (a rate over three days of a one-hour-old cluster would be 72 times too low), or
    since the earliest of the latest ``MAX_RECENT_JOBS`` — and the submission times in it."""
    since = now - timedelta(seconds=ARRIVAL_WINDOW_SECONDS)
    times = list(Job.objects.filter(submitted_at__gte=since, submitted_at__lt=now).order_by("-submitted_at")
                 .values_list("submitted_at", flat=True)[:MAX_RECENT_JOBS])
    first = Job.objects.filter(submitted_at__lt=now).order_by("submitted_at").values_list("submitted_at",
                                                                                          flat=True).first()
    if len(times) == MAX_RECENT_JOBS:
        first = times[-1]  # a rate over the jobs kept, not over a window they do not fill
    return (max(since, first) if first is not None else now), times


def arrivals_are_steady(now: datetime) -> bool:
    """Whether jobs arrive at a steady rate: at least ``STEADY_MIN_ARRIVALS`` in the window, and their counts in
    ``STEADY_BINS`` equal slices of it no more varied than a Poisson feed whose rate drifts by
    ``STEADY_RATE_DRIFT`` of its mean (variance ≤ mean + (drift × mean)²)."""
    since, times = arrival_window(now)
    span = (now - since).total_seconds()
    if len(times) < STEADY_MIN_ARRIVALS or span <= 0:
        return False
    counts = [0] * STEADY_BINS
    for at in times:
        counts[min(STEADY_BINS - 1, int((at - since).total_seconds() / span * STEADY_BINS))] += 1
    mean = len(times) / STEADY_BINS
    variance = sum((count - mean) ** 2 for count in counts) / (STEADY_BINS - 1)
    return variance <= mean + (STEADY_RATE_DRIFT * mean) ** 2


def arrival_samples_for(now: datetime) -> int:
    """How many arrival samples a forecast runs: ``FORECAST_ARRIVAL_SAMPLES`` when ``FORECAST_ARRIVALS`` is
    ``always``, or ``auto`` and arrivals are steady (``arrivals_are_steady``); else none (the queue as it is)."""
    mode, samples = settings.FORECAST_ARRIVALS, settings.FORECAST_ARRIVAL_SAMPLES
    if mode == "never" or samples == 0:
        return 0
    return samples if mode == "always" or arrivals_are_steady(now) else 0


def _arrival_samples(now: datetime, snap: ClusterSnapshot, config: SchedulerSettings, predictor: RuntimePredictor,
                     samples: int, reach: float) -> list[list[WorkloadJob]]:
    """Future arrivals like the jobs submitted in the arrival window (``arrival_window``; whatever their state
    now), at their rate, for the next ``reach`` seconds: one seeded sample per seed, each of at most
    ``MAX_SAMPLE_ARRIVALS``. Each arrives fresh: its whole work, or its predicted length without a profile."""
    since, _ = arrival_window(now)
    window = (now - since).total_seconds()
    if window <= 0:
        return []
    rows = list(Job.objects.filter(submitted_at__gte=since, submitted_at__lt=now).order_by("-submitted_at", "-id")
                .values(*FEATURE_FIELDS, "workload_profile", "total_work", "max_gpus", "batch_size")[:MAX_RECENT_JOBS])
    speedup = simulated_speedup(config)
    lengths = predictor.predict_many([job_features(row) for row in rows])
    recent = [WorkloadJob(
        id=f"recent:{row['pk']}", submit_time=row["submitted_at"].timestamp(), tenant=row["tenant__name"],
        min_gpus=row["min_gpus"], max_gpus=row["max_gpus"], batch_size=row["batch_size"],
        gpu_type=row["gpu_type"] or None, **_fresh_work(row, snap, length.seconds, speedup),
    ) for row, length in zip(rows, lengths, strict=True)]
    return [sample_arrivals(recent, window, now.timestamp(), reach, seed)[:MAX_SAMPLE_ARRIVALS]
            for seed in range(samples)]


def _fresh_work(row: Mapping[str, Any], snap: ClusterSnapshot, predicted: float, speedup: float) -> dict[str, Any]:
    if row["workload_profile"] in snap.profiles:
        return {"profile": row["workload_profile"], "total_work": row["total_work"] / speedup}
    return {"profile": None, "total_work": predicted, "expected_seconds": predicted}


# --- storing, and why a job's forecast moved ----------------------------------------------


def _store(now: datetime, config: SchedulerSettings, policy: str, live: LiveForecastInput,
           estimates: Mapping[str, Estimate], samples: int, wall_seconds: float, version: int | None,
           last: Forecast | None) -> Forecast:
    previous = _previous(last)
    with transaction.atomic():
        row = Forecast.objects.create(
            made_at=now, policy=policy, round_seconds=config.round_seconds,
            restart_seconds=config.restart_seconds, usable_gpus=live.usable_gpus, jobs=len(estimates),
            samples=samples, wall_ms=round(wall_seconds * 1000, 3), digest=live.digest, runtime_model=version,
        )
        why = _Why(last, previous, row, estimates)
        JobForecast.objects.bulk_create(
            (_job_forecast(row, estimate, why) for estimate in estimates.values()), batch_size=500)
        changed = [Job(pk=pk, predicted_seconds=seconds) for pk, seconds in live.predicted_seconds.items()]
        update_many(Job, ["predicted_seconds"], changed)
        stale = list(Forecast.objects.values_list("pk", flat=True)[KEEP_FORECASTS:])
        Forecast.objects.filter(pk__in=stale).delete()
    return row


def _previous(last: Forecast | None) -> dict[int, JobForecast]:
    if last is None:
        return {}
    return {jf.job_id: jf for jf in JobForecast.objects.filter(forecast=last)}


def _at(seconds: float | None) -> datetime | None:
    if seconds is None or not math.isfinite(seconds):
        return None
    return datetime.fromtimestamp(seconds, tz=UTC)


def _job_forecast(row: Forecast, estimate: Estimate, why: _Why) -> JobForecast:
    start_range, finish_range = estimate.start_range or (None, None), estimate.finish_range or (None, None)
    return JobForecast(
        forecast=row, job_id=int(estimate.job_id), estimated_start=_at(estimate.start),
        estimated_finish=_at(estimate.finish), start_p10=_at(start_range[0]), start_p90=_at(start_range[1]),
        finish_p10=_at(finish_range[0]), finish_p90=_at(finish_range[1]),
        after_job_id=int(estimate.after_job) if estimate.after_job else None,
        after_gpus=_freed_gpus(estimate)[:100], moved_because=why.of(estimate)[:255],
    )


def _freed_gpus(estimate: Estimate) -> str:
    """What the job a waiting job waits for frees: '24 A100s', '2 A100s, 4 V100s'."""
    return ", ".join(f"{count} {kind.upper()}{'s' if count != 1 else ''}"
                     for kind, count in sorted(estimate.after_gpus.items()))


def frees_text(row: JobForecast, tenant_ids: set[int] | None = None) -> str:
    """'24 A100s free at ~10:40, when job X (#7) finishes' for a waiting job; the other job named only when it
    belongs to one of ``tenant_ids`` (the viewer's), or for staff (None): tenants see only their own jobs."""
    if row.estimated_start is None or row.after_job_id is None:
        return ""
    when = clock(row.estimated_start)
    after = row.after_job
    if after is not None and (tenant_ids is None or after.tenant_id in tenant_ids):
        name = after.name
        who = f"job {name} (#{row.after_job_id})"
    else:
        who = "another tenant's job"
    return f"{row.after_gpus or 'GPUs'} free at ~{when}, when {who} finishes"


class _Why:
    """Why a waiting job's estimated start moved by more than ``MOVED_SECONDS`` and a quarter of its wait."""

    def __init__(self, last: Forecast | None, previous: Mapping[int, JobForecast], row: Forecast,
                 estimates: Mapping[str, Estimate]) -> None:
        self.last, self.previous, self.row = last, previous, row
        self.new_jobs = {int(job_id): e for job_id, e in estimates.items() if int(job_id) not in previous}

    def of(self, estimate: Estimate) -> str:
        before = self.previous.get(int(estimate.job_id))
        if self.last is None or before is None or before.estimated_start is None or estimate.start is None:
            return ""
        old, new = before.estimated_start.timestamp(), estimate.start
        wait = max(old - self.last.made_at.timestamp(), 0.0)
        if abs(new - old) <= max(MOVED_SECONDS, 0.25 * wait):
            return ""
        direction = f"{'later' if new > old else 'earlier'} by {_duration(abs(new - old))}"
        return f"{direction}: {self._cause(estimate, new > old)}"

    def _cause(self, estimate: Estimate, later: bool) -> str:
        last, row = self.last, self.row
        assert last is not None
        fields = ("policy", "round_seconds", "restart_seconds")
        changed = [f"{name} {getattr(last, name)} → {getattr(row, name)}"
                   for name in fields if getattr(last, name) != getattr(row, name)]
        if changed:
            return "the scheduler settings changed (" + ", ".join(changed) + ")"
        if bool(row.samples) != bool(last.samples):
            return "this forecast assumes new jobs arrive" if row.samples else "this forecast assumes no new arrivals"
        if row.usable_gpus != last.usable_gpus:
            lost = last.usable_gpus - row.usable_gpus
            return f"{abs(lost)} GPU{'s' if abs(lost) != 1 else ''} {'lost or cordoned' if lost > 0 else 'came back'}"
        if later:
            ahead = [job_id for job_id, e in self.new_jobs.items()
                     if e.start is not None and estimate.start is not None and e.start <= estimate.start
                     and job_id != int(estimate.job_id)]
            if ahead:  # not named: it may be another tenant's
                return f"{len(ahead)} new job{'s go' if len(ahead) > 1 else ' goes'} ahead of it"
            return "jobs ahead are running longer than forecast"
        return "jobs ahead finished sooner than forecast"


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes / 60:.1f} h" if minutes < 48 * 60 else f"{minutes / 1440:.0f} days"


def clock(at: datetime, now: datetime | None = None) -> str:
    """A moment as a person reads it: '10:40' today (local time), 'Dec 24 10:40' on another day."""
    local, today = timezone.localtime(at), timezone.localtime(now or timezone.now()).date()
    return f"{local:%H:%M}" if local.date() == today else f"{local:%b %d %H:%M}"


# --- reading ------------------------------------------------------------------------------


def visible_tenant_ids(user: Any) -> set[int] | None:
    """The tenants whose jobs ``user`` may see named in another job's estimate; None for staff (all)."""
    return None if user.is_staff else set(Tenant.objects.visible_to(user).values_list("pk", flat=True))


def latest_for(job_ids: Iterable[int]) -> dict[int, JobForecast]:
    """Each job's estimate in the latest forecast (with its ``forecast`` loaded for ``made_at``)."""
    latest = Forecast.objects.first()
    if latest is None:
        return {}
    rows = JobForecast.objects.filter(forecast=latest, job_id__in=list(job_ids))
    return {row.job_id: row for row in rows.select_related("forecast", "job", "after_job")}


NOT_WITHIN = f"not within {HORIZON_SECONDS / 86_400:.0f} days"  # the forecast's horizon


def starts_in(row: JobForecast | None, now: datetime | None = None) -> str:
    """'starts in ~12 min (p90 25 min)', 'started', or '' without a forecast, for a waiting job."""
    if row is None or row.estimated_start is None:
        return ""
    now = now or timezone.now()
    text = f"starts in ~{_duration(max((row.estimated_start - now).total_seconds(), 0.0))}"
    if row.start_p90 is not None and row.start_p90 > row.estimated_start:
        text += f" (p90 {_duration(max((row.start_p90 - now).total_seconds(), 0.0))})"
    return text



def describe(row: JobForecast, tenant_ids: set[int] | None = None) -> str:
    """A job's estimate in words, for its admin page and the pages: start, finish, ranges, why, as of when."""
    parts = []
    if row.estimated_start is None and row.job.state in QUEUED_STATES:
        parts.append(NOT_WITHIN)
    if row.estimated_start is not None:
        parts.append(f"{starts_in(row)}, at ~{clock(row.estimated_start)}")
    if row.estimated_finish is not None:
        finish = f"ends ~{clock(row.estimated_finish)}"
        if row.finish_p10 is not None and row.finish_p90 is not None:
            finish += f" (p10–p90 {clock(row.finish_p10)}–{clock(row.finish_p90)})"
        parts.append(finish)
    else:
        parts.append("no finish within the forecast")
    if frees := frees_text(row, tenant_ids):
        parts.append(frees)
    if row.moved_because:
        parts.append(f"moved {row.moved_because}")
    parts.append(assumption(row.forecast))
    return "; ".join(parts) + f" (as of {timezone.localtime(row.forecast.made_at):%H:%M:%S})"


def assumption(forecast: Forecast) -> str:
    """What a forecast assumed of jobs not yet submitted."""
    if forecast.samples:
        return f"assumes new jobs keep arriving at the recent rate ({forecast.samples} samples)"
    return "assumes no new jobs arrive (the queue as it is)"
