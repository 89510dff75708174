"""``seed_dashboard_data``: a month of a busy cluster, written straight into the tables the dashboards read.

What it writes (``now`` = the current minute):

* three tenants (vision, language, research; quotas 40 / 35 / 25 % of the GPUs) and nodes of
  8 GPUs, the first half A100-80GB, the rest V100-32GB; 3 GPUs lost, 2 degraded, one node cordoned;
* ``jobs`` finished jobs submitted over the range (all but the last 12 hours): 1–16 GPUs, run
  times log-normal around 4 h (10 min … 10 h), packed first-come first-served onto the GPUs that
  free up first, so the queue waits are real; 85 % succeeded, 10 % failed, 5 % cancelled; a start
  and a finish ``RescaleEvent`` each, attached to hourly ``SchedulingRound`` rows;
* running jobs holding about 70 % of the GPUs now (open allocations) and 60 pending jobs of the
  last 3 hours; the last round started the newest ones;
* from those allocations: ``GpuHour`` for the whole range, ``GpuMinute`` and ``ScopeMinute`` (the cluster,
  each node and each tenant) for the last 2 days, ``JobUsageHour`` for every job hour, raw ``GpuSample`` rows for
  the last 5 minutes (what the Overview calls "now"). One job in 8 holds its GPUs idle (1–3 % utilisation),
  others run at 70–98 %; power is linear in utilisation from 25 % to 80 % of the GPU's limit.
* a few ``GpuEvent`` rows: XID warnings, and the critical "fell off the bus" of the lost GPUs.

The rollup cursors are set past the seeded rows, so a running ``telemetry.roll_up`` starts from
there. Deterministic for a given ``seed`` and ``now``.
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import repeat
from typing import Any

import numpy as np
from django.db import transaction

from scheduler.live.config import scheduler_settings
from scheduler.models import (
    Allocation,
    Gpu,
    GpuHealth,
    Job,
    JobState,
    Node,
    RescaleEvent,
    RescaleKind,
    RoundStatus,
    SchedulingRound,
    Tenant,
)
from telemetry.models import (
    GpuEvent,
    GpuHour,
    GpuMinute,
    GpuSample,
    JobUsageHour,
    RollupCursor,
    ScopeMinute,
    Severity,
)
from telemetry.readings import EventKind
from telemetry.rollups import HOURS, MINUTES, JobBucket, floor, write_scope_minutes
from telemetry.storage import insert_rows

TENANTS = (("vision", 0.40, 1.0), ("language", 0.35, 1.0), ("research", 0.25, 0.5))
GPU_TYPES = (("NVIDIA A100-SXM4-80GB", 81920, 400, "a100"), ("Tesla V100-SXM2-32GB", 32768, 300, "v100"))
PROFILES = ("cifar10", "imagenet", "bert", "deepspeech2", "yolov3", "ncf")
WIDTHS = (1, 1, 1, 2, 2, 4, 4, 8, 8, 16)
IDLE_ONE_IN = 8
MINUTE_DAYS = 2
SAMPLE_SECONDS = 10
RAW_MINUTES = 5
MEMORY_USED_MIB = 20_000.0  # a busy GPU's memory in use (rollups only)
ROLLUP_COLUMNS = ("gpu_id", "start", "samples", "simulated", "gpu_util_avg", "gpu_util_max", "mem_used_mib_avg",
                  "power_w_avg", "power_w_max", "temperature_c_max", "energy_j", "allocated_seconds",
                  "idle_allocated_seconds")


class AlreadySeeded(Exception):
    """The database already holds jobs or GPUs: seeding would mix with them."""


@dataclass
class Run:
    """One job's placement: which GPUs (row ids), from when to when (``end`` None: still running)."""

    job: Job
    gpus: list[int]
    start: datetime
    end: datetime | None
    idle: bool
    width: int


def has_data() -> bool:
    return Job.objects.exists() or Gpu.objects.exists()


