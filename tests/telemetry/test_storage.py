"""Ingest (validation, unknown GPUs, the job at sample time), events, retention."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from scheduler.jobs import verbs
from scheduler.models import Job, Node, Tenant
from telemetry import storage
from telemetry.models import (
    GpuEvent,
    GpuHour,
    GpuMinute,
    GpuSample,
    JobUsageHour,
    JobUsageMinute,
    ScopeMinute,
    Severity,
)
from telemetry.readings import EventKind, GpuEventReading, GpuReading

from .readings_helpers import GPU0, T0, allocate, at, ingest, reading

pytestmark = pytest.mark.django_db


def test_ingest_stores_every_metric_and_keeps_unknown_ones_null(node: Node) -> None:
    assert ingest(reading(0, gpu_util=40, mem_used_mib=100, energy_j=5, processes=2, simulated=True)) == 1
    sample = GpuSample.objects.get()
    assert (sample.gpu.uuid, sample.at, sample.simulated) == (GPU0, T0, True)
    assert (sample.gpu_util, sample.mem_used_mib, sample.energy_j, sample.processes) == (40, 100, 5, 2)
    assert sample.power_w is None and sample.temperature_c is None


def test_each_sample_gets_the_job_that_held_the_gpu_when_it_was_read(node: Node, job: Job, tenant: Tenant) -> None:
    later = verbs.submit_job(tenant=tenant, name="later", workload_profile="cifar10", total_work=1)
    allocate(job, GPU0, 0, 30)
    allocate(later, GPU0, 30)
    ingest(reading(-5), reading(0), reading(29), reading(30), reading(40), reading(10, uuid="GPU-node1-1"))
    jobs = dict(GpuSample.objects.filter(gpu__uuid=GPU0).values_list("at", "job__name"))
    assert jobs == {at(-5): None, at(0): "resnet", at(29): "resnet", at(30): "later", at(40): "later"}
    assert GpuSample.objects.get(gpu__uuid="GPU-node1-1").job is None


def test_unknown_gpus_are_skipped_and_logged_once(node: Node, caplog: pytest.LogCaptureFixture) -> None:
    storage._unknown_logged.discard("GPU-stranger")
    with caplog.at_level(logging.WARNING, logger="telemetry.storage"):
        assert ingest(reading(0, uuid="GPU-stranger"), reading(0)) == 1
        assert ingest(reading(10, uuid="GPU-stranger")) == 0
    assert [r.getMessage() for r in caplog.records] == [
        "telemetry for unknown GPU GPU-stranger skipped: register it in the inventory"
    ]
    assert GpuSample.objects.get().gpu.uuid == GPU0


@pytest.mark.parametrize("bad", [
    {"gpu_util": 101.0}, {"power_w": -1.0}, {"energy_j": float("nan")}, {"temperature_c": float("inf")},
])
def test_impossible_values_refuse_the_whole_batch(node: Node, bad: dict) -> None:
    with pytest.raises(storage.InvalidReading, match=f"GPU {GPU0}.*{next(iter(bad))}"):
        ingest(reading(0, gpu_util=10), reading(10, **bad))
    assert not GpuSample.objects.exists()


def test_a_naive_time_is_refused(node: Node) -> None:
    with pytest.raises(storage.InvalidReading, match="no time zone"):
        storage.ingest([GpuReading(uuid=GPU0, at=T0.replace(tzinfo=None))])


def test_events_get_their_severity(node: Node) -> None:
    events = [
        GpuEventReading(GPU0, T0, EventKind.LOST, "fell off the bus"),
        GpuEventReading(GPU0, T0, EventKind.XID, "XID 13", code=13),
        GpuEventReading(GPU0, T0, EventKind.XID, "XID 79", code=79),
        GpuEventReading(GPU0, T0, EventKind.RECOVERED, "answers again"),
        GpuEventReading("GPU-stranger", T0, EventKind.ERROR, "skipped"),
    ]
    assert storage.record_events(events) == 4
    assert list(GpuEvent.objects.order_by("id").values_list("kind", "code", "severity")) == [
        ("lost", None, Severity.CRITICAL), ("xid", 13, Severity.WARNING), ("xid", 79, Severity.CRITICAL),
        ("recovered", None, Severity.INFO),
    ]
    assert storage.acknowledge_events(GpuEvent.objects.all()) == 4
    assert storage.acknowledge_events(GpuEvent.objects.all()) == 0


def test_prune_keeps_rows_exactly_at_the_cut_off(node: Node, job: Job, settings) -> None:
    settings.TELEMETRY_RAW_DAYS, settings.TELEMETRY_MINUTE_DAYS, settings.TELEMETRY_HOUR_DAYS = 7, 30, 365
    now = T0
    gpu = node.gpus.get(index=0)
    tick = timedelta(microseconds=1)
    for days, model in ((7, GpuSample), (30, GpuMinute), (365, GpuHour)):
        field = "at" if model is GpuSample else "start"
        cut = now - timedelta(days=days)
        model.objects.create(gpu=gpu, **{field: cut})
        model.objects.create(gpu=gpu, **{field: cut - tick})
    JobUsageHour.objects.create(job=job, start=now - timedelta(days=365))
    JobUsageHour.objects.create(job=job, start=now - timedelta(days=366))
    ScopeMinute.objects.create(scope="cluster", start=now - timedelta(days=30))
    ScopeMinute.objects.create(scope="cluster", start=now - timedelta(days=30) - tick)
    JobUsageMinute.objects.create(job=job, start=now - timedelta(days=30))
    JobUsageMinute.objects.create(job=job, start=now - timedelta(days=30) - tick)
    assert storage.prune(now) == {"samples": 1, "minutes": 1, "scope_minutes": 1, "job_minutes": 1, "hours": 1,
                                   "job_hours": 1}
    assert GpuSample.objects.get().at == now - timedelta(days=7)
    assert GpuMinute.objects.get().start == now - timedelta(days=30)
    assert GpuHour.objects.get().start == now - timedelta(days=365)
    assert storage.prune(now) == {"samples": 0, "minutes": 0, "scope_minutes": 0, "job_minutes": 0, "hours": 0,
                                  "job_hours": 0}
