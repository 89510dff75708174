"""Celery tasks of the scheduler: thin wrappers around ``scheduler.whatif``."""

from celery import shared_task

from . import whatif


@shared_task(name=whatif.RUN_TASK, acks_late=True)
def run_whatif(run_id: int) -> None:
    """Simulate one queued what-if run; a redelivered or repeated task returns early."""
    whatif.execute_run(run_id)


@shared_task(name=whatif.FINISH_SWEEP_TASK)
def finish_sweep(sweep_id: int) -> None:
    """Fill a sweep's comparison once its runs have finished (the callback of ``whatif.launch_sweep``)."""
    whatif.compare_sweep(sweep_id)
