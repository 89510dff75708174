"""Building readings for the storage, rollup, query and /metrics tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.models import Allocation, Gpu, Job
from telemetry import storage
from telemetry.readings import GpuReading

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # a Monday noon, UTC: minute and hour buckets start here
GPU0 = "GPU-node1-0"  # the ``node`` fixture's GPUs are GPU-node1-0 … GPU-node1-3


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def reading(seconds: float, uuid: str = GPU0, **metrics: Any) -> GpuReading:
    return GpuReading(uuid=uuid, at=at(seconds), **metrics)


def ingest(*readings: GpuReading) -> int:
    return storage.ingest(list(readings))


def allocate(job: Job, uuid: str, start: float, end: float | None = None) -> Allocation:
    """``job`` holds GPU ``uuid`` from T0+start to T0+end (open when None)."""
    return Allocation.objects.create(job=job, gpu=Gpu.objects.get(uuid=uuid), started_at=at(start),
                                     ended_at=None if end is None else at(end))
