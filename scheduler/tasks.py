"""Celery tasks of the scheduler: thin wrappers around ``scheduler.rounds`` and ``scheduler.whatif``."""

from celery import shared_task

from . import rounds, whatif


@shared_task(name=rounds.ROUND_TASK, ignore_result=True)
def run_round() -> int | None:
    """One scheduling round (beat sends one every ``SchedulerSettings.round_seconds``); returns its id."""
    row = rounds.run_round()
    return row.pk if row else None


@shared_task(name=whatif.RUN_TASK, acks_late=True)
def run_whatif(run_id: int) -> None:
    """Simulate one queued what-if run; a redelivered or repeated task returns early."""
    whatif.execute_run(run_id)


@shared_task(name=whatif.FINISH_SWEEP_TASK)
def finish_sweep(sweep_id: int) -> None:
    """Fill a sweep's comparison once its runs have finished (the callback of ``whatif.launch_sweep``)."""
    whatif.compare_sweep(sweep_id)
