"""Minute and hour rollups of the raw samples: incremental, idempotent, late samples included.

**What a bucket holds.** Consecutive samples of one GPU, ``prev`` then ``cur``, no more than
``MAX_GAP`` apart, make an *interval* (prev.at, cur.at]. The interval belongs to the bucket
of ``cur`` and is described by ``cur``: NVML's utilisation is an average over the time before
the reading, and the job attached at ingest held the GPU when ``cur`` was read.

* averages and maxima: over the bucket's samples (a NULL metric is left out, never 0);
* ``energy_j``: the energy counter's delta over each interval; a negative delta is a counter
  reset (driver reload), so the interval counts the new counter value, the energy since the
  reset. Without a counter at both ends, power is integrated: the trapezoid of the two
  readings, or the later reading held over the interval when the earlier has no power;
* ``allocated_seconds``: intervals whose ``cur`` has a job; ``idle_allocated_seconds``: of
  those, the ones whose utilisation is below ``TELEMETRY_IDLE_UTIL`` % (unknown utilisation
  counts as allocated, not idle);
* a gap longer than ``MAX_GAP`` is time nobody watched: it adds no seconds and no energy;
* ``JobUsageMinute`` and ``JobUsageHour``: the same intervals summed per job and minute, and per job and hour;
* ``ScopeMinute``, written with each run of minutes: the cluster's and each node's minute, summed from the GPU
  minutes just written, and each tenant's, from the intervals its jobs' samples describe (``write_scope_minutes``).

Intervals are not split at bucket edges, so one minute may hold 55 or 65 seconds of a GPU;
sums over longer spans are exact, and an hour is exactly the sum of its minutes.

**Which buckets are recomputed.** A ``RollupCursor`` per level remembers the highest source
row id it has read. Minute buckets holding raw samples with higher ids are recomputed from
the raw samples (deleted and rewritten: re-running never duplicates). A late sample (in a
bucket rolled up before) also changes the interval that ends at the GPU's next sample, so
that sample's bucket is recomputed too. Hour buckets are recomputed from the raw samples
when one of their minute rows was (re)written. Only complete buckets (ending at or before
``until``) are rolled; rows in incomplete ones stay new until a later run. Buckets older than
the raw retention are final: their samples may be partly pruned.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Avg, Count, F, Max, Min, OuterRef, Subquery, Sum
from django.db.models.functions import Trunc

from scheduler.models import Job

from .models import GpuHour, GpuMinute, GpuSample, JobUsageHour, JobUsageMinute, RollupCursor, ScopeMinute
from .storage import latest_per_gpu

MAX_GAP = timedelta(minutes=5)  # two samples further apart than this are not one observed interval


@dataclass(frozen=True)
class Level:
    name: str  # RollupCursor.level, and the unit Trunc() understands
    width: timedelta
    model: type[GpuMinute] | type[GpuHour]
    chunk: int  # contiguous buckets computed from one read of raw samples (bounds memory)


MINUTES = Level("minute", timedelta(minutes=1), GpuMinute, 60)
HOURS = Level("hour", timedelta(hours=1), GpuHour, 24)


def roll_up_minutes(until: datetime) -> int:
    """Recompute the complete minute buckets with new or late raw samples; returns how many."""
    return _roll_up(MINUTES, until)


def roll_up_hours(until: datetime) -> int:
    """Recompute the complete hour buckets whose minute rollups changed; returns how many.

    Run after ``roll_up_minutes`` with the same ``until`` (the ``telemetry.roll_up`` task does).
    """
    return _roll_up(HOURS, until)


def _roll_up(level: Level, until: datetime) -> int:
    boundary = floor(until, level.width)
    high = _high_water(level)
    with transaction.atomic():
        # The row lock keeps concurrent rollups of a level one at a time (SQLite: IMMEDIATE transactions do).
        cursor = RollupCursor.objects.select_for_update().get_or_create(level=level.name)[0]
        firsts = _changed_buckets(level, cursor, high)
        # Buckets from here on still have all their raw samples (pruning may have started on the one before).
        horizon = floor(until - timedelta(days=settings.TELEMETRY_RAW_DAYS), level.width) + level.width
        due = sorted(b for b in firsts if horizon <= b and b + level.width <= boundary)
        for start, end in _runs(due, level):
            _recompute(level, start, end)
        waiting = [first for bucket, first in firsts.items() if bucket + level.width > boundary]
        cursor.last_id = min(waiting) - 1 if waiting else max(high, cursor.last_id)
        cursor.rolled_until = max(boundary, cursor.rolled_until or boundary)
        cursor.save()
    return len(due)


def floor(at: datetime, width: timedelta) -> datetime:
    """The start of the bucket of ``width`` (a minute or an hour) holding ``at``, in UTC."""
    at = at.astimezone(UTC).replace(second=0, microsecond=0)
    return at if width == MINUTES.width else at.replace(minute=0)


# --- which buckets changed -------------------------------------------------------------------


def _source(level: Level) -> tuple[Any, str]:
    """The rows whose new ids mark a level's buckets: raw samples for minutes, minute rows for hours."""
    return (GpuSample, "at") if level is MINUTES else (GpuMinute, "start")


