"""What the Overview shows, read from the database in one call: ``overview(user, now)``.

Inventory (nodes, GPU health) and critical GPU events are the cluster's and shown to
everyone; everything about jobs — allocations, what they use, the queue, tenants, the
last round's decisions — is scoped through ``Job.objects.visible_to(user)``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Q, Sum

from cluster_ops.models import Heartbeat
from scheduler.live.config import scheduler_settings
from scheduler.models import (
    ACTIVE_STATES,
    QUEUED_STATES,
    Allocation,
    Gpu,
    GpuHealth,
    Job,
    JobQuerySet,
    Node,
    RescaleEvent,
    SchedulingRound,
    Tenant,
    TenantQuerySet,
)
from telemetry.models import GpuEvent, Severity, TelemetrySource
from telemetry.queries import latest_utilisation

from .jobs_data import held_gpu_types

CRITICAL_EVENT_HOURS = 24  # critical GPU events of this many hours are alerts until acknowledged
ALERTS_PER_KIND = 5  # the alert list names at most this many of each kind, then "and N more"
ROUND_EVENTS = 12  # decisions of the last round listed


@dataclass(frozen=True)
class Inventory:
    nodes: int
    nodes_ready: int  # schedulable (not cordoned)
    gpus: int
    gpus_ready: int  # health ok on a schedulable node
    gpus_degraded: int
    gpus_lost: int
    gpus_cordoned: int  # not lost, on a cordoned node


@dataclass(frozen=True)
class Usage:
    """GPUs held by the visible jobs now, and what their latest samples say."""

    allocated: int
    busy: int  # latest utilisation at or above TELEMETRY_IDLE_UTIL
    idle: int  # below it: idle but allocated
    unreported: int  # no sample in the last few minutes
    telemetry: bool  # any GPU reported lately


@dataclass(frozen=True)
class Queue:
    pending: int
    waits_min: list[float]  # each queued job's wait so far, minutes
    p50_min: float | None
    p90_min: float | None
    p99_min: float | None


@dataclass(frozen=True)
class TenantRow:
    name: str
    quota: int
    running: int
    pending: int
    gpus_held: int
    gpus_wanted: int  # min GPUs of the queued jobs


@dataclass(frozen=True)
class Alert:
    severity: str  # danger | warning
    kind: str
    text: str


@dataclass(frozen=True)
class Decision:
    at: datetime
    kind: str
    job: str
    tenant: str
    gpus: str  # "2 → 4", or "4 v100 → 4 a100" (RescaleEvent.gpus_label)
    reason: str
    gpu_type: str = "—"  # of the GPUs it holds after the round


@dataclass(frozen=True)
class RoundSummary:
    policy: str
    round_seconds: int
    executor: str
    paused: bool
    last: SchedulingRound | None
    decisions: list[Decision] = field(default_factory=list)


@dataclass(frozen=True)
class Overview:
    now: datetime
    inventory: Inventory
    usage: Usage
    queue: Queue
    tenants: list[TenantRow]
    alerts: list[Alert]
    round: RoundSummary
    heartbeat: Heartbeat | None


def overview(user: User | AnonymousUser, now: datetime) -> Overview:
    jobs = Job.objects.visible_to(user)
    held = dict(Allocation.objects.filter(ended_at__isnull=True, job__in=jobs).values_list("gpu_id", "job_id"))
    util = latest_utilisation(now)
    return Overview(
        now=now, inventory=inventory(), usage=usage(held, util), queue=queue(jobs, now),
        tenants=tenant_rows(Tenant.objects.visible_to(user)), alerts=alerts(jobs, held, util, now),
        round=round_summary(jobs), heartbeat=Heartbeat.objects.first(),
    )


def inventory() -> Inventory:
    nodes = dict(Node.objects.values_list("schedulable").annotate(n=Count("id")).order_by())
    by = Counter({(ok, h): n for ok, h, n in Gpu.objects.values_list("node__schedulable", "health")
                  .annotate(n=Count("id")).order_by()})
    lost = by[(True, GpuHealth.LOST)] + by[(False, GpuHealth.LOST)]
    return Inventory(
        nodes=sum(nodes.values()), nodes_ready=nodes.get(True, 0), gpus=sum(by.values()),
        gpus_ready=by[(True, GpuHealth.OK)], gpus_degraded=by[(True, GpuHealth.DEGRADED)], gpus_lost=lost,
        gpus_cordoned=by[(False, GpuHealth.OK)] + by[(False, GpuHealth.DEGRADED)],
    )


def usage(held: dict[int, int], util: dict[int, float | None]) -> Usage:
    idle_below = settings.TELEMETRY_IDLE_UTIL
    reported = [util[gpu] for gpu in held if gpu in util]
    idle = sum(1 for u in reported if u is not None and u < idle_below)
    return Usage(allocated=len(held), busy=len(reported) - idle, idle=idle,
                 unreported=len(held) - len(reported), telemetry=bool(util))


def queue(jobs: JobQuerySet, now: datetime) -> Queue:
    submitted = jobs.filter(state__in=QUEUED_STATES).values_list("submitted_at", flat=True)
    waits = [max(0.0, (now - at).total_seconds() / 60) for at in submitted]
    if not waits:
        return Queue(0, [], None, None, None)
    p50, p90, p99 = (float(v) for v in np.percentile(waits, [50, 90, 99]))
    return Queue(len(waits), waits, p50, p90, p99)


def tenant_rows(tenants: TenantQuerySet) -> list[TenantRow]:
    active, queued = list(ACTIVE_STATES), list(QUEUED_STATES)
    rows = tenants.annotate(
        running=Count("jobs", filter=Q(jobs__state__in=active), distinct=True),
        pending=Count("jobs", filter=Q(jobs__state__in=queued), distinct=True),
        wanted=Sum("jobs__min_gpus", filter=Q(jobs__state__in=queued)),
    ).order_by("name")
    held = dict(Allocation.objects.filter(ended_at__isnull=True, job__tenant__in=tenants)
                .values_list("job__tenant_id").annotate(n=Count("id")).order_by())
    return [TenantRow(t.name, t.gpu_quota, t.running, t.pending, held.get(t.pk, 0), t.wanted or 0) for t in rows]


def alerts(jobs: JobQuerySet, held: dict[int, int], util: dict[int, float | None], now: datetime) -> list[Alert]:
    """Hardware first (lost GPUs, critical events), then idle allocations and long waits."""
    lost = Gpu.objects.filter(health=GpuHealth.LOST).select_related("node")
    found = _capped("lost GPU", [Alert("danger", "lost GPU", f"{gpu} is lost" + _since(gpu.health_changed_at, now))
                                 for gpu in lost[: ALERTS_PER_KIND + 1]], lost.count())
    events = GpuEvent.objects.filter(severity=Severity.CRITICAL, acknowledged=False,
                                     at__gte=now - timedelta(hours=CRITICAL_EVENT_HOURS)).select_related("gpu__node")
    found += _capped("GPU event", [Alert("danger", "GPU event", f"{e.gpu}: {e.message} ({_duration(now - e.at)} ago)")
                                   for e in events[: ALERTS_PER_KIND + 1]], events.count())
    found += source_alerts(now)
    found += _idle_alerts(held, util)
    limit = now - timedelta(minutes=settings.PENDING_ALERT_MINUTES)
    waiting = jobs.filter(state__in=QUEUED_STATES, submitted_at__lt=limit).select_related("tenant")
    found += _capped("long wait", [
        Alert("warning", "long wait", f"{job.name} ({job.tenant}) pending {_duration(now - job.submitted_at)}"
              + (f": {job.pending_reason}" if job.pending_reason else ""))
        for job in waiting.order_by("submitted_at", "id")[: ALERTS_PER_KIND + 1]], waiting.count())
    return found


def source_alerts(now: datetime) -> list[Alert]:
    """A pulled telemetry source (Prometheus) that fails, has stale nodes or series matching no GPU: said, so that
    missing telemetry is never read as idle GPUs."""
    found = []
    for row in TelemetrySource.objects.filter(source=settings.TELEMETRY_SOURCE):
        if not row.ok:
            found.append(Alert("danger", "telemetry", f"{row.source}: {row.error}"
                               + _since(row.failing_since, now)))
            continue
        if row.stale:
            found.append(Alert("warning", "telemetry", f"{row.source}: no recent samples from "
                               + ", ".join(row.stale[:ALERTS_PER_KIND])
                               + (f" and {len(row.stale) - ALERTS_PER_KIND} more" if len(row.stale) > ALERTS_PER_KIND
                                  else "")))
        if row.unmatched:
            found.append(Alert("warning", "telemetry", f"{row.source}: {len(row.unmatched)} series match no GPU of "
                               f"the inventory (e.g. {row.unmatched[0]}): manage.py telemetry_check lists them"))
    return found


def _idle_alerts(held: dict[int, int], util: dict[int, float | None]) -> list[Alert]:
    idle_below = settings.TELEMETRY_IDLE_UTIL
    per_job = Counter(job for gpu, job in held.items() if (u := util.get(gpu)) is not None and u < idle_below)
    names = dict(Job.objects.filter(pk__in=list(per_job)).values_list("pk", "name"))
    return _capped("idle GPUs", [
        Alert("warning", "idle GPUs", f"{names.get(job, job)} holds {n} GPU{'s' if n > 1 else ''} "
              f"below {idle_below} % utilisation")
        for job, n in per_job.most_common(ALERTS_PER_KIND + 1)], len(per_job))


def _capped(kind: str, items: list[Alert], total: int) -> list[Alert]:
    if total <= ALERTS_PER_KIND:
        return items
    return [*items[:ALERTS_PER_KIND], Alert(items[0].severity, kind, f"… and {total - ALERTS_PER_KIND} more")]


def _since(at: datetime | None, now: datetime) -> str:
    return f" (for {_duration(now - at)})" if at else ""


def _duration(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours < 48 else f"{hours // 24} days {hours % 24} h"


def _decided_type(event: RescaleEvent, held: dict[int, str]) -> str:
    """The GPU type a decision is about: the one the job holds now, else the one the event moved it to or from
    (a preemption holds none after it), else the type the job asks for."""
    return held.get(event.job_id) or event.to_type or event.from_type or event.job.gpu_type or "—"


def round_summary(jobs: JobQuerySet) -> RoundSummary:
    config = scheduler_settings()
    last = SchedulingRound.objects.rounds_only().first()  # starts between rounds are in jobs' histories
    decisions: list[Decision] = []
    if last is not None:
        events = list(RescaleEvent.objects.filter(round=last, job__in=jobs).select_related("job__tenant")
                      [:ROUND_EVENTS])
        types = held_gpu_types(Allocation.objects.filter(job_id__in=[e.job_id for e in events], ended_at__isnull=True))
        decisions = [Decision(e.at, e.kind, e.job.name, e.job.tenant.name, e.gpus_label, e.reason,
                              _decided_type(e, types)) for e in events]
    return RoundSummary(config.policy, config.round_seconds, config.executor, config.paused, last, decisions)
