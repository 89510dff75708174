"""``bench_telemetry``: ingest speed, roll-up time and dashboard query times at cluster scale.

Run inside a throwaway database (``cluster_ops.common.benchdb``). The cluster: nodes of 8 GPUs,
three tenants, every other GPU held by a one-GPU job. Ingest sends the whole cluster's
readings per call, one call per 10 s tick, through ``storage.ingest``, with allocations
to attach. Then 7 days of hour rollups, 2 days of minute rollups and 7 days of job hours
are written directly (as the roll-ups would have) and each query is timed: the median of
``repeats`` runs after one warm-up run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction

from scheduler.models import Allocation, Gpu, Job, JobState, Node, Tenant
from telemetry import ledger, queries, storage
from telemetry.exporter import render
from telemetry.models import GpuHour, GpuMinute, GpuSample, JobUsageHour, RollupCursor
from telemetry.readings import GpuReading
from telemetry.rollups import HOURS, MINUTES, Level, floor, roll_up_hours, roll_up_minutes

TICK = timedelta(seconds=10)
TENANTS = ("vision", "language", "research")
ROLLUP_COLUMNS = ("gpu_id", "start", "samples", "simulated", "gpu_util_avg", "gpu_util_max", "mem_used_mib_avg",
                  "power_w_avg", "power_w_max", "temperature_c_max", "energy_j", "allocated_seconds",
                  "idle_allocated_seconds")


def run(samples: int, gpus: int, repeats: int = 5, now: datetime | None = None) -> dict[str, Any]:
    """Seed, measure, and return the figures (see the module doc)."""
    now = floor(now or datetime.now(UTC), HOURS.width)
    gpu_ids, jobs = seed_cluster(gpus, now - timedelta(days=8))
    report: dict[str, Any] = {"database": connection.vendor, "gpus": gpus}
    report["seed_s"] = {
        "hours_7d": _seconds(lambda: seed_rollups(HOURS, gpu_ids, now - timedelta(days=7), now)),
        "minutes_2d": _seconds(lambda: seed_rollups(MINUTES, gpu_ids, now - timedelta(days=2), now)),
        "job_hours_7d": _seconds(lambda: seed_job_hours(jobs, now - timedelta(days=7), now)),
    }
    mark_rolled_up(now)
    # Live samples come after the seeded week: [now, now + samples ÷ GPUs × 10 s).
    report["ingest"] = time_ingest(samples, now)
    until = floor(now + report["ingest"]["calls"] * TICK, HOURS.width) + HOURS.width
    report["roll_up_s"] = {
        "minutes": _seconds(lambda: roll_up_minutes(until)), "hours": _seconds(lambda: roll_up_hours(until)),
    }
    _analyze()
    report["roll_up_s"]["live_minute"] = time_live_minute(until)
    report["queries_ms"] = time_queries(now, repeats)
    report["queries_ms"]["metrics_scrape"] = _median_ms(lambda: render(until + MINUTES.width), repeats)
    return report


def seed_cluster(gpus: int, since: datetime) -> tuple[list[int], list[int]]:
    """Nodes of 8 GPUs, three tenants, a running one-GPU job on every other GPU; returns GPU and job ids."""
    with transaction.atomic():
        tenants = [Tenant.objects.create(name=name, gpu_quota=gpus // 3) for name in TENANTS]
        Node.objects.bulk_create(Node(hostname=f"gpu{n:04d}") for n in range(-(-gpus // 8)))
        nodes = list(Node.objects.order_by("hostname").values_list("pk", flat=True))
        Gpu.objects.bulk_create(
            (Gpu(node_id=nodes[i // 8], index=i % 8, uuid=uuid(i), model="NVIDIA A100-SXM4-80GB", memory_mib=81920,
                 power_limit_w=400) for i in range(gpus)), batch_size=1000)
        gpu_ids = list(Gpu.objects.order_by("node__hostname", "index").values_list("pk", flat=True))
        Job.objects.bulk_create(
            (Job(tenant=tenants[i % 3], name=f"job{i}", workload_profile="cifar10", total_work=1.0,
                 state=JobState.RUNNING, submitted_at=since, started_at=since) for i in range(gpus // 2)),
            batch_size=1000)
        jobs = list(Job.objects.order_by("pk").values_list("pk", flat=True))
        Allocation.objects.bulk_create(
            (Allocation(job_id=job, gpu_id=gpu_ids[2 * i], started_at=since) for i, job in enumerate(jobs)),
            batch_size=1000)
    return gpu_ids, jobs


def uuid(i: int) -> str:
    return f"GPU-bench-{i:05d}"


def time_ingest(samples: int, start: datetime) -> dict[str, float]:
    """Ingest ``samples`` readings, the whole cluster per call; the readings are built before the clock starts."""
    gpus = Gpu.objects.count()
    ticks = [_tick(gpus, start + k * TICK, k) for k in range(-(-samples // gpus))]
    began = time.perf_counter()
    stored = sum(storage.ingest(batch) for batch in ticks)
    seconds = time.perf_counter() - began
    return {"samples": stored, "calls": len(ticks), "seconds": round(seconds, 3),
            "samples_per_s": round(stored / seconds)}


def _tick(gpus: int, at: datetime, k: int) -> list[GpuReading]:
    return [
        GpuReading(uuid(i), at, gpu_util=float((i * 37 + k * 11) % 101), mem_util=20.0, mem_used_mib=40960.0,
                   mem_total_mib=81920.0, power_w=100.0 + (i + k) % 300, energy_j=1e6 + k * 2000.0,
                   temperature_c=55.0, sm_clock_mhz=1410.0, power_limit_w=400.0, processes=1)
        for i in range(gpus)
    ]


def time_live_minute(start: datetime) -> float:
    """Seconds to roll up one more minute of the whole cluster (six ticks), as beat does every minute."""
    gpus = Gpu.objects.count()
    for k in range(6):
        storage.ingest(_tick(gpus, start + k * TICK, k))
    return _seconds(lambda: roll_up_minutes(start + MINUTES.width))


def seed_rollups(level: Level, gpu_ids: list[int], start: datetime, end: datetime) -> None:
    """Write ``level``'s rollups for every GPU and bucket in [start, end), about 60,000 rows per insert."""
    buckets = int((end - start) / level.width)
    per_insert = max(1, 60_000 // len(gpu_ids))
    for first in range(0, buckets, per_insert):
        count = min(per_insert, buckets - first)
        with transaction.atomic():
            storage.insert_rows(level.model, ROLLUP_COLUMNS, _rollup_rows(level, gpu_ids, start, first, count))


def _rollup_rows(level: Level, gpu_ids: list[int], start: datetime, first: int, count: int) -> Iterator[tuple]:
    seconds = level.width.total_seconds()
    for k in range(first, first + count):
        at = start + k * level.width
        for n, gpu_id in enumerate(gpu_ids):
            util = float((n * 37 + k * 11) % 101)
            held = seconds if n % 2 == 0 else 0.0
            yield (gpu_id, at, int(seconds // 10), False, util, min(100.0, util + 5), 40960.0, 100 + 3 * util,
                   400.0, 60.0, (100 + 3 * util) * seconds, held, held if util < 5 else 0.0)


def mark_rolled_up(until: datetime) -> None:
    """The seeded rollups are final: the next roll-ups start after them, as in a cluster that ran for a week."""
    last_minute = GpuMinute.objects.order_by("-id").values_list("id", flat=True).first() or 0
    RollupCursor.objects.update_or_create(level=HOURS.name, defaults={"last_id": last_minute, "rolled_until": until})


def seed_job_hours(jobs: list[int], start: datetime, end: datetime) -> None:
    hours = int((end - start) / HOURS.width)
    rows = ((job, start + h * HOURS.width, 3600.0, 600.0 if (job + h) % 6 == 0 else 0.0, 1.08e6)
            for h in range(hours) for job in jobs)
    with transaction.atomic():
        storage.insert_rows(JobUsageHour, ("job_id", "start", "allocated_seconds", "idle_allocated_seconds",
                                           "energy_j"), rows)


def time_queries(now: datetime, repeats: int) -> dict[str, float]:
    week, two_days = now - timedelta(days=7), now - timedelta(days=2)
    timed: dict[str, Callable[[], object]] = {
        "utilisation_7d_hours": lambda: queries.utilisation(week, now),
        "utilisation_2d_minutes": lambda: queries.utilisation(two_days, now),
        "heatmap_7d_hours": lambda: queries.gpu_heatmap(week, now),
        "ledger_7d": lambda: ledger.read(week, now).by_tenant(),
    }
    return {name: _median_ms(query, repeats) for name, query in timed.items()}


def _median_ms(query: Callable[[], object], repeats: int) -> float:
    query()  # warm-up: connection, caches
    runs = []
    for _ in range(repeats):
        began = time.perf_counter()
        query()
        runs.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(runs), 1)


def _seconds(work: Callable[[], object]) -> float:
    began = time.perf_counter()
    work()
    return round(time.perf_counter() - began, 2)


def _analyze() -> None:
    """Give the planner statistics, as autovacuum (PostgreSQL) or a periodic ANALYZE (SQLite) would."""
    with connection.cursor() as cursor:
        for model in (GpuSample, GpuHour, GpuMinute, JobUsageHour):
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
