"""Beat's entries for telemetry: roll-ups every minute, pruning every hour; collection every ``TELEMETRY_SECONDS``."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from .collector import COLLECT_NODES_TASK
from .prometheus import COLLECT_PROMETHEUS_TASK
from .simulated import COLLECT_SIMULATED_TASK
from .tasks import PRUNE_TASK, ROLL_UP_TASK

# name: (task, seconds between runs)
ENTRIES = {"telemetry-roll-up": (ROLL_UP_TASK, 60), "telemetry-prune": (PRUNE_TASK, 3600)}


def sync_telemetry_schedule() -> None:
    """Create or update telemetry's beat entries (idempotent); an entry disabled in admin stays disabled."""
    for name, (task, seconds) in ENTRIES.items():
        every = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)[0]
        PeriodicTask.objects.update_or_create(
            name=name, defaults={"task": task, "interval": every, "args": json.dumps([])}
        )


# --- collection (telemetry/collector.py, telemetry/simulated.py) --------------------------------
# ``telemetry-collect`` (every installation, from ``manage.py sync_schedules``): every ``TELEMETRY_SECONDS`` one
# ``telemetry.collect`` to the queue of each node whose agent collected lately (``collector.send_collects``).
# ``telemetry-simulated`` (the demo cluster only, from its seed): simulated samples of every GPU, since the demo has
# no node agents. Both reset only task and interval: an entry disabled in admin stays disabled.
COLLECT_SCHEDULE_NAME = "telemetry-collect"
SIMULATED_SCHEDULE_NAME = "telemetry-simulated"


def sync_collect_schedule() -> PeriodicTask:
    """The collection entry: the fan-out that makes node agents collect, or with ``TELEMETRY_SOURCE=prometheus``
    one pass over the operator's Prometheus (``telemetry.prometheus``)."""
    task = COLLECT_PROMETHEUS_TASK if settings.TELEMETRY_SOURCE == "prometheus" else COLLECT_NODES_TASK
    return _every_telemetry_interval(COLLECT_SCHEDULE_NAME, task)


def sync_simulated_schedule() -> PeriodicTask:
    """The simulated source's entry (the demo cluster)."""
    return _every_telemetry_interval(SIMULATED_SCHEDULE_NAME, COLLECT_SIMULATED_TASK)


def _every_telemetry_interval(name: str, task: str) -> PeriodicTask:
    with transaction.atomic():
        every, _ = IntervalSchedule.objects.get_or_create(
            every=settings.TELEMETRY_SECONDS, period=IntervalSchedule.SECONDS
        )
        entry, _ = PeriodicTask.objects.update_or_create(
            name=name,
            # A sample not started within one interval is dropped, not queued behind the next one.
            defaults={"task": task, "interval": every, "args": json.dumps([]),
                      "expire_seconds": settings.TELEMETRY_SECONDS},
        )
    return entry
