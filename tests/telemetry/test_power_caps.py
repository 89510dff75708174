"""Power caps: validation against each GPU's range, dispatch to the node, NVML apply and read-back, refusals,
simulated GPUs; the API endpoint and the admin action."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from cluster_ops.api_tokens import issue_token
from scheduler import inventory
from scheduler.models import Gpu, GpuHealth, Node
from telemetry import tasks
from telemetry.models import GpuEvent, PowerCap
from telemetry.power_caps import NOT_PERMITTED, NOT_SUPPORTED, apply_power_caps, request_power_cap
from telemetry.probe import Probe
from telemetry.simulated import collect_simulated

from .conftest import HOST, sent_to
from .fake_nvml import FakeNvml, no_permission

pytestmark = pytest.mark.django_db


@pytest.fixture
def capped_node(db: None) -> Node:
    """``HOST`` with two A100s that accept 100–400 W, and one GPU that reports no power constraints."""
    spec = {"model": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "power_limit_w": 400}
    return inventory.register_node(HOST, [
        inventory.GpuSpec(0, "GPU-h0", **spec, power_min_w=100, power_max_w=400, power_default_w=400),
        inventory.GpuSpec(1, "GPU-h1", **spec, power_min_w=100, power_max_w=400, power_default_w=400),
        inventory.GpuSpec(2, "GPU-h2", **spec),
    ])


def gpu(uuid: str) -> Gpu:
    return Gpu.objects.select_related("node").get(uuid=uuid)


def test_a_limit_outside_the_range_is_refused_naming_gpu_and_range(capped_node: Node) -> None:
    with pytest.raises(ValidationError) as error:
        request_power_cap([gpu("GPU-h0"), gpu("GPU-h1")], 50)
    messages = error.value.message_dict["watts"]
    assert messages[0] == f"{HOST}/gpu0 (NVIDIA A100-SXM4-80GB) accepts 100–400 W; 50 W is outside that range."
    assert len(messages) == 2 and not PowerCap.objects.exists()


@pytest.mark.parametrize("watts", [0, -5, 2.5, True])
def test_a_limit_must_be_whole_positive_watts(capped_node: Node, watts: Any) -> None:
    with pytest.raises(ValidationError, match="whole number of watts"):
        request_power_cap([gpu("GPU-h0")], watts)


def test_unknown_constraints_mean_not_supported(capped_node: Node) -> None:
    with pytest.raises(ValidationError) as error:
        request_power_cap([gpu("GPU-h0"), gpu("GPU-h2")], 300)
    assert error.value.message_dict["watts"] == [f"{HOST}/gpu2: {NOT_SUPPORTED}."]
    assert not PowerCap.objects.exists()


def test_a_node_cap_covers_its_physical_gpus_that_are_not_lost(capped_node: Node, operator: User,
                                                               django_capture_on_commit_callbacks: Any) -> None:
    Gpu.objects.filter(uuid="GPU-h2").delete()
    inventory.set_gpu_health([gpu("GPU-h1")], GpuHealth.LOST)
    sent_to(f"node.{HOST}")
    with django_capture_on_commit_callbacks(execute=True):
        caps = request_power_cap(capped_node, 250, actor=operator)
    assert [(cap.gpu.uuid, cap.requested_w, cap.status, cap.requested_by) for cap in caps] == [
        ("GPU-h0", 250, "pending", operator)
    ]
    assert sent_to(f"node.{HOST}") == [("telemetry.apply_power_caps", f"[[{caps[0].pk}], '{HOST}']")]


def test_the_agent_applies_through_nvml_and_reads_back(capped_node: Node, nvml: FakeNvml, operator: User) -> None:
    caps = [PowerCap.objects.create(gpu=gpu(uuid), requested_w=250, requested_by=operator,
                                    requested_at=timezone.now()) for uuid in ("GPU-h0", "GPU-h1")]
    nvml.gpus[1].fail["nvmlDeviceSetPowerManagementLimit"] = no_permission()
    assert tasks.apply_power_caps([cap.pk for cap in caps], HOST) == 2
    done, refused = (PowerCap.objects.get(pk=cap.pk) for cap in caps)
    assert (done.status, done.enforced_w, done.applied_at is not None) == ("applied", 250.0, True)
    assert nvml.gpus[0].limit_mw == 250_000 and gpu("GPU-h0").power_limit_w == 250
    assert (refused.status, refused.enforced_w, refused.message) == ("refused", None, NOT_PERMITTED)
    assert gpu("GPU-h1").power_limit_w == 400
    event = GpuEvent.objects.get(gpu__uuid="GPU-h0", kind="power_cap")
    assert "250 W by operator: applied" in event.message
    assert tasks.apply_power_caps([caps[0].pk], HOST) == 0  # redelivered: already done


def test_nvml_out_of_range_is_refused_with_nvmls_message(capped_node: Node, nvml: FakeNvml) -> None:
    nvml.gpus[0].constraints_mw = (300_000, 700_000)
    cap = PowerCap.objects.create(gpu=gpu("GPU-h0"), requested_w=250, requested_at=timezone.now())
    probe = Probe()
    apply_power_caps([cap.pk], probe, HOST)
    cap.refresh_from_db()
    assert (cap.status, cap.message) == ("refused", "NVML refused 250 W: Invalid Argument")


def test_a_message_for_another_node_changes_nothing(capped_node: Node, nvml: FakeNvml, settings: Any) -> None:
    settings.NODE_HOSTNAME = "elsewhere"
    cap = PowerCap.objects.create(gpu=gpu("GPU-h0"), requested_w=250, requested_at=timezone.now())
    assert tasks.apply_power_caps([cap.pk], HOST) == 0
    assert PowerCap.objects.get(pk=cap.pk).status == "pending"


def test_an_agent_without_nvml_simulates(capped_node: Node, no_nvml: FakeNvml) -> None:
    cap = PowerCap.objects.create(gpu=gpu("GPU-h0"), requested_w=300, requested_at=timezone.now())
    assert tasks.apply_power_caps([cap.pk], HOST) == 1
    cap.refresh_from_db()
    assert (cap.status, cap.enforced_w, cap.message) == ("applied", 300.0, "simulated")


def test_simulated_gpus_are_capped_at_once_and_sample_lower(capped_node: Node,
                                                            django_capture_on_commit_callbacks: Any) -> None:
    now = timezone.now()
    collect_simulated(now)
    sent_to(f"node.{HOST}")
    with django_capture_on_commit_callbacks(execute=True):
        [cap] = request_power_cap([gpu("GPU-h1")], 200)
    cap.refresh_from_db()
    assert (cap.status, cap.enforced_w, cap.message) == ("applied", 200.0, "simulated")
    assert sent_to(f"node.{HOST}") == []
    collect_simulated(now + timezone.timedelta(seconds=10))
    latest = gpu("GPU-h1").samples.order_by("-at").first()
    assert latest is not None and latest.power_limit_w == 200


# --- the API and admin ------------------------------------------------------------------


def api(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(user)}")
    return client


def test_api_staff_request_a_cap(capped_node: Node, operator: User, django_capture_on_commit_callbacks: Any) -> None:
    target = gpu("GPU-h0")
    with django_capture_on_commit_callbacks(execute=True):
        answer = api(operator).post(f"/api/gpus/{target.pk}/power-cap/", {"watts": 300}, format="json")
    assert answer.status_code == 202, answer.content
    assert answer.json()["requested_w"] == 300 and answer.json()["status"] == "pending"
    assert answer.json()["gpu"] == target.pk


def test_api_refuses_a_bad_limit_and_non_staff(capped_node: Node, operator: User) -> None:
    target, staff = gpu("GPU-h0"), api(operator)
    too_low = staff.post(f"/api/gpus/{target.pk}/power-cap/", {"watts": 50}, format="json")
    assert too_low.status_code == 400 and "accepts 100–400 W" in too_low.json()["watts"][0]
    member = User.objects.create_user("carol", password="pw-carol-123")
    assert api(member).post(f"/api/gpus/{target.pk}/power-cap/", {"watts": 300}, format="json").status_code == 403
    assert APIClient().post(f"/api/gpus/{target.pk}/power-cap/", {"watts": 300}).status_code == 401
    assert staff.post("/api/gpus/999999/power-cap/", {"watts": 300}, format="json").status_code == 404
    assert not PowerCap.objects.exists()


def test_admin_action_asks_the_watts_then_caps(capped_node: Node, operator_client: Client,
                                               django_capture_on_commit_callbacks: Any) -> None:
    chosen = {"action": "cap_power", "_selected_action": [gpu("GPU-h0").pk, gpu("GPU-h1").pk]}
    form = operator_client.post("/admin/scheduler/gpu/", chosen)
    assert form.status_code == 200 and b"accepts 100\xe2\x80\x93400 W" in form.content
    refused = operator_client.post("/admin/scheduler/gpu/", {**chosen, "apply": "1", "watts": "900"})
    assert "900 W is outside that range" in refused.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        done = operator_client.post("/admin/scheduler/gpu/", {**chosen, "apply": "1", "watts": "300"}, follow=True)
    assert "Power cap of 300 W requested for 2 GPU(s)" in done.content.decode()
    assert PowerCap.objects.filter(requested_w=300).count() == 2


def test_admin_node_action_caps_the_nodes_gpus(capped_node: Node, operator_client: Client,
                                               django_capture_on_commit_callbacks: Any) -> None:
    Gpu.objects.filter(uuid="GPU-h2").delete()
    chosen = {"action": "cap_power", "_selected_action": [capped_node.pk], "apply": "1", "watts": "350"}
    with django_capture_on_commit_callbacks(execute=True):
        operator_client.post("/admin/scheduler/node/", chosen)
    assert sorted(PowerCap.objects.values_list("gpu__uuid", flat=True)) == ["GPU-h0", "GPU-h1"]
