"""Telemetry in admin: read-only pages, and the acknowledge action on GPU events."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from scheduler.models import Node
from telemetry.models import GpuEvent, GpuHour, GpuMinute

from .readings_helpers import T0

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["gpuevent", "powercap", "gpuminute", "gpuhour"])
def test_pages_render_read_only(operator_client: Client, node: Node, name: str) -> None:
    gpu = node.gpus.get(index=0)
    GpuMinute.objects.create(gpu=gpu, start=T0, gpu_util_avg=12.5)
    GpuHour.objects.create(gpu=gpu, start=T0, gpu_util_avg=12.5)
    GpuEvent.objects.create(gpu=gpu, at=T0, kind="xid", severity="warning", code=13, message="XID 13")
    page = operator_client.get(reverse(f"admin:telemetry_{name}_changelist"))
    assert page.status_code == 200
    assert operator_client.get(reverse(f"admin:telemetry_{name}_add")).status_code == 403


def test_operators_acknowledge_events(operator_client: Client, node: Node) -> None:
    gpu = node.gpus.get(index=0)
    events = [GpuEvent.objects.create(gpu=gpu, at=T0, kind="lost", severity="critical", message=f"lost {i}")
              for i in range(2)]
    response = operator_client.post(reverse("admin:telemetry_gpuevent_changelist"), {
        "action": "acknowledge", "_selected_action": [events[0].pk],
    }, follow=True)
    assert "1 event(s) acknowledged." in response.content.decode()
    assert list(GpuEvent.objects.order_by("id").values_list("acknowledged", flat=True)) == [True, False]
    detail = operator_client.get(reverse("admin:telemetry_gpuevent_change", args=[events[0].pk])).content.decode()
    assert 'name="message"' not in detail  # the event itself cannot be edited
