"""The GPU-hour ledger: the one home of every GPU-hour, idle GPU-hour and energy total over a span of time.

Every total a page, report, export or the API shows — the report's summary, its tenant and user rows, the
accounting CSV, the Utilisation page's idle GPU-hours, ``/api/utilisation/``'s totals — is a sum over one
``Ledger``'s job lines, so they agree to the GPU-second by construction:

* **Held** (allocated) GPU-seconds of a job: its allocations' intervals (one GPU each) clipped exactly to
  [start, end); an allocation still open runs to ``end`` (callers pass ``min(period end, now)``).
* **Idle-held** GPU-seconds and **energy** of a job: its telemetry minutes (``JobUsageMinute``) starting in
  [start, end). Before the first job minute kept (minute retention, or data from before job minutes existed) the
  job hours (``JobUsageHour``) lying wholly inside the span count instead; ``hour_resolution_before`` says so.
* **GPU energy** of the cluster: every GPU's telemetry minutes (``GpuMinute``), held or not; the energy of GPUs
  no job held is the difference (``unheld_energy_j``), so tenants' + unheld = the cluster's. ``energy_modelled``
  says when any of it came from simulated samples (the power model), not from a measured counter.
* **Over time** (``held_over_time``): per tenant, the exact integral of GPUs held above its quota (borrowed), and
  the time it held more than its quota or less than half of it — a sweep over the same allocation intervals, not
  hour buckets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Min, Q, QuerySet, Sum

from scheduler.models import Allocation, Job, Tenant

from .models import GpuHour, GpuMinute, JobUsageHour, JobUsageMinute
from .rollups import HOURS, floor

JOULES_PER_KWH = 3_600_000.0
NO_OWNER = "(no owner)"


@dataclass
class Usage:
    """GPU-seconds held, of those held while idle, and the energy of the GPUs while held (J), over some jobs."""

    gpu_seconds: float = 0.0
    idle_seconds: float = 0.0
    energy_j: float = 0.0
    jobs: set[int] = field(default_factory=set)

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600

    @property
    def idle_gpu_hours(self) -> float:
        return self.idle_seconds / 3600

    @property
    def kwh(self) -> float:
        return self.energy_j / JOULES_PER_KWH

    def add(self, other: Usage) -> None:
        self.gpu_seconds += other.gpu_seconds
        self.idle_seconds += other.idle_seconds
        self.energy_j += other.energy_j
        self.jobs |= other.jobs


@dataclass(frozen=True)
class JobLine:
    job_id: int
    name: str
    tenant: str
    owner: str  # NO_OWNER for a job without one
    usage: Usage

    @property
    def job(self) -> str:
        return self.name

    @property
    def allocated_gpu_hours(self) -> float:
        return self.usage.gpu_hours

    @property
    def idle_allocated_gpu_hours(self) -> float:
        return self.usage.idle_gpu_hours


@dataclass(frozen=True)
class Ledger:
    """The jobs' usage over [start, end) (module docstring) and the cluster's GPU energy there."""

    start: datetime
    end: datetime
    lines: tuple[JobLine, ...]
    gpu_energy_j: float  # every GPU's, held or not (0 for a tenant's ledger: its GPUs are its jobs')
    energy_modelled: bool
    hour_resolution_before: datetime | None  # idle time and energy before this came from whole job hours

    def total(self) -> Usage:
        return _summed(self.lines)

    def by_tenant(self) -> dict[str, Usage]:
        return grouped(self.lines, lambda line: line.tenant)

    def by_owner(self) -> dict[tuple[str, str], Usage]:
        """(tenant, owner) → usage."""
        return grouped(self.lines, lambda line: (line.tenant, line.owner))

    def idle_jobs(self) -> list[JobLine]:
        """The jobs that held GPUs idle in the span, most idle first (ties: job id)."""
        idle = [line for line in self.lines if line.usage.idle_seconds > 0]
        return sorted(idle, key=lambda line: (-line.usage.idle_seconds, line.job_id))

    @property
    def unheld_energy_j(self) -> float:
        """Energy of GPUs while no job held them (never below 0: minutes of 55–65 s make the two sums differ
        by rounding only)."""
        return max(0.0, self.gpu_energy_j - self.total().energy_j)


def _summed(lines: Iterable[JobLine]) -> Usage:
    total = Usage()
    for line in lines:
        total.add(line.usage)
    return total


def grouped(lines: Iterable[JobLine], key: object) -> dict:  # type: ignore[type-arg]
    """Lines summed by ``key(line)``."""
    groups: dict = {}  # type: ignore[type-arg]
    for line in lines:
        groups.setdefault(key(line), Usage()).add(line.usage)  # type: ignore[operator]
    return groups


def read(start: datetime, end: datetime, *, tenant: Tenant | None = None) -> Ledger:
    """The ledger of [start, end), of one tenant's jobs or of the whole cluster."""
    end = max(start, end)
    usage: dict[int, Usage] = {}
    for job_id, seconds in held_seconds(start, end, tenant).items():
        usage.setdefault(job_id, Usage(jobs={job_id})).gpu_seconds += seconds
    hours_before = _first_job_minute()
    rows, by_hours = _telemetry_rows(start, end, tenant, hours_before)
    for job_id, idle, energy in rows:
        line = usage.setdefault(job_id, Usage(jobs={job_id}))
        line.idle_seconds += idle
        line.energy_j += energy
    jobs = Job.objects.filter(pk__in=list(usage)).values_list("pk", "name", "tenant__name", "owner__username")
    lines = tuple(JobLine(pk, name, tenant_name, owner or NO_OWNER, usage[pk])
                  for pk, name, tenant_name, owner in jobs.order_by("pk"))
    gpu_energy, simulated = _gpu_energy(start, end)
    return Ledger(
        start=start, end=end, lines=lines, gpu_energy_j=0.0 if tenant is not None else gpu_energy,
        energy_modelled=simulated,
        hour_resolution_before=hours_before if by_hours and hours_before is not None else None,
    )


