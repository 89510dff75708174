"""The restart delay the policies price, measured on this cluster.

A rescale or a resumed preemption costs a job the time from the round's requeue until it trains again: Slurm's
requeue (SIGTERM, checkpoint, ``KillWait``), its start on the new nodes, and the job's own start-up until its
first progress report. Each one the executor sees finish is measured (``measure``); once ``MIN_MEASURED`` are
known, the median of the last ``KEPT`` becomes the scheduler's ``restart_seconds`` (an audited settings change),
so Pollux and Sia price what a restart really costs here instead of a default.
"""

from __future__ import annotations

import statistics
from datetime import datetime

from django.db import transaction

from ..models import JobReport, RescaleEvent, RescaleKind, RoundMemory, SchedulerSettings
from ..schedule import update_settings

KEPT = 20
MIN_MEASURED = 3
CHANGE_FRACTION = 0.1  # the setting follows the measured median only when it moved by more than this
MAX_PLAUSIBLE_SECONDS = 3600.0  # a job held for an hour (preempted, waiting) is not a restart delay


def measure(job_id: int, running_since: datetime) -> float | None:
    """Seconds from the job's last rescale or restart decision until it trained again, if it can be told."""
    decided = RescaleEvent.objects.filter(job_id=job_id, kind__in=[RescaleKind.RESCALE, RescaleKind.START]).order_by(
        "-at").values_list("at", flat=True).first()
    if decided is None or running_since < decided:
        return None
    first_report = JobReport.objects.filter(job_id=job_id, at__gte=running_since).order_by("at").values_list(
        "at", flat=True).first()
    seconds = ((first_report or running_since) - decided).total_seconds()
    return seconds if 0 <= seconds <= MAX_PLAUSIBLE_SECONDS else None


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
