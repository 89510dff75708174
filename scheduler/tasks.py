"""Celery tasks of the scheduler: thin wrappers around ``scheduler.live`` (the round), ``scheduler.whatif`` and the
forecasts."""

from typing import Any

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from scheduler import demo, lab_examples, whatif
from scheduler.backends.local import agent
from scheduler.backends.local.executor import APPLY_TASK, POLL_TASK
from scheduler.forecasting import forecasts, runtime_models
from scheduler.live import forecast_requests, start_requests

from .live import config as live_config
from .live import round as rounds

RECOVER_TASK = "scheduler.recover_whatifs"


@shared_task(name=live_config.ROUND_TASK, ignore_result=True)
def run_round() -> int | None:
    """One scheduling round (beat sends one every ``SchedulerSettings.round_seconds``); returns its id."""
    row = rounds.run_round()
    return row.pk if row else None


@shared_task(name=start_requests.START_TASK, ignore_result=True)
def start_between_rounds() -> int | None:
    """Starts of waiting jobs on idle GPUs, every running job kept (a submission or a cancel that frees GPUs sends
    it); the row's id, if any."""
    row = rounds.start_between_rounds()
    return row.pk if row else None


@shared_task(name=whatif.RUN_TASK, acks_late=True, ignore_result=True,
             soft_time_limit=settings.WHATIF_TIME_LIMIT_SECONDS,
             time_limit=settings.WHATIF_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS)
def run_whatif(run_id: int) -> None:
    """Simulate one queued what-if run; a redelivered or repeated task returns early. Past its soft time limit the
    run is failed with the reason; a run killed at the hard limit is failed or requeued by ``recover_whatifs``."""
    whatif.execute_run(run_id)


@shared_task(name=RECOVER_TASK, ignore_result=True)
def recover_whatifs() -> dict[str, int]:
    """Resend what-ifs the broker lost, requeue or fail those whose worker was lost (beat, ``RECOVER_SECONDS``)."""
    return whatif.recover_runs(timezone.now())


# Sweeps no longer end in a chord (the last run compares); kept for messages sent by an earlier version.
@shared_task(name=whatif.FINISH_SWEEP_TASK)
def finish_sweep(sweep_id: int) -> None:
    """Fill a sweep's comparison once its runs have finished (the callback of ``whatif.launch_sweep``)."""
    whatif.compare_sweep(sweep_id)


@shared_task(name=demo.FEED_TASK, ignore_result=True)
def feed_demo() -> int:
    """Submit the demo trace's jobs whose arrival time has come (beat, while a demo feed exists)."""
    return demo.feed_demo(settings.TRACES_DIR, timezone.now())


@shared_task(name=lab_examples.LATE_TASK, ignore_result=True)
def submit_late_examples(**_held: Any) -> int:
    """Submit a lab's example jobs whose arrival time has come (beat, while its entry exists). The entry's own
    specifications, read under a lock, are the truth: a message beat sent earlier may be stale."""
    return lab_examples.submit_late_examples(timezone.now())


# --- node agents (scheduler/backends/local/agent.py): workers consuming node.<hostname> -----------


@shared_task(name=APPLY_TASK, acks_late=True, ignore_result=True)
def node_apply(message: dict) -> str:
    """Run this node's ranks of one launch of the local executor; a repeated or stale one is ignored."""
    return agent.apply(message)


@shared_task(name=POLL_TASK, ignore_result=True)
def node_poll() -> dict[int, str]:
    """Record in the database the jobs whose ranks on this node have finished or failed."""
    return agent.poll()


# --- forecasts (scheduler/forecasting/forecasts.py), on the background queue --------------------------


@shared_task(name=forecast_requests.FORECAST_TASK, ignore_result=True, expires=settings.FORECAST_TIME_LIMIT_SECONDS,
             soft_time_limit=settings.FORECAST_TIME_LIMIT_SECONDS,
             time_limit=settings.FORECAST_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS)
def forecast() -> int | None:
    """Forecast the queue when it, the inventory or the settings changed, or the last forecast is stale (beat,
    every round interval); a lost or killed one is simply made at the next beat. Returns the forecast's id."""
    row = forecasts.refresh(catching_up=True)
    return row.pk if row else None


@shared_task(name=forecast_requests.FORECAST_SOON_TASK, bind=True, ignore_result=True, max_retries=30,
             expires=settings.FORECAST_TIME_LIMIT_SECONDS, soft_time_limit=settings.FORECAST_TIME_LIMIT_SECONDS,
             time_limit=settings.FORECAST_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS)
def forecast_soon(self: Any) -> int | None:
    """Forecast the queue because it changed (``scheduler.live.forecast_requests``): a point forecast (under a second
    for the demo's queue, where arrival samples take seconds more), so a new job has its estimate within seconds,
    followed at once by the forecast with arrivals when they are assumed. While another forecast is being made,
    wait for it and try again, so that the change is not left to the next beat."""
    try:
        row = forecasts.refresh(busy_raises=True, samples=0)
    except forecasts.ForecastBusy as busy:
        raise self.retry(countdown=forecast_requests.DEBOUNCE_SECONDS, exc=busy) from None
    if row is not None and forecasts.arrival_samples_for(row.made_at):
        forecast_requests.follow_with_arrivals()
    return row.pk if row else None


@shared_task(name=live_config.TRAIN_TASK, ignore_result=True, soft_time_limit=settings.FORECAST_TIME_LIMIT_SECONDS,
             time_limit=settings.FORECAST_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS)
def train_runtimes() -> int | None:
    """Train the next runtime model on the finished jobs (beat, hourly); its version, or None (too few jobs)."""
    model = runtime_models.train_runtime_model()
    return model.pk if model else None