def _high_water(level: Level) -> int:
    """The highest source id such that every lower id is committed.

    On PostgreSQL ids are handed out before commit, so a transaction still inserting may hold a
    lower id than one already committed. ``LOCK … IN SHARE MODE`` waits for every transaction
    writing the table, and ids drawn after it are higher. SQLite has one writer at a time.
    """
    model, _ = _source(level)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {connection.ops.quote_name(model._meta.db_table)} IN SHARE MODE")
        return model.objects.aggregate(high=Max("id"))["high"] or 0


def _changed_buckets(level: Level, cursor: RollupCursor, high: int) -> dict[datetime, int]:
    """Buckets with source rows in (cursor.last_id, high], each with the lowest such id."""
    model, time_field = _source(level)
    new = model.objects.filter(id__gt=cursor.last_id, id__lte=high)
    firsts = _first_ids(new, time_field, level)
    if level is MINUTES and cursor.rolled_until is not None:
        for bucket, first in _successor_buckets(new.filter(at__lt=cursor.rolled_until)).items():
            firsts[bucket] = min(first, firsts.get(bucket, first))
    return firsts


def _first_ids(rows: Any, time_field: str, level: Level) -> dict[datetime, int]:
    grouped = rows.annotate(bucket=Trunc(time_field, level.name, tzinfo=UTC)).values("bucket")
    return dict(grouped.annotate(first=Min("id")).values_list("bucket", "first"))


def _successor_buckets(late: Any) -> dict[datetime, int]:
    """Minute buckets of the samples that follow ``late`` samples on their GPUs within ``MAX_GAP``.

    Each with the lowest id of the late samples that point there.
    """
    following = GpuSample.objects.filter(gpu_id=OuterRef("gpu_id"), at__gt=OuterRef("at")).order_by("at")
    firsts: dict[datetime, int] = {}
    for first, at, next_at in late.annotate(next_at=Subquery(following.values("at")[:1])).values_list(
        "id", "at", "next_at"
    ):
        if next_at is not None and next_at - at <= MAX_GAP:
            bucket = floor(next_at, MINUTES.width)
            firsts[bucket] = min(first, firsts.get(bucket, first))
    return firsts


def _runs(buckets: list[datetime], level: Level) -> Iterator[tuple[datetime, datetime]]:
    """Sorted buckets as [start, end) runs of contiguous buckets, at most ``level.chunk`` long."""
    run: list[datetime] = []
    for bucket in buckets:
        if run and (bucket != run[-1] + level.width or len(run) == level.chunk):
            yield run[0], run[-1] + level.width
            run = []
        run.append(bucket)
    if run:
        yield run[0], run[-1] + level.width


# --- recomputing a run of buckets ------------------------------------------------------------


class Sample(NamedTuple):
    gpu_id: int
    at: datetime
    job_id: int | None
    simulated: bool
    gpu_util: float | None
    mem_used_mib: float | None
    power_w: float | None
    energy_j: float | None
    temperature_c: float | None


@dataclass
class Stat:
    total: float = 0.0
    count: int = 0
    top: float | None = None

    def add(self, value: float | None) -> None:
        if value is not None:
            self.total += value
            self.count += 1
            self.top = value if self.top is None else max(self.top, value)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass
class Usage:
    """Seconds held, seconds held while idle, and energy: what a GPU bucket and a job hour both sum."""

    allocated_seconds: float = 0.0
    idle_allocated_seconds: float = 0.0
    energy_j: float = 0.0