def seed(*, gpus: int = 1024, days: int = 30, jobs: int = 10_000, now: datetime, seed: int = 0,
         force: bool = False) -> dict[str, Any]:
    """Write the data (module doc); returns row counts and seconds. ``force`` first deletes jobs, inventory and
    telemetry (tenants are kept and reused)."""
    if has_data() and not force:
        raise AlreadySeeded("the database already has jobs or GPUs; --force deletes them first")
    began, rng = time.perf_counter(), np.random.default_rng(seed)
    now = floor(now, MINUTES.width)
    start = now - timedelta(days=days)
    with transaction.atomic():
        if force:
            wipe()
        tenants, gpu_rows = inventory(gpus)
        runs = place(rng, finished_jobs(rng, tenants, jobs, start, now), gpu_rows, now)
        runs += running_and_pending(rng, tenants, gpu_rows, runs, now)
        save_jobs(runs, now)
        write_runs(runs, now)
        counts: dict[str, Any] = write_telemetry(rng, gpu_rows, runs, start, now)
        counts["gpu_events"] = gpu_events(rng, gpu_rows, now)
    counts.update(jobs=Job.objects.count(), allocations=Allocation.objects.count(),
                  rescale_events=RescaleEvent.objects.count(), gpus=len(gpu_rows),
                  seconds=round(time.perf_counter() - began, 1))
    return counts


def wipe() -> None:
    for model in (GpuSample, GpuMinute, ScopeMinute, GpuHour, JobUsageHour, GpuEvent, RescaleEvent, Allocation,
                  SchedulingRound, Job, Gpu, Node, RollupCursor):
        model.objects.all().delete()


# --- inventory and jobs ---------------------------------------------------------------------


