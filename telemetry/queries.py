"""Read-side helpers for dashboards and reports: everything from the rollups, never from raw samples.

A range [start, end) covers the buckets starting in it and the one ``start`` falls in.
``series`` is a scope's line over time (the cluster, a node, a tenant): minute by minute from ``ScopeMinute`` for
ranges up to ``SCOPE_MINUTE_LIMIT``, else hour by hour with the current, unfinished hour from its minutes.
``utilisation`` reads per-GPU minute rollups for ranges up to ``MINUTE_RANGE_LIMIT`` and hour
rollups beyond (minute rollups are kept ``TELEMETRY_MINUTE_DAYS``); per job and tenant it reads
``JobUsageHour`` and so has hour resolution. GPU-hours are GPU-seconds ÷ 3,600.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Avg, Count, ExpressionWrapper, Func, IntegerField, Sum

from scheduler.models import Allocation, Gpu, GpuHealth, Node, Tenant

from .models import GpuEvent, GpuMinute, JobUsageHour, ScopeMinute
from .readings import EventKind
from .rollups import CLUSTER_SCOPE, HOURS, MAX_GAP, MINUTES, Level, floor, node_scope, tenant_scope
from .storage import latest_per_gpu

# Minute resolution for ranges up to 6 h: 2 days of minutes over 1,024 GPUs are 2.9 M rows
# (0.5–0.9 s to scan); beyond 6 h, hours draw the same curve from 60× fewer rows.
MINUTE_RANGE_LIMIT = timedelta(hours=6)
JOULES_PER_KWH = 3_600_000.0
# A scope's line reads one row a minute: 48 hours are 2,880 rows, whatever the cluster's size.
SCOPE_MINUTE_LIMIT = timedelta(hours=48)


@dataclass(frozen=True)
class UtilisationPoint:
    """One bucket: mean utilisation of the reporting GPUs (None for tenants: not kept per job), GPUs held, held
    while idle (GPU-seconds ÷ bucket seconds) and energy."""

    start: datetime
    gpu_util: float | None
    allocated_gpus: float
    idle_allocated_gpus: float
    energy_kwh: float
    # The seconds the bucket covers: None for its whole width; the running hour's minutes so far (``series``).
    covered_seconds: float | None = None

    def gpu_hours(self, width: timedelta) -> float:
        """GPU-hours held in the bucket (``width``: its width when whole)."""
        return self.allocated_gpus * (self.covered_seconds or width.total_seconds()) / 3600

    def idle_gpu_hours(self, width: timedelta) -> float:
        return self.idle_allocated_gpus * (self.covered_seconds or width.total_seconds()) / 3600


@dataclass(frozen=True)
class Heatmap:
    """Mean utilisation per GPU (rows, ``host/gpuN``) and bucket (columns); None where a GPU did not report."""

    gpus: list[str]
    starts: list[datetime]
    util: list[list[float | None]]


def scope_key(*, node: Node | None = None, tenant: Tenant | None = None) -> str:
    """The ``ScopeMinute.scope`` of the cluster, a node or a tenant."""
    return node_scope(node.pk) if node is not None else tenant_scope(tenant.pk) if tenant is not None else CLUSTER_SCOPE


def series_step(start: datetime, end: datetime) -> Level:
    return MINUTES if end - start <= SCOPE_MINUTE_LIMIT else HOURS


def series(start: datetime, end: datetime, *, node: Node | None = None, tenant: Tenant | None = None,
           step: Level | None = None) -> list[UtilisationPoint]:
    """One scope over [start, end) at ``step`` (default: ``series_step``), in time order.

    Minutes come from ``ScopeMinute``; a tenant's minutes without a row while the cluster reported held nothing
    (0), elsewhere a missing minute had no telemetry (absent). Hours come from the hour rollups (a tenant's from
    ``JobUsageHour``), and the hour still running is added from its minutes so far, its GPUs averaged over the
    minutes rolled up. Refuses minutes for ranges over ``SCOPE_MINUTE_LIMIT`` (ValueError).
    """
    step = step or series_step(start, end)
    if step is MINUTES and end - start > SCOPE_MINUTE_LIMIT:
        raise ValueError(f"minute steps are for ranges up to {SCOPE_MINUTE_LIMIT.total_seconds() / 3600:.0f} h")
    key = scope_key(node=node, tenant=tenant)
    if step is MINUTES:
        return _scope_minutes(floor(start, MINUTES.width), end, key, zero_fill=tenant is not None)
    hours = utilisation(start, end, node=node, tenant=tenant) if end - start > MINUTE_RANGE_LIMIT or tenant else \
        _hours_from_minutes(start, end, key)
    # After the last hour rolled up: the hour running now (and any whose rollup is late), from their minutes.
    since = max(hours[-1].start + HOURS.width if hours else floor(start, HOURS.width), floor(start, HOURS.width))
    return hours + _by_hour(_scope_minutes(since, end, key, zero_fill=False))


def _scope_minutes(first: datetime, end: datetime, key: str, *, zero_fill: bool) -> list[UtilisationPoint]:
    rows = ScopeMinute.objects.filter(start__gte=first, start__lt=end).order_by("start")
    fields = ("start", "gpu_util_avg", "allocated_seconds", "idle_allocated_seconds", "energy_j")
    points = {start: UtilisationPoint(start, util, held / 60, idle / 60, energy / JOULES_PER_KWH)
              for start, util, held, idle, energy in rows.filter(scope=key).values_list(*fields)}
    if zero_fill:
        for start in rows.filter(scope=CLUSTER_SCOPE).values_list("start", flat=True):
            points.setdefault(start, UtilisationPoint(start, None, 0.0, 0.0, 0.0))
    return [points[start] for start in sorted(points)]


def _one_point(start: datetime, minutes: list[UtilisationPoint]) -> UtilisationPoint:
    """Minutes as one bucket starting at ``start``: GPUs averaged over the minutes, energy summed."""
    utils = [p.gpu_util for p in minutes if p.gpu_util is not None]
    return UtilisationPoint(start, sum(utils) / len(utils) if utils else None,
                            sum(p.allocated_gpus for p in minutes) / len(minutes),
                            sum(p.idle_allocated_gpus for p in minutes) / len(minutes),
                            sum(p.energy_kwh for p in minutes), covered_seconds=60.0 * len(minutes))


def _hours_from_minutes(start: datetime, end: datetime, key: str) -> list[UtilisationPoint]:
    """Complete hours of a scope summed from its minutes (for hour steps over short ranges)."""
    return _by_hour(_scope_minutes(floor(start, HOURS.width), floor(end, HOURS.width), key, zero_fill=False))


def _by_hour(minutes: list[UtilisationPoint]) -> list[UtilisationPoint]:
    """Minute points as one point per hour (``_one_point``), in time order."""
    by_hour: dict[datetime, list[UtilisationPoint]] = {}
    for point in minutes:
        by_hour.setdefault(floor(point.start, HOURS.width), []).append(point)
    return [_one_point(hour, points) for hour, points in sorted(by_hour.items())]


def level_for(start: datetime, end: datetime) -> Level:
    return MINUTES if end - start <= MINUTE_RANGE_LIMIT else HOURS


def utilisation(start: datetime, end: datetime, *, node: Node | None = None,
                tenant: Tenant | None = None) -> list[UtilisationPoint]:
    """Utilisation over time of the cluster, one node, or one tenant's jobs (hour buckets), in bucket order."""
    if tenant is not None:
        return _tenant_utilisation(start, end, tenant)
    level = level_for(start, end)
    rows = level.model.objects.filter(start__gte=floor(start, level.width), start__lt=end)
    if node is not None:
        rows = rows.filter(gpu__node=node)
    grouped = rows.values("start").order_by("start").annotate(
        util=Avg("gpu_util_avg"), held=Sum("allocated_seconds"), idle=Sum("idle_allocated_seconds"),
        energy=Sum("energy_j"),
    )
    return [_point(row, row["util"], level.width) for row in grouped]