def held_seconds(start: datetime, end: datetime, tenant: Tenant | None = None) -> dict[int, float]:
    """Job id → GPU-seconds its allocations held in [start, end), each interval clipped exactly (an open one to
    ``end``)."""
    seconds: dict[int, float] = {}
    for job_id, began, ended in _allocations(start, end, tenant).values_list("job_id", "started_at", "ended_at"):
        overlap = (min(end, ended or end) - max(start, began)).total_seconds()
        if overlap > 0:
            seconds[job_id] = seconds.get(job_id, 0.0) + overlap
    return seconds


def _allocations(start: datetime, end: datetime, tenant: Tenant | None) -> QuerySet[Allocation]:
    rows = Allocation.objects.filter(started_at__lt=end).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
    return (rows if tenant is None else rows.filter(job__tenant=tenant)).order_by()


def _first_job_minute() -> datetime | None:
    return JobUsageMinute.objects.aggregate(at=Min("start"))["at"]


def _minutes_then_hours(minute_model: Any, hour_model: Any, start: datetime, end: datetime,
                        minutes_from: datetime | None) -> tuple[QuerySet[Any], QuerySet[Any]]:
    """A span's rows of a minute rollup from ``minutes_from`` (its first row kept) on, and of its hour rollup for
    the whole hours of the span before that."""
    minute_start = start if minutes_from is None else max(start, minutes_from)
    hour_end = min(end, minutes_from) if minutes_from is not None else end
    first_hour = floor(start, HOURS.width)
    first_hour += HOURS.width if first_hour < start else timedelta(0)
    return (minute_model.objects.filter(start__gte=minute_start, start__lt=end),
            hour_model.objects.filter(start__gte=first_hour, start__lte=hour_end - HOURS.width))


def _telemetry_rows(start: datetime, end: datetime, tenant: Tenant | None,
                    minutes_from: datetime | None) -> tuple[list[tuple[int, float, float]], bool]:
    """(job id, idle GPU-seconds, energy J) per job: job minutes in the span, and the whole job hours before the
    first job minute kept; and whether any job hour was read."""
    rows: list[tuple[int, float, float]] = []
    read_hours = False
    for source in _minutes_then_hours(JobUsageMinute, JobUsageHour, start, end, minutes_from):
        scoped = source if tenant is None else source.filter(job__tenant=tenant)
        grouped = scoped.order_by().values("job_id").annotate(idle=Sum("idle_allocated_seconds"),
                                                              energy=Sum("energy_j"))
        found = [(row["job_id"], row["idle"], row["energy"]) for row in grouped]
        read_hours = read_hours or (source.model is JobUsageHour and bool(found))
        rows += found
    return rows, read_hours


def _gpu_energy(start: datetime, end: datetime) -> tuple[float, bool]:
    """Every GPU's energy (J) over the span, minutes then older whole hours; and whether any was simulated."""
    first_minute = GpuMinute.objects.aggregate(at=Min("start"))["at"]
    energy, simulated = 0.0, False
    for rows in _minutes_then_hours(GpuMinute, GpuHour, start, end, first_minute):
        energy += rows.aggregate(e=Sum("energy_j"))["e"] or 0.0
        simulated = simulated or rows.filter(simulated=True).exists()
    return energy, simulated


