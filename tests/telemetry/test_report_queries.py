"""The queries reports added to telemetry/queries.py: GPU-hours per owner, GPU failures, GPU and node downtime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.models import Gpu, GpuHealth, Node
from telemetry import queries
from telemetry.models import GpuEvent
from telemetry.readings import EventKind

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, tzinfo=UTC)
H = timedelta(hours=1)


def test_stretches_and_their_union() -> None:
    marks = [(T0 - H, True), (T0 + H, False), (T0 + 2 * H, True), (T0 + 3 * H, True), (T0 + 5 * H, False),
             (T0 + 6 * H, False), (T0 + 8 * H, True)]
    # Down before the range (clipped at T0), again 2–5 h (a repeated "lost" changes nothing), then from 8 h on.
    assert queries.stretches(marks, T0, T0 + 10 * H) == [(T0, T0 + H), (T0 + 2 * H, T0 + 5 * H),
                                                         (T0 + 8 * H, T0 + 10 * H)]
    assert queries.stretches([(T0 + 11 * H, True)], T0, T0 + 10 * H) == []
    assert queries.union_seconds([(T0, T0 + 2 * H), (T0 + H, T0 + 3 * H), (T0 + 5 * H, T0 + 6 * H)]) == 4 * 3600
    assert queries.union_seconds([]) == 0


def lose(gpu: Gpu, at: datetime, kind: EventKind = EventKind.LOST) -> None:
    GpuEvent.objects.create(gpu=gpu, at=at, kind=kind, message=str(kind))


def test_node_downtime_from_events_and_hand_marked_health(node: Node) -> None:
    g0, g1, g2, g3 = node.gpus.order_by("index")
    lose(g0, T0 - 2 * H)  # lost before the range, recovered 1 h into it
    lose(g0, T0 + H, EventKind.RECOVERED)
    lose(g1, T0 + 30 * 60 * timedelta(seconds=1))  # 00:30 → 02:00, overlapping g0's
    lose(g1, T0 + 2 * H, EventKind.RECOVERED)
    Gpu.objects.filter(pk=g2.pk).update(health=GpuHealth.LOST, health_changed_at=T0 + 8 * H)  # by hand, no event
    Gpu.objects.filter(pk=g3.pk).update(health=GpuHealth.LOST, health_changed_at=T0 + 20 * H)  # after the range
    stretches = queries.gpu_down_stretches(T0, T0 + 10 * H)
    assert stretches == {g0.pk: [(T0, T0 + H)], g1.pk: [(T0 + H / 2, T0 + 2 * H)], g2.pk: [(T0 + 8 * H, T0 + 10 * H)]}
    [row] = queries.node_downtime(T0, T0 + 10 * H)
    assert (row.node, row.down_hours, row.lost_gpu_hours, row.gpus_down) == ("node1", 2 + 2, 1 + 1.5 + 2, 3)


def test_gpu_failures_count_events_and_health(node: Node) -> None:
    g0, g1 = node.gpus.order_by("index")[:2]
    lose(g0, T0 + H)
    GpuEvent.objects.create(gpu=g1, at=T0 + 2 * H, kind=EventKind.XID, code=79, message="fell off the bus")
    GpuEvent.objects.create(gpu=g1, at=T0 + 3 * H, kind=EventKind.XID, code=79, message="again")
    GpuEvent.objects.create(gpu=g1, at=T0 + 4 * H, kind=EventKind.XID, code=13, message="graphics exception")
    GpuEvent.objects.create(gpu=g1, at=T0 - H, kind=EventKind.XID, code=13, message="before the range")
    Gpu.objects.filter(pk=g0.pk).update(health=GpuHealth.LOST)
    failures = queries.gpu_failures(T0, T0 + 5 * H, limit=2)
    assert (failures.lost_events, failures.xid_events, failures.xid_codes) == (1, 3, {13: 1, 79: 2})
    assert (failures.gpus_lost_now, failures.gpus_degraded_now) == (1, 0)
    assert [(e.gpu, e.kind, e.code) for e in failures.recent] == [("node1/gpu1", "xid", 13), ("node1/gpu1", "xid", 79)]


