"""What the pages show of the latest forecast (scheduler/forecasting/forecasts.py), for the jobs a viewer sees."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone

from scheduler.forecasting.forecasts import NOT_WITHIN, frees_text, latest_for, starts_in, visible_tenant_ids
from scheduler.models import QUEUED_STATES, Forecast, Job

Viewer = User | AnonymousUser


@dataclass(frozen=True)
class WaitingEstimate:
    job: str  # "name #id"
    tenant: str
    gpus: str
    starts: str  # "starts in ~12 min (p90 25 min)"
    frees: str  # "24 A100s free at ~10:40, when job X finishes"
    moved: str  # why it moved since the last forecast, if it did


@dataclass(frozen=True)
class WaitingForecast:
    as_of: datetime | None  # None: no forecast made yet
    policy: str
    jobs: list[WaitingEstimate]


def waiting_forecast(user: Viewer, now: datetime, limit: int = 10) -> WaitingForecast:
    """The viewer's waiting jobs by estimated start, soonest first (those without an estimate last)."""
    latest = Forecast.objects.first()
    if latest is None:
        return WaitingForecast(None, "", [])
    waiting = list(Job.objects.visible_to(user).filter(state__in=QUEUED_STATES).select_related("tenant"))
    estimates = latest_for(job.pk for job in waiting)
    far = timezone.now().replace(year=9999)

    def soonest(job: Job) -> tuple[datetime, int]:
        row = estimates.get(job.pk)
        return (row.estimated_start if row and row.estimated_start else far), job.pk

    visible = visible_tenant_ids(user)
    rows = []
    for job in sorted(waiting, key=soonest)[:limit]:
        row = estimates.get(job.pk)
        gpus = f"{job.min_gpus}" if job.min_gpus == job.max_gpus else f"{job.min_gpus}–{job.max_gpus}"
        starts = starts_in(row, now) or (NOT_WITHIN if row else "no forecast yet")
        rows.append(WaitingEstimate(
            f"{job.name} #{job.pk}", job.tenant.name, gpus, starts,
            frees_text(row, visible) if row else "", row.moved_because if row else "",
        ))
    return WaitingForecast(latest.made_at, latest.policy, rows)