def inventory(gpus: int) -> tuple[list[Tenant], list[tuple[int, str]]]:
    """Tenants, nodes and GPUs; returns the tenants and (GPU id, type key) in node order."""
    tenants = []
    for name, share, weight in TENANTS:
        tenant, _ = Tenant.objects.get_or_create(name=name, defaults={"fair_share_weight": weight})
        tenant.gpu_quota = int(gpus * share)
        tenant.save(update_fields=["gpu_quota"])
        tenants.append(tenant)
    nodes = -(-gpus // 8)
    Node.objects.bulk_create(Node(hostname=f"node-{n:04d}", schedulable=n != nodes - 1 or nodes == 1)
                             for n in range(nodes))
    node_ids = list(Node.objects.order_by("hostname").values_list("pk", flat=True))
    rows = []
    for i in range(gpus):
        model, memory, watts, _ = GPU_TYPES[0 if i < gpus // 2 or gpus == 1 else 1]
        rows.append(Gpu(node_id=node_ids[i // 8], index=i % 8, uuid=f"GPU-seed-{i:05d}", model=model,
                        memory_mib=memory, power_limit_w=watts, power_default_w=watts))
    Gpu.objects.bulk_create(rows, batch_size=2000)
    found = Gpu.objects.order_by("node__hostname", "index").values_list("pk", "model")
    return tenants, [(pk, next(t[3] for t in GPU_TYPES if t[0] == model)) for pk, model in found]


def _job(rng: np.random.Generator, tenants: list[Tenant], n: int, submitted: datetime, state: str,
         width: int) -> Job:
    profile = PROFILES[int(rng.integers(len(PROFILES)))]
    elastic = rng.random() < 0.3
    return Job(tenant=tenants[int(rng.choice(len(tenants), p=[t[1] for t in TENANTS]))], name=f"{profile}-{n:05d}",
               workload_profile=profile, total_work=float(rng.uniform(1e5, 1e7)),
               min_gpus=max(1, width // 2) if elastic else width, max_gpus=width, state=state, submitted_at=submitted)


def finished_jobs(rng: np.random.Generator, tenants: list[Tenant], count: int, start: datetime,
                  now: datetime) -> list[tuple[Job, float]]:
    """``count`` jobs submitted in [start, now − 12 h), in submission order, each with its run time (seconds)."""
    span = max(60.0, (now - timedelta(hours=12) - start).total_seconds())
    offsets = np.sort(rng.uniform(0, span, count))
    runtimes = np.clip(rng.lognormal(np.log(4 * 3600), 0.9, count), 600, 10 * 3600)
    states = rng.choice([JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED], size=count, p=[0.85, 0.10, 0.05])
    return [(_job(rng, tenants, i, start + timedelta(seconds=float(offsets[i])), str(states[i]),
                  int(rng.choice(WIDTHS))), float(runtimes[i])) for i in range(count)]


def place(rng: np.random.Generator, jobs: list[tuple[Job, float]], gpu_rows: list[tuple[int, str]],
          now: datetime) -> list[Run]:
    """First come, first served onto the GPUs that free up first (a heap of free times)."""
    usable = _usable(gpu_rows)
    free: list[tuple[float, int]] = [(0.0, gpu) for gpu in usable]
    heapq.heapify(free)
    runs = []
    origin = jobs[0][0].submitted_at if jobs else now
    for job, runtime in jobs:
        width = min(job.max_gpus, len(free))
        job.max_gpus, job.min_gpus = width, min(job.min_gpus, width)  # a small cluster: the widest jobs shrink
        taken = [heapq.heappop(free) for _ in range(width)]
        begin = max((job.submitted_at - origin).total_seconds(), taken[-1][0])
        end = min(begin + runtime, (now - origin).total_seconds() - 60)
        for _, gpu in taken:
            heapq.heappush(free, (end, gpu))
        runs.append(Run(job, [gpu for _, gpu in taken], origin + timedelta(seconds=begin),
                        origin + timedelta(seconds=max(end, begin)), bool(rng.integers(IDLE_ONE_IN) == 0), width))
    return runs


def _usable(gpu_rows: list[tuple[int, str]]) -> list[int]:
    """GPUs that may run jobs: healthy, not on the cordoned node (``gpu_events`` marks the lost ones later)."""
    cordoned = set(Gpu.objects.filter(node__schedulable=False).values_list("pk", flat=True))
    return [gpu for gpu, _ in gpu_rows if gpu not in cordoned]


def running_and_pending(rng: np.random.Generator, tenants: list[Tenant], gpu_rows: list[tuple[int, str]],
                        runs: list[Run], now: datetime) -> list[Run]:
    """Jobs running now on about 70 % of the usable GPUs (free since they started), and 60 pending jobs."""
    busy_until = {gpu: run.end for run in runs for gpu in run.gpus if run.end is not None}
    free = [gpu for gpu in _usable(gpu_rows)]
    rng.shuffle(free)
    target, n = int(len(free) * 0.7), 0
    live: list[Run] = []
    while free and sum(r.width for r in live) < target:
        width = min(int(rng.choice(WIDTHS)), len(free))
        gpus, free = free[:width], free[width:]
        earliest = max([busy_until.get(g) or now - timedelta(hours=12) for g in gpus])
        started = earliest + (now - earliest) * float(rng.uniform(0.05, 0.9))
        job = _job(rng, tenants, 90_000 + n, started - timedelta(minutes=float(rng.exponential(5))),
                   JobState.RUNNING, width)
        live.append(Run(job, gpus, started, None, bool(rng.integers(IDLE_ONE_IN) == 0), width))
        n += 1
    pending = [_job(rng, tenants, 95_000 + i, now - timedelta(minutes=float(rng.uniform(1, 180))),
                    JobState.PENDING, int(rng.choice(WIDTHS))) for i in range(60)]
    for job in pending:
        job.pending_reason = "waiting for free GPUs of its type"
    Job.objects.bulk_create(pending)
    return live


def save_jobs(runs: list[Run], now: datetime) -> None:
    """The placed jobs with their start, finish and GPU time (run.job gets its primary key)."""
    for r in runs:
        r.job.started_at, r.job.finished_at = r.start, r.end
        r.job.attained_gpu_seconds = ((r.end or now) - r.start).total_seconds() * len(r.gpus)
    Job.objects.bulk_create([r.job for r in runs], batch_size=2000)


# --- allocations, events and rounds -----------------------------------------------------------


def write_runs(runs: list[Run], now: datetime) -> None:
    """Allocations, job timings and states, hourly rounds, and a start (and finish) event per job."""
    insert_rows(Allocation, ("job_id", "gpu_id", "started_at", "ended_at"),
                ((r.job.pk, gpu, r.start, r.end) for r in runs for gpu in r.gpus))
    hours = _hourly_rounds(runs, now)
    insert_rows(RescaleEvent, ("job_id", "round_id", "at", "kind", "from_gpus", "to_gpus", "reason", "actor_id"),
                _events(runs, hours))


def _hourly_rounds(runs: list[Run], now: datetime) -> dict[datetime, int]:
    """One ``SchedulingRound`` per hour that had a start or finish, plus the last one a minute ago."""
    policy = scheduler_settings().policy
    hours = sorted({floor(t, HOURS.width) for r in runs for t in (r.start, r.end) if t is not None})
    SchedulingRound.objects.bulk_create(
        [SchedulingRound(policy=policy, started_at=h, finished_at=h + timedelta(seconds=1), status=RoundStatus.OK,
                         duration_ms=40.0) for h in hours], batch_size=2000)
    rows = dict(SchedulingRound.objects.values_list("started_at", "pk"))
    recent = [r for r in runs if r.end is None and r.start > now - timedelta(minutes=30)]
    last = SchedulingRound.objects.create(
        policy=policy, started_at=now - timedelta(minutes=1), finished_at=now - timedelta(seconds=59),
        status=RoundStatus.OK, jobs_considered=len(runs), decisions=len(recent), starts=len(recent), duration_ms=55.0)
    rows[last.started_at] = last.pk
    return rows


def _events(runs: list[Run], rounds: dict[datetime, int]) -> Iterator[tuple[Any, ...]]:
    last = max(rounds)
    for r in runs:
        round_at = last if r.end is None and r.start > last - timedelta(minutes=30) else floor(r.start, HOURS.width)
        nodes = "one node" if r.width <= 8 else f"{-(-r.width // 8)} nodes"
        yield (r.job.pk, rounds.get(round_at), r.start, RescaleKind.START.value, 0, r.width,
               f"started on {r.width} GPU{'s' if r.width > 1 else ''} ({nodes}): first in line, GPUs free", None)
        if r.end is not None:
            kind = (RescaleKind.CANCEL if r.job.state == JobState.CANCELLED else RescaleKind.FINISH).value
            reason = {"succeeded": "finished its work", "failed": "failed: exit code 1",
                      "cancelled": "cancelled by its owner"}[r.job.state]
            yield (r.job.pk, rounds.get(floor(r.end, HOURS.width)), r.end, kind, r.width, 0, reason, None)


# --- telemetry ---------------------------------------------------------------------------------


def write_telemetry(rng: np.random.Generator, gpu_rows: list[tuple[int, str]], runs: list[Run], start: datetime,
                    now: datetime) -> dict[str, int]:
    """Hour and minute rollups, job hours and the last minutes of raw samples, from the runs."""
    watts = {gpu: next(t[2] for t in GPU_TYPES if t[3] == kind) for gpu, kind in gpu_rows}
    by_gpu: dict[int, list[Run]] = defaultdict(list)
    for r in runs:
        for gpu in r.gpus:
            by_gpu[gpu].append(r)
    counts = {"gpu_hours": _rollups(rng, HOURS.width, start, now, gpu_rows, by_gpu, watts, GpuHour)}
    counts["gpu_minutes"] = _rollups(rng, MINUTES.width, now - timedelta(days=MINUTE_DAYS), now, gpu_rows, by_gpu,
                                     watts, GpuMinute)
    counts["job_hours"] = _job_hours(runs, start, now, watts)
    minutes_from = floor(now - timedelta(days=MINUTE_DAYS), MINUTES.width)
    counts["scope_minutes"] = write_scope_minutes(minutes_from, now, _tenant_minutes(runs, minutes_from, now, watts))
    counts["raw_samples"] = _raw_samples(rng, gpu_rows, by_gpu, watts, now)
    last_minute = GpuMinute.objects.order_by("-id").values_list("id", flat=True).first() or 0
    last_sample = GpuSample.objects.order_by("-id").values_list("id", flat=True).first() or 0
    RollupCursor.objects.update_or_create(level=MINUTES.name, defaults={"last_id": last_sample, "rolled_until": now})
    RollupCursor.objects.update_or_create(level=HOURS.name, defaults={"last_id": last_minute, "rolled_until": now})
    return counts


def _busy_util(rng: np.random.Generator, idle: bool, size: int) -> np.ndarray:
    return rng.uniform(1.0, 3.0, size) if idle else rng.uniform(70.0, 98.0, size)


def _rollups(rng: np.random.Generator, width: timedelta, start: datetime, now: datetime,
             gpu_rows: list[tuple[int, str]], by_gpu: dict[int, list[Run]], watts: dict[int, int],
             model: type[GpuHour] | type[GpuMinute]) -> int:
    """Per GPU and bucket of ``width`` in [start, now): held and idle seconds, utilisation, power, energy.

    Written bucket by bucket, every GPU's row of a bucket together, as the roll-ups write them (the rows of one
    time range then sit together on disk, which range queries on ``start`` rely on).
    """
    first = floor(start, width)
    buckets = int((now - first) / width)
    seconds = width.total_seconds()
    held, idle, util_s = (np.zeros((len(gpu_rows), buckets)) for _ in range(3))
    for i, (gpu, _) in enumerate(gpu_rows):
        for r in by_gpu.get(gpu, []):
            _paint(held[i], idle[i], util_s[i], rng, r, first, width, now)
    limit = np.array([[watts[gpu]] for gpu, _ in gpu_rows], dtype=float)
    util = util_s / seconds
    power = limit * (0.25 + 0.55 * util / 100)
    columns = (np.round(util, 1), np.round(np.minimum(100.0, util * 1.05 + 1), 1),
               np.round(held / seconds * MEMORY_USED_MIB, 0), np.round(power, 1), np.round(power * 1.08, 1),
               np.round(30 + 40 * power / limit, 1), power * seconds, held, idle)
    gpu_ids = [gpu for gpu, _ in gpu_rows]
    step = max(1, 50_000 // max(1, len(gpu_rows)))
    for k0 in range(0, buckets, step):
        k1 = min(buckets, k0 + step)
        starts = [first + k * width for k in range(k0, k1) for _ in gpu_ids]
        rows = zip(gpu_ids * (k1 - k0), starts, repeat(int(seconds // SAMPLE_SECONDS)), repeat(True),
                   *(c[:, k0:k1].T.ravel().tolist() for c in columns))
        insert_rows(model, ROLLUP_COLUMNS, rows)
    return buckets * len(gpu_rows)


def _paint(held: np.ndarray, idle: np.ndarray, util_s: np.ndarray, rng: np.random.Generator, run: Run,
           first: datetime, width: timedelta, now: datetime) -> None:
    """Add ``run``'s time on one GPU to the buckets it overlaps (partial buckets at both ends)."""
    w = width.total_seconds()
    a = max(0.0, (run.start - first).total_seconds()) / w
    b = min(len(held) * w, ((run.end or now) - first).total_seconds()) / w
    if b <= a:
        return
    lo, hi = int(a), min(len(held), int(np.ceil(b)))
    cover = np.clip(np.minimum(np.arange(lo, hi) + 1, b) - np.maximum(np.arange(lo, hi), a), 0, 1) * w
    held[lo:hi] += cover
    util_s[lo:hi] += cover * _busy_util(rng, run.idle, hi - lo)
    if run.idle:
        idle[lo:hi] += cover


def _job_hours(runs: list[Run], start: datetime, now: datetime, watts: dict[int, int]) -> int:
    first = floor(start, HOURS.width)
    rows = []
    for r in runs:
        a, b = max(r.start, first), r.end or now
        hour = floor(a, HOURS.width)
        per_gpu_w = sum(watts[g] for g in r.gpus) / len(r.gpus) * (0.26 if r.idle else 0.72)
        while hour < b:
            overlap = (min(b, hour + HOURS.width) - max(a, hour)).total_seconds() * len(r.gpus)
            if overlap > 0:
                rows.append((r.job.pk, hour, overlap, overlap if r.idle else 0.0, overlap * per_gpu_w))
            hour += HOURS.width
    insert_rows(JobUsageHour, ("job_id", "start", "allocated_seconds", "idle_allocated_seconds", "energy_j"), rows)
    return len(rows)


def _tenant_minutes(runs: list[Run], start: datetime, now: datetime,
                    watts: dict[int, int]) -> dict[tuple[int, datetime], JobBucket]:
    """Each tenant's minutes in [start, now) from its jobs' runs, as the rollups sum them from samples."""
    tenants: dict[tuple[int, datetime], JobBucket] = {}
    for r in runs:
        a, b = max(r.start, start), r.end or now
        per_gpu_w = sum(watts[g] for g in r.gpus) / len(r.gpus) * (0.26 if r.idle else 0.72)
        minute = floor(a, MINUTES.width)
        while minute < b:
            overlap = (min(b, minute + MINUTES.width) - max(a, minute)).total_seconds() * len(r.gpus)
            if overlap > 0:
                bucket = tenants.setdefault((r.job.tenant_id, minute), JobBucket())
                bucket.usage.allocated_seconds += overlap
                bucket.usage.idle_allocated_seconds += overlap if r.idle else 0.0
                bucket.usage.energy_j += overlap * per_gpu_w
                bucket.util.total += (2.0 if r.idle else 84.0) * len(r.gpus)  # the means of ``_busy_util``
                bucket.util.count += len(r.gpus)
                bucket.gpus.update(r.gpus)
            minute += MINUTES.width
    return tenants


def _raw_samples(rng: np.random.Generator, gpu_rows: list[tuple[int, str]], by_gpu: dict[int, list[Run]],
                 watts: dict[int, int], now: datetime) -> int:
    holder = {gpu: r for gpu, rs in by_gpu.items() for r in rs if r.end is None}
    columns = ("gpu_id", "at", "simulated", "job_id", "gpu_util", "power_w", "temperature_c", "power_limit_w")
    rows = []
    for k in range(RAW_MINUTES * 60 // SAMPLE_SECONDS):
        at = now - timedelta(seconds=k * SAMPLE_SECONDS)
        for gpu, _ in gpu_rows:
            run = holder.get(gpu)
            util = float(_busy_util(rng, run.idle, 1)[0]) if run else 0.0
            power = watts[gpu] * (0.25 + 0.55 * util / 100)
            rows.append((gpu, at, True, run.job.pk if run else None, round(util, 1), round(power, 1),
                         round(30 + 40 * power / watts[gpu], 1), float(watts[gpu])))
    insert_rows(GpuSample, columns, rows)
    return len(rows)


def gpu_events(rng: np.random.Generator, gpu_rows: list[tuple[int, str]], now: datetime) -> int:
    """Three GPUs lost (critical events), two degraded after XID warnings; none of them holds a job now."""
    held = set(Allocation.objects.filter(ended_at__isnull=True).values_list("gpu_id", flat=True))
    spare = [gpu for gpu, _ in gpu_rows if gpu not in held]
    lost, degraded = spare[-3:], spare[-5:-3]
    for gpu in lost:
        at = now - timedelta(minutes=float(rng.uniform(20, 600)))
        Gpu.objects.filter(pk=gpu).update(health=GpuHealth.LOST, health_changed_at=at)
        GpuEvent.objects.create(gpu_id=gpu, at=at, kind=EventKind.LOST, severity=Severity.CRITICAL, code=79,
                                message="GPU has fallen off the bus (XID 79)")
    for gpu in degraded:
        at = now - timedelta(hours=float(rng.uniform(1, 48)))
        Gpu.objects.filter(pk=gpu).update(health=GpuHealth.DEGRADED, health_changed_at=at)
        GpuEvent.objects.create(gpu_id=gpu, at=at, kind=EventKind.XID, severity=Severity.WARNING, code=63,
                                message="ECC page retirement or row remapping event (XID 63)")
    return len(lost) + len(degraded)