@dataclass
class Bucket:
    samples: int = 0
    simulated: bool = False
    util: Stat = field(default_factory=Stat)
    mem_used: Stat = field(default_factory=Stat)
    power: Stat = field(default_factory=Stat)
    temperature: Stat = field(default_factory=Stat)
    usage: Usage = field(default_factory=Usage)

    def add_sample(self, s: Sample) -> None:
        self.samples += 1
        self.simulated |= s.simulated
        self.util.add(s.gpu_util)
        self.mem_used.add(s.mem_used_mib)
        self.power.add(s.power_w)
        self.temperature.add(s.temperature_c)


@dataclass
class JobBucket:
    """One job (or, summed, one tenant) over one bucket: its usage, its samples' utilisation and the GPUs it held."""

    usage: Usage = field(default_factory=Usage)
    util: Stat = field(default_factory=Stat)
    gpus: set[int] = field(default_factory=set)

    def add_sample(self, s: Sample) -> None:
        self.util.add(s.gpu_util)
        self.gpus.add(s.gpu_id)

    def merge(self, other: JobBucket) -> None:
        for name in vars(self.usage):
            setattr(self.usage, name, getattr(self.usage, name) + getattr(other.usage, name))
        self.util.total += other.util.total
        self.util.count += other.util.count
        self.gpus |= other.gpus


def interval_energy_j(prev: Sample, cur: Sample) -> float:
    """Energy of the interval (prev.at, cur.at]: the counter's delta, else integrated power (module doc)."""
    if prev.energy_j is not None and cur.energy_j is not None:
        delta = cur.energy_j - prev.energy_j
        return delta if delta >= 0 else cur.energy_j  # the counter restarted from 0 within the interval
    if cur.power_w is None:
        return 0.0
    seconds = (cur.at - prev.at).total_seconds()
    held = cur.power_w if prev.power_w is None else (prev.power_w + cur.power_w) / 2
    return held * seconds


def add_interval(usages: Iterable[Usage], prev: Sample, cur: Sample, idle_below: float) -> None:
    """Add the interval (prev.at, cur.at], described by ``cur``, to each of ``usages``."""
    seconds = (cur.at - prev.at).total_seconds()
    energy = interval_energy_j(prev, cur)
    held = cur.job_id is not None
    idle = held and cur.gpu_util is not None and cur.gpu_util < idle_below
    for usage in usages:
        usage.energy_j += energy
        usage.allocated_seconds += seconds if held else 0.0
        usage.idle_allocated_seconds += seconds if idle else 0.0


def _recompute(level: Level, start: datetime, end: datetime) -> None:
    """Replace ``level``'s rollups (and, for hours, job hours) in [start, end) with ones computed afresh."""
    buckets: dict[tuple[int, datetime], Bucket] = {}
    jobs: dict[tuple[int, datetime], JobBucket] = {}
    idle_below = float(settings.TELEMETRY_IDLE_UTIL)
    for prev, cur in _consecutive(start, end):
        key = (cur.gpu_id, floor(cur.at, level.width))
        bucket = buckets.setdefault(key, Bucket())
        bucket.add_sample(cur)
        job = jobs.setdefault((cur.job_id, key[1]), JobBucket()) if cur.job_id is not None else None
        if job is not None:
            job.add_sample(cur)
        if prev is not None:
            add_interval([bucket.usage, *([job.usage] if job else [])], prev, cur, idle_below)
    level.model.objects.filter(start__gte=start, start__lt=end).delete()
    level.model.objects.bulk_create((_rollup_row(level, key, b) for key, b in buckets.items()), batch_size=2000)
    if level is MINUTES:
        write_scope_minutes(start, end, tenant_minutes(jobs))
    job_model: type[JobUsageMinute] | type[JobUsageHour] = JobUsageMinute if level is MINUTES else JobUsageHour
    known = existing_jobs(jobs)
    job_model.objects.filter(start__gte=start, start__lt=end).delete()
    rows: list[Any] = [job_model(job_id=job_id, start=bucket, **vars(job.usage))
                       for (job_id, bucket), job in jobs.items() if job_id in known]
    job_model.objects.bulk_create(rows, batch_size=2000)


