"""The live scheduler's settings, read and written here: the one row, the ``SchedulingConfig`` the round, the
forecast and the preview run under, and the one way to change them.

Changed only through ``update_settings`` (API, admin, beat and the back-ends' measurements alike): each change is
validated, recorded as a ``SettingsChange`` and, for the interval, pushed to beat's schedule in the same
transaction, so beat runs rounds at the new interval from its next tick.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from scheduler.backends import BACKENDS
from scheduler.live.forecast_requests import FORECAST_TASK, request_forecast

from ..core.config import SchedulingConfig, policy_config_errors, policy_names
from ..core.cycle import CycleConfig
from ..models import SchedulerSettings, SettingsChange

logger = logging.getLogger(__name__)
ROUND_TASK = "scheduler.run_round"
TRAIN_TASK = "scheduler.train_runtimes"  # the runtime predictor retrained hourly (forecasting.runtime_models)
EDITABLE = ("policy", "policy_config", "round_seconds", "executor", "simulated_speedup", "restart_seconds", "paused")


def scheduler_settings() -> SchedulerSettings:
    """The one settings row, created with the defaults (and ``ROUND_SECONDS``) on first use."""
    row, _ = SchedulerSettings.objects.get_or_create(pk=1, defaults={"round_seconds": settings.ROUND_SECONDS})
    return row


def settings_errors(row: SchedulerSettings) -> dict[str, list[str]]:
    """Each editable field of ``row`` that breaks its rule, with why: the model's own checks (``scheduler.bounds``),
    a known policy, and a configuration that policy accepts (its keys, their types and ranges). A table constraint
    broken as a whole is also a field's rule broken (each has its field's validator), so only fields are named."""
    errors: dict[str, list[str]] = {}
    try:
        row.full_clean(exclude=["last_valid"])
    except ValidationError as exc:
        errors.update((name, problems) for name, problems in exc.message_dict.items() if name in EDITABLE)
    errors.update(policy_errors(row.policy, row.policy_config))
    if row.executor not in BACKENDS:
        known = ", ".join(sorted(BACKENDS))
        errors["executor"] = [f"Unknown cluster back-end {str(row.executor)[:50]!r}; known: {known}."]
    return errors


def policy_errors(policy: str, policy_config: Any) -> dict[str, list[str]]:
    """A field error for an unknown policy, or for a configuration the policy refuses (unknown setting, bad value)."""
    if policy not in policy_names():
        return {"policy": [f"Unknown policy {str(policy)[:50]!r}; known: {', '.join(policy_names())}."]}
    problem = policy_config_errors(policy, policy_config if policy_config is not None else {})
    return {"policy_config": [f"Not a configuration of {policy}: {problem}"]} if problem else {}


def live_settings(row: SchedulerSettings | None = None) -> tuple[SchedulerSettings, dict[str, list[str]]]:
    """The settings rounds, forecasts and beat run under, and the stored values refused on the way.

    Every change is validated before it is saved (``update_settings``), but a value can still reach the
    row another way (a database restored from an older release, a hand-made UPDATE). Such a value is refused, not
    run: the field takes its last validated value (``last_valid``), else its default, and the refusal is logged
    and exported (``cluster_ops_scheduler_setting_refused``, alerted on), naming the setting.
    """
    row = row or scheduler_settings()
    refused = settings_errors(row)
    if not refused:
        return row, {}
    effective = copy.copy(row)
    for name in refused:
        setattr(effective, name, copy.deepcopy((row.last_valid or {}).get(name, _default(name))))
    for name in settings_errors(effective):  # a last valid value that no longer fits (say, another policy's config)
        setattr(effective, name, _default(name))
    for name, problems in refused.items():
        logger.error("scheduler setting %s refused (%s): running on %r", name, " ".join(problems)[:300],
                     getattr(effective, name))
    return effective, refused


def _default(name: str) -> Any:
    field = SchedulerSettings._meta.get_field(name)
    assert isinstance(field, models.Field)  # the editable fields are plain columns
    return field.get_default()


def scheduling_config(row: SchedulerSettings | None = None, **overrides: Any) -> SchedulingConfig:
    """The configuration live rounds run under; ``overrides`` (e.g. another ``policy`` for a preview) replace
    fields. Times are on the wall clock, the round's: the simulated executor runs jobs ``simulated_speedup``
    times faster, restarts included, so the delay it charges on the wall is ``restart_seconds / speedup``."""
    row = row or live_settings()[0]
    speedup = simulated_speedup(row)
    fields: dict[str, Any] = {
        "policy": row.policy, "policy_config": dict(row.policy_config or {}),
        "round_seconds": float(row.round_seconds), "restart_seconds": float(row.restart_seconds) / speedup,
    }
    backend = BACKENDS.get(row.executor)
    if backend is not None and backend.even_spread:
        fields["cycle"] = CycleConfig(even_spread=True)
    if "policy" in overrides and overrides["policy"] != row.policy:
        fields["policy_config"] = {}  # the row's configuration is the row's policy's
    return SchedulingConfig(**(fields | overrides))


def simulated_speedup(row: SchedulerSettings) -> float:
    """How many times faster than the wall jobs run on the settings' back-end (the simulated one's speed-up)."""
    backend = BACKENDS.get(row.executor)
    return backend.clock_speedup(row) if backend else 1.0


ROUND_SCHEDULE_NAME = "scheduling-round"
FORECAST_SCHEDULE_NAME, TRAIN_SCHEDULE_NAME = "forecast", "train-runtime-model"
TRAIN_EVERY_SECONDS = 3600


def validate_settings(row: SchedulerSettings) -> None:
    """Field errors for a settings row (``settings_errors``) as a ``ValidationError``."""
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