# --- over time: borrowing and time over or under quota ---------------------------------------------------------


@dataclass(frozen=True)
class TenantTime:
    """Exact figures of a tenant's GPUs held over [start, end): the integral above its quota, and how long it
    held more than its quota or less than half of it."""

    borrowed_gpu_seconds: float
    over_quota_seconds: float
    under_half_seconds: float


def held_over_time(start: datetime, end: datetime, quotas: dict[str, int]) -> dict[str, TenantTime]:
    """Per tenant in ``quotas``: a sweep over its allocation intervals clipped to [start, end)."""
    changes = _held_changes(start, end, quotas)
    return {name: _sweep(marks, start, end, quotas[name]) for name, marks in changes.items()}


def borrowed_by_span(bounds: list[datetime], quotas: dict[str, int]) -> dict[str, list[float]]:
    """Per tenant in ``quotas``, the GPU-seconds it held above its quota in each span [bounds[i], bounds[i + 1])
    (``bounds`` ascending; a span may be empty): the sweep of ``held_over_time``, cut at the bounds, so the spans
    add up to its ``borrowed_gpu_seconds`` over [bounds[0], bounds[-1])."""
    changes = _held_changes(bounds[0], bounds[-1], quotas)
    return {name: _borrowed_in_spans(marks, bounds, quotas[name]) for name, marks in changes.items()}


def _held_changes(start: datetime, end: datetime, quotas: dict[str, int]) -> dict[str, list[tuple[datetime, int]]]:
    """Per tenant in ``quotas``, its allocations' starts (+1) and ends (−1) clipped to [start, end), in time order."""
    changes: dict[str, list[tuple[datetime, int]]] = {name: [] for name in quotas}
    rows = _allocations(start, end, None).values_list("job__tenant__name", "started_at", "ended_at")
    for name, began, ended in rows:
        if name in changes:
            changes[name] += [(max(start, began), 1), (min(end, ended or end), -1)]
    return {name: sorted(marks) for name, marks in changes.items()}


def _borrowed_in_spans(marks: list[tuple[datetime, int]], bounds: list[datetime], quota: int) -> list[float]:
    spans = [0.0] * (len(bounds) - 1)
    held, at, span = 0, bounds[0], 0
    for when, step in [*marks, (bounds[-1], 0)]:
        while at < when:  # the time from ``at`` to ``when``, cut where a span ends
            while at >= bounds[span + 1]:  # ends before ``when`` <= bounds[-1], so a later span holds ``at``
                span += 1
            cut = min(when, bounds[span + 1])
            spans[span] += max(0, held - quota) * (cut - at).total_seconds()
            at = cut
        held += step
    return spans


def _sweep(marks: list[tuple[datetime, int]], start: datetime, end: datetime, quota: int) -> TenantTime:
    borrowed = over = under = 0.0
    held, at = 0, start
    for when, step in [*marks, (end, 0)]:
        seconds = (when - at).total_seconds()
        if seconds > 0:
            borrowed += max(0, held - quota) * seconds
            over += seconds if held > quota else 0.0
            under += seconds if quota and held < quota / 2 else 0.0
            at = when
        held += step
    return TenantTime(borrowed, over, under)


# --- coverage: where a span's data begins ----------------------------------------------------------------------


def first_data_at() -> datetime | None:
    """When the cluster first had GPU time to count: its first allocation or its first telemetry minute (an
    hour's start only where no minute of that hour is kept any more)."""
    allocation = Allocation.objects.aggregate(at=Min("started_at"))["at"]
    minute = GpuMinute.objects.aggregate(at=Min("start"))["at"]
    hour = GpuHour.objects.aggregate(at=Min("start"))["at"]
    if hour is not None and minute is not None and minute < hour + HOURS.width:
        hour = None  # the hour's own minutes say when in it the data began
    known = [at for at in (allocation, minute, hour) if at is not None]
    return min(known) if known else None


def telemetry_seconds(start: datetime, end: datetime) -> float:
    """Seconds of [start, end) with telemetry: its minutes with a cluster reading, and before the first minute
    kept, its whole hours with one; never more than the span."""
    first_minute = GpuMinute.objects.aggregate(at=Min("start"))["at"]
    minutes = GpuMinute.objects.filter(start__gte=start, start__lt=end).values("start").distinct().count()
    hours = 0
    if first_minute is None or start < first_minute:
        hours = GpuHour.objects.filter(start__gte=start, start__lt=min(end, first_minute or end)).filter(
            start__lte=end - HOURS.width).values("start").distinct().count()
    return min(60.0 * minutes + 3600.0 * hours, max(0.0, (end - start).total_seconds()))
