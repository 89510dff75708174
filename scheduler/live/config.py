"""The live scheduler's settings: the one row, and the ``SchedulingConfig`` the round, the forecast and the
preview run under. Changed only through ``scheduler.schedule.update_settings`` (API, admin and beat alike)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from ..core.config import SchedulingConfig
from ..models import ExecutorKind, SchedulerSettings


def scheduler_settings() -> SchedulerSettings:
    """The one settings row, created with the defaults (and ``ROUND_SECONDS``) on first use."""
    row, _ = SchedulerSettings.objects.get_or_create(pk=1, defaults={"round_seconds": settings.ROUND_SECONDS})
    return row


def scheduling_config(row: SchedulerSettings | None = None, **overrides: Any) -> SchedulingConfig:
    """The configuration live rounds run under; ``overrides`` (e.g. another ``policy`` for a preview) replace
    fields. Times are on the wall clock, the round's: the simulated executor runs jobs ``simulated_speedup``
    times faster, restarts included, so the delay it charges on the wall is ``restart_seconds / speedup``."""
    row = row or scheduler_settings()
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
