"""The scheduler's settings at run time: the active policy, the round interval, the executor.

Changed through ``update_settings`` (admin uses it): each change is validated, recorded
as a ``SettingsChange`` and, for the interval, pushed to beat's schedule in the same
transaction, so beat runs rounds at the new interval from its next tick.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from .forecast_requests import FORECAST_TASK, request_forecast
from .live.config import EDITABLE, live_settings, scheduler_settings, settings_errors
from .live.round import ROUND_TASK
from .models import SchedulerSettings, SettingsChange
from .runtime_models import TRAIN_TASK

ROUND_SCHEDULE_NAME = "scheduling-round"
FORECAST_SCHEDULE_NAME, TRAIN_SCHEDULE_NAME = "forecast", "train-runtime-model"
TRAIN_EVERY_SECONDS = 3600


def validate_settings(row: SchedulerSettings) -> None:
    """Field errors for a settings row (``live.config.settings_errors``) as a ``ValidationError``."""
    errors = settings_errors(row)
    if errors:
        raise ValidationError(errors)


def update_settings(actor: User | AnonymousUser | None = None, **changes: Any) -> SchedulerSettings:
    """Change scheduler settings; records one ``SettingsChange`` per field that really changed."""
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise ValidationError({name: "Not a scheduler setting." for name in unknown})
    with transaction.atomic():
        row = SchedulerSettings.objects.select_for_update().get(pk=scheduler_settings().pk)
        before = {name: getattr(row, name) for name in EDITABLE}
        for name, value in changes.items():
            setattr(row, name, value)
        validate_settings(row)
        row.last_valid = {name: getattr(row, name) for name in EDITABLE}
        row.save()
        record_changes(before, row, actor)
        request_forecast("a settings change")
    return row


def record_changes(before: dict[str, Any], row: SchedulerSettings, actor: User | AnonymousUser | None) -> None:
    """Audit what changed between ``before`` and ``row`` (saved) and resync beat if the interval moved."""
    now = timezone.now()
    user = actor if isinstance(actor, User) else None
    changed = [name for name in EDITABLE if before[name] != getattr(row, name)]
    SettingsChange.objects.bulk_create(
        SettingsChange(at=now, field=name, old_value=_shown(before[name]), new_value=_shown(getattr(row, name)),
                       actor=user)
        for name in changed
    )
    if {"round_seconds", "paused"} & set(changed):
        sync_round_schedule(row)


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)
    return text if len(text) <= 100 else text[:99] + "…"


def sync_round_schedule(row: SchedulerSettings | None = None) -> PeriodicTask:
    """Make beat's round entry match the settings: its interval, and disabled while paused (a refused stored value
    never reaches beat: ``live_settings``)."""
    row = live_settings(row)[0]
    every, _ = IntervalSchedule.objects.get_or_create(every=row.round_seconds, period=IntervalSchedule.SECONDS)
    task, _ = PeriodicTask.objects.update_or_create(
        name=ROUND_SCHEDULE_NAME,
        # A round not started within its interval is dropped: with no round worker up, beat must not pile rounds up.
        defaults={"task": ROUND_TASK, "interval": every, "args": json.dumps([]), "enabled": not row.paused,
                  "expire_seconds": row.round_seconds},
    )
    sync_forecast_schedule(every)
    return task


def sync_forecast_schedule(every: IntervalSchedule) -> None:
    """Beat checks every round interval whether the forecast is stale (``forecasts.refresh``) and trains the
    runtime model hourly; both on the background queue, neither piling up when no worker takes them."""
    hourly, _ = IntervalSchedule.objects.get_or_create(every=TRAIN_EVERY_SECONDS, period=IntervalSchedule.SECONDS)
    for name, task, interval in ((FORECAST_SCHEDULE_NAME, FORECAST_TASK, every),
                                 (TRAIN_SCHEDULE_NAME, TRAIN_TASK, hourly)):
        PeriodicTask.objects.update_or_create(name=name, defaults={
            "task": task, "interval": interval, "args": json.dumps([]), "expire_seconds": interval.every})
