"""The restart delay the policies price, measured on this cluster.

A rescale or a resumed preemption costs a job the time from the round's requeue until it trains again: on Slurm,
its requeue (SIGTERM, checkpoint, ``KillWait``), its start on the new nodes, and the job's own start-up until its
first progress report. Each one an executor sees finish is measured (``backends.measure_restart``) and handed to
the round (``Executor.measured_restarts``); once ``MIN_MEASURED`` are known, the median of the last ``KEPT``
becomes the scheduler's ``restart_seconds`` (an audited settings change), so Pollux and Sia price what a restart
really costs here instead of a default.
"""

from __future__ import annotations

import statistics

from django.db import transaction

from scheduler.models import RoundMemory, SchedulerSettings

from .config import update_settings

KEPT = 20
MIN_MEASURED = 3
CHANGE_FRACTION = 0.1  # the setting follows the measured median only when it moved by more than this


def record(measured: list[float], row: SchedulerSettings) -> float | None:
    """Keep the new measurements; returns the restart delay the settings now have when it changed."""
    if not measured:
        return None
    with transaction.atomic():
        memory, _ = RoundMemory.objects.select_for_update().get_or_create(pk=1)
        memory.restarts = [*memory.restarts, *(round(seconds, 1) for seconds in measured)][-KEPT:]
        memory.save(update_fields=["restarts", "updated_at"])
    if len(memory.restarts) < MIN_MEASURED:
        return None
    median = round(statistics.median(memory.restarts), 1)
    if abs(median - row.restart_seconds) <= CHANGE_FRACTION * max(row.restart_seconds, 1.0):
        return None
    update_settings(restart_seconds=median)
    return median
