"""Verbs of the project shell: heartbeats and the periodic-task schedule."""

from __future__ import annotations

import json
import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from .models import Heartbeat

logger = logging.getLogger(__name__)

HEARTBEAT_TASK = "cluster_ops.heartbeat"
RECOVERY_TASKS = {"recover-whatifs": "scheduler.recover_whatifs", "recover-reports": "reports.recover"}


def record_heartbeat(worker: str, now: datetime) -> Heartbeat:
    """Count one heartbeat for ``worker``; returns its row after the update."""
    with transaction.atomic():
        beat, created = Heartbeat.objects.get_or_create(
            worker=worker, defaults={"last_seen_at": now, "beats": 1}
        )
        if not created:
            Heartbeat.objects.filter(pk=beat.pk).update(last_seen_at=now, beats=F("beats") + 1)
            beat.refresh_from_db()
    logger.info("heartbeat #%d from worker %s", beat.beats, worker)
    return beat


def sync_periodic_tasks() -> None:
    """Create or update the beat schedule kept in the database (idempotent).

    Only the interval and task name are reset: an operator who disabled a task in
    admin keeps it disabled.
    """
    with transaction.atomic():
        every = IntervalSchedule.objects.get_or_create(
            every=settings.HEARTBEAT_SECONDS, period=IntervalSchedule.SECONDS
        )[0]
        PeriodicTask.objects.update_or_create(
            name="heartbeat",
            defaults={"task": HEARTBEAT_TASK, "interval": every, "args": json.dumps([])},
        )
        recover = IntervalSchedule.objects.get_or_create(every=settings.RECOVER_SECONDS,
                                                         period=IntervalSchedule.SECONDS)[0]
        for name, task in RECOVERY_TASKS.items():  # lost background work is resent or failed, never left running
            PeriodicTask.objects.update_or_create(
                name=name, defaults={"task": task, "interval": recover, "args": json.dumps([]),
                                     "expire_seconds": settings.RECOVER_SECONDS})
    from scheduler.live.config import sync_round_schedule  # the scheduler app owns its round's schedule
    from telemetry.schedule import sync_collect_schedule, sync_telemetry_schedule  # and telemetry its own

    from .reports.schedule import sync_report_schedule  # the daily and weekly reports

    sync_round_schedule()
    sync_collect_schedule()
    sync_telemetry_schedule()
    sync_report_schedule()