def _tenant_utilisation(start: datetime, end: datetime, tenant: Tenant) -> list[UtilisationPoint]:
    rows = _job_hours(start, end).filter(job__tenant=tenant)
    grouped = rows.values("start").order_by("start").annotate(
        held=Sum("allocated_seconds"), idle=Sum("idle_allocated_seconds"), energy=Sum("energy_j"),
    )
    return [_point(row, None, HOURS.width) for row in grouped]


def _job_hours(start: datetime, end: datetime) -> Any:
    return JobUsageHour.objects.filter(start__gte=floor(start, HOURS.width), start__lt=end)


def _point(row: Mapping[str, Any], util: float | None, width: timedelta) -> UtilisationPoint:
    seconds = width.total_seconds()
    return UtilisationPoint(row["start"], util, row["held"] / seconds, row["idle"] / seconds,
                            row["energy"] / JOULES_PER_KWH)


def gpu_heatmap(start: datetime, end: datetime, *, node: Node | None = None) -> Heatmap:
    """Per-GPU utilisation over every bucket of the range (minute or hour buckets, as ``utilisation``)."""
    level = level_for(start, end)
    first = floor(start, level.width)
    gpus = Gpu.objects.order_by("node__hostname", "index")
    rows = level.model.objects.filter(start__gte=first, start__lt=end).order_by()
    if node is not None:
        gpus, rows = gpus.filter(node=node), rows.filter(gpu__node=node)
    labels = {pk: f"{host}/gpu{index}" for pk, host, index in gpus.values_list("pk", "node__hostname", "index")}
    row_of = {pk: i for i, pk in enumerate(labels)}
    starts = _bucket_starts(first, end, level.width)
    util: list[list[float | None]] = [[None] * len(starts) for _ in labels]
    origin, width = first.timestamp(), level.width.total_seconds()
    # Bucket starts as integer seconds: building 172,000 datetimes took 1.2 s on PostgreSQL, most of the query.
    for gpu_id, seconds, value in rows.annotate(t=EpochSeconds("start")).values_list("gpu_id", "t", "gpu_util_avg"):
        util[row_of[gpu_id]][int((seconds - origin) // width)] = value
    return Heatmap(list(labels.values()), starts, util)


class EpochSeconds(Func):
    """A datetime column as whole seconds since 1970 (UTC); SQLite and PostgreSQL."""

    output_field = IntegerField()

    @property
    def convert_value(self) -> Any:
        return self._convert_value_noop  # type: ignore[attr-defined]  # both databases return integers already

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) AS bigint)"
        return self.as_sql(compiler, connection, template=template, **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "CAST(ROUND((julianday(%(expressions)s) - 2440587.5) * 86400) AS integer)"
        return self.as_sql(compiler, connection, template=template, **extra)


def _bucket_starts(first: datetime, end: datetime, width: timedelta) -> list[datetime]:
    """Every bucket start from ``first`` (a bucket start) up to ``end``."""
    count = max(0, -(-(end - first) // width))  # ceiling division
    return [first + i * width for i in range(count)]


# --- dashboards (cluster_ops/dashboards/): the live state and binned heatmaps ----------------------------------------
# Added for the Overview and Utilisation pages; nothing above depends on this section. ``latest_utilisation`` is
# the one reader of raw samples here, and only of the last few minutes (what is busy *now*).

HEATMAP_MINUTE_LIMIT = timedelta(hours=6)  # longer ranges are binned from hour rollups


def latest_utilisation(now: datetime, max_age: timedelta = MAX_GAP) -> dict[int, float | None]:
    """GPU id → utilisation (%) of its latest raw sample in (now − max_age, now]; GPUs without one are absent."""
    window = latest_per_gpu(now - max_age, now + timedelta(microseconds=1))
    return dict(window.values_list("gpu_id", "gpu_util"))


def gpus_held_by_tenant() -> dict[str, int]:
    """GPUs each tenant's jobs hold now (open allocations); tenants holding none are absent."""
    rows = Allocation.objects.filter(ended_at__isnull=True).values_list("job__tenant__name")
    return dict(rows.annotate(n=Count("id")).order_by())


def now_point(now: datetime, *, node: Node | None = None, tenant: Tenant | None = None,
              max_age: timedelta = MAX_GAP) -> UtilisationPoint | None:
    """The scope at ``now`` from each GPU's latest raw sample (what the minutes not rolled up yet would say): GPUs
    held by a job (a tenant's: by its jobs), of those held below ``TELEMETRY_IDLE_UTIL``, and their mean
    utilisation; None without a sample in the last ``max_age``."""
    idle_below = float(settings.TELEMETRY_IDLE_UTIL)
    latest = latest_per_gpu(now - max_age, now + timedelta(microseconds=1))
    rows = [(node_id, tenant_id, job_id, util) for node_id, tenant_id, job_id, util in
            latest.values_list("gpu__node_id", "job__tenant_id", "job_id", "gpu_util")
            if (node is None or node_id == node.pk) and (tenant is None or tenant_id == tenant.pk)]
    if not rows:
        return None
    held = [util for _, _, job_id, util in rows if job_id is not None]
    utils = [util for *_, util in rows if util is not None]
    idle = sum(1 for util in held if util is not None and util < idle_below)
    return UtilisationPoint(now, sum(utils) / len(utils) if utils else None, float(len(held)), float(idle), 0.0,
                            covered_seconds=0.0)


def gpu_heatmap_binned(start: datetime, end: datetime, *, max_columns: int = 180,
                       gpu_ids: Collection[int] | None = None, node: Node | None = None) -> Heatmap:
    """Like ``gpu_heatmap``, with at most ``max_columns`` columns, each the mean of whole buckets, averaged in SQL.

    Ranges up to ``HEATMAP_MINUTE_LIMIT`` read minute rollups, longer ones hour rollups; ``gpu_ids`` keeps
    only those GPUs (rows), ``node`` only that node's.
    """
    level = MINUTES if end - start <= HEATMAP_MINUTE_LIMIT else HOURS
    first = floor(start, level.width)
    buckets = max(1, -(-(end - first) // level.width))
    width = level.width * -(-buckets // max_columns)
    gpus = Gpu.objects.order_by("node__hostname", "index")
    rows = level.model.objects.filter(start__gte=first, start__lt=end, gpu_util_avg__isnull=False).order_by()
    if node is not None:
        gpus, rows = gpus.filter(node=node), rows.filter(gpu__node=node)
    if gpu_ids is not None:
        gpus, rows = gpus.filter(pk__in=list(gpu_ids)), rows.filter(gpu_id__in=list(gpu_ids))
    labels = {pk: f"{host}/gpu{index}" for pk, host, index in gpus.values_list("pk", "node__hostname", "index")}
    row_of = {pk: i for i, pk in enumerate(labels)}
    starts = _bucket_starts(first, end, width)
    util: list[list[float | None]] = [[None] * len(starts) for _ in labels]
    column = ExpressionWrapper((EpochSeconds("start") - int(first.timestamp())) / int(width.total_seconds()),
                               output_field=IntegerField())
    binned = rows.annotate(col=column).values("gpu_id", "col").annotate(mean=Avg("gpu_util_avg"))
    for gpu_id, col, mean in binned.values_list("gpu_id", "col", "mean"):
        if gpu_id in row_of and 0 <= col < len(starts):
            util[row_of[gpu_id]][col] = mean
    if level is HOURS:  # the hour still running has no hour rollup yet: its minutes so far fill its column
        running = max(first, floor(end, HOURS.width))
        col = int((running - first) // width)
        minutes = GpuMinute.objects.filter(start__gte=running, start__lt=end, gpu_util_avg__isnull=False,
                                           gpu_id__in=list(row_of)).order_by()
        for gpu_id, mean in minutes.values("gpu_id").annotate(mean=Avg("gpu_util_avg")).values_list("gpu_id", "mean"):
            if col < len(starts) and util[row_of[gpu_id]][col] is None:
                util[row_of[gpu_id]][col] = mean
    return Heatmap(list(labels.values()), starts, util)


# --- reports (cluster_ops/reports/): GPU failures and downtime (GPU-hour totals: telemetry.ledger) ---------------


@dataclass(frozen=True)
class FailureEvent:
    at: datetime
    gpu: str  # host/gpuN
    kind: str  # lost | xid
    code: int | None
    message: str


@dataclass(frozen=True)
class GpuFailures:
    """LOST and XID events in a range, and GPU health when asked (``Gpu.health`` is the current state)."""

    lost_events: int
    xid_events: int
    xid_codes: dict[int, int]  # XID number → events
    gpus_lost_now: int
    gpus_degraded_now: int
    recent: list[FailureEvent]  # most recent first


def gpu_failures(start: datetime, end: datetime, *, limit: int = 20) -> GpuFailures:
    events = GpuEvent.objects.filter(at__gte=start, at__lt=end, kind__in=[EventKind.LOST, EventKind.XID])
    kinds = dict(events.values_list("kind").annotate(n=Count("id")).order_by())
    codes = dict(events.filter(kind=EventKind.XID, code__isnull=False).values_list("code")
                 .annotate(n=Count("id")).order_by())
    health = dict(Gpu.objects.values_list("health").annotate(n=Count("id")).order_by())
    recent = [FailureEvent(e.at, f"{e.gpu.node.hostname}/gpu{e.gpu.index}", e.kind, e.code, e.message)
              for e in events.select_related("gpu__node").order_by("-at", "-id")[:limit]]
    return GpuFailures(kinds.get(EventKind.LOST, 0), kinds.get(EventKind.XID, 0), dict(sorted(codes.items())),
                       health.get(GpuHealth.LOST, 0), health.get(GpuHealth.DEGRADED, 0), recent)


Stretch = tuple[datetime, datetime]


@dataclass(frozen=True)
class NodeDowntime:
    """A node's downtime in a range: hours with at least one of its GPUs down, and its GPUs' down GPU-hours."""

    node: str
    down_hours: float
    lost_gpu_hours: float
    gpus_down: int  # of its GPUs down at some time in the range


def gpu_down_stretches(start: datetime, end: datetime) -> dict[int, list[Stretch]]:
    """Per GPU id, the stretches of [start, end) it was down.

    Down = from a LOST event to the GPU's next RECOVERED event (to ``end`` when none came). A GPU whose health is
    ``lost`` with no LOST event still open (an operator marked it by hand) is down from ``health_changed_at``
    (from ``start`` when that is unknown). Events before ``start`` count: a GPU lost last week is down all week.
    """
    changes: dict[int, list[tuple[datetime, bool]]] = {}
    rows = GpuEvent.objects.filter(kind__in=[EventKind.LOST, EventKind.RECOVERED], at__lt=end).order_by("at", "id")
    for gpu_id, at, kind in rows.values_list("gpu_id", "at", "kind"):
        changes.setdefault(gpu_id, []).append((at, kind == EventKind.LOST))
    found = {gpu: stretches(marks, start, end) for gpu, marks in changes.items()}
    for gpu_id, since in Gpu.objects.filter(health=GpuHealth.LOST).values_list("pk", "health_changed_at"):
        if not (changes.get(gpu_id) and changes[gpu_id][-1][1]) and (since is None or since < end):
            found.setdefault(gpu_id, []).extend(stretches([(since or start, True)], start, end))
    return {gpu: spans for gpu, spans in found.items() if spans}


def stretches(changes: list[tuple[datetime, bool]], start: datetime, end: datetime) -> list[Stretch]:
    """Time-ordered (at, down?) changes → the down stretches clipped to [start, end)."""
    found: list[Stretch] = []
    down_since: datetime | None = None
    for at, down in changes:
        if down and down_since is None:
            down_since = at
        elif not down and down_since is not None:
            found.append((down_since, at))
            down_since = None
    if down_since is not None:
        found.append((down_since, end))
    return [(max(a, start), min(b, end)) for a, b in found if b > start and a < end and min(b, end) > max(a, start)]


def union_seconds(spans: Collection[Stretch]) -> float:
    """Seconds covered by at least one of the stretches."""
    total, reach = 0.0, None
    for a, b in sorted(spans):
        if reach is None or a > reach:
            total, reach = total + (b - a).total_seconds(), b
        elif b > reach:
            total, reach = total + (b - reach).total_seconds(), b
    return total


def node_downtime(start: datetime, end: datetime) -> list[NodeDowntime]:
    """Nodes with a GPU down in [start, end) (``gpu_down_stretches``), longest downtime first."""
    down = gpu_down_stretches(start, end)
    hosts = dict(Gpu.objects.filter(pk__in=list(down)).values_list("pk", "node__hostname"))
    by_node: dict[str, list[list[Stretch]]] = {}
    for gpu_id, spans in down.items():
        by_node.setdefault(hosts[gpu_id], []).append(spans)
    rows = [
        NodeDowntime(host, union_seconds([s for spans in per_gpu for s in spans]) / 3600,
                     sum(union_seconds(spans) for spans in per_gpu) / 3600, len(per_gpu))
        for host, per_gpu in by_node.items()
    ]
    return sorted(rows, key=lambda row: (-row.down_hours, row.node))
