"""The live scheduler's settings: the one row, and the ``SchedulingConfig`` the round, the forecast and the
preview run under. Changed only through ``scheduler.schedule.update_settings`` (API, admin and beat alike)."""

from __future__ import annotations

import copy
import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from ..core.config import SchedulingConfig, policy_config_errors, policy_names
from ..models import ExecutorKind, SchedulerSettings

logger = logging.getLogger(__name__)
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
    return errors


def policy_errors(policy: str, policy_config: Any) -> dict[str, list[str]]:
    """A field error for an unknown policy, or for a configuration the policy refuses (unknown setting, bad value)."""
    if policy not in policy_names():
        return {"policy": [f"Unknown policy {str(policy)[:50]!r}; known: {', '.join(policy_names())}."]}
    problem = policy_config_errors(policy, policy_config if policy_config is not None else {})
    return {"policy_config": [f"Not a configuration of {policy}: {problem}"]} if problem else {}


def live_settings(row: SchedulerSettings | None = None) -> tuple[SchedulerSettings, dict[str, list[str]]]:
    """The settings rounds, forecasts and beat run under, and the stored values refused on the way.

    Every change is validated before it is saved (``schedule.update_settings``), but a value can still reach the
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
    if "policy" in overrides and overrides["policy"] != row.policy:
        fields["policy_config"] = {}  # the row's configuration is the row's policy's
    return SchedulingConfig(**(fields | overrides))


def simulated_speedup(row: SchedulerSettings) -> float:
    """How many times faster than the wall jobs run: the simulated executor's speed-up, else 1."""
    return row.simulated_speedup if row.executor == ExecutorKind.SIMULATED else 1.0