def existing_jobs(jobs: dict[tuple[int, datetime], JobBucket]) -> set[int]:
    """The job ids of ``jobs`` still in the database (a job deleted since its samples were taken is nobody's)."""
    return set(Job.objects.filter(pk__in={job_id for job_id, _ in jobs}).values_list("pk", flat=True))


def _consecutive(start: datetime, end: datetime) -> Iterator[tuple[Sample | None, Sample]]:
    """Each raw sample in [start, end), GPU by GPU in time order, with the one before it on its GPU.

    The one before is None when it is more than ``MAX_GAP`` earlier; for a GPU's first sample in
    the range it is the GPU's last sample before ``start``.
    """
    before = {row[0]: Sample(*row) for row in latest_per_gpu(start - MAX_GAP, start).values_list(*Sample._fields)}
    prev: Sample | None = None
    rows = GpuSample.objects.filter(at__gte=start, at__lt=end).order_by("gpu_id", "at", "id")
    for cur in map(Sample._make, rows.values_list(*Sample._fields).iterator(chunk_size=10_000)):
        if prev is None or prev.gpu_id != cur.gpu_id:
            prev = before.get(cur.gpu_id)
        yield (prev if prev is not None and cur.at - prev.at <= MAX_GAP else None), cur
        prev = cur


def _rollup_row(level: Level, key: tuple[int, datetime], b: Bucket) -> Any:
    gpu_id, start = key
    return level.model(
        gpu_id=gpu_id, start=start, samples=b.samples, simulated=b.simulated,
        gpu_util_avg=b.util.mean, gpu_util_max=b.util.top, mem_used_mib_avg=b.mem_used.mean,
        power_w_avg=b.power.mean, power_w_max=b.power.top, temperature_c_max=b.temperature.top, **vars(b.usage),
    )


# --- scope minutes ---------------------------------------------------------------------------

CLUSTER_SCOPE = "cluster"


def node_scope(node_id: int) -> str:
    return f"node:{node_id}"


def tenant_scope(tenant_id: int) -> str:
    return f"tenant:{tenant_id}"


def tenant_minutes(jobs: dict[tuple[int, datetime], JobBucket]) -> dict[tuple[int, datetime], JobBucket]:
    """Job buckets summed per tenant: (tenant id, minute) → its jobs' usage, samples and GPUs."""
    tenant_of = dict(Job.objects.filter(pk__in={job_id for job_id, _ in jobs}).values_list("pk", "tenant_id"))
    tenants: dict[tuple[int, datetime], JobBucket] = {}
    for (job_id, minute), job in jobs.items():
        if job_id in tenant_of:  # a job deleted since its samples were taken counts for the cluster only
            tenants.setdefault((tenant_of[job_id], minute), JobBucket()).merge(job)
    return tenants


def write_scope_minutes(start: datetime, end: datetime, tenants: dict[tuple[int, datetime], JobBucket]) -> int:
    """Replace the ``ScopeMinute`` rows in [start, end): the cluster and its nodes summed from the ``GpuMinute``
    rows there (write those first), and the tenants from ``tenants``. Returns the rows written."""
    minutes = GpuMinute.objects.filter(start__gte=start, start__lt=end).order_by()
    sums = {"gpus": Count("id"), "gpu_util_avg": Avg("gpu_util_avg"), "power_w": Sum("power_w_avg"),
            "energy_j": Sum("energy_j"), "allocated_seconds": Sum("allocated_seconds"),
            "idle_allocated_seconds": Sum("idle_allocated_seconds")}
    rows = [ScopeMinute(scope=CLUSTER_SCOPE, **row) for row in minutes.values("start").annotate(**sums)]
    for row in minutes.values("start", node=F("gpu__node_id")).annotate(**sums):
        values: dict[str, Any] = dict(row)
        rows.append(ScopeMinute(scope=node_scope(values.pop("node")), **values))
    rows += [ScopeMinute(scope=tenant_scope(tenant_id), start=minute, gpus=len(t.gpus), gpu_util_avg=t.util.mean,
                         **vars(t.usage)) for (tenant_id, minute), t in tenants.items()]
    ScopeMinute.objects.filter(start__gte=start, start__lt=end).delete()
    ScopeMinute.objects.bulk_create(rows, batch_size=2000)
    return len(rows)
