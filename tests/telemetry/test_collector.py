"""A node agent's collection against a fake NVML: discovery, samples, lost and recovered GPUs, no NVML at all."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from celery import Celery
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from cluster_ops.celery import app
from cluster_ops.services import sync_periodic_tasks
from scheduler import inventory
from scheduler.models import Gpu, GpuHealth, Node
from telemetry import collector, tasks
from telemetry.models import GpuEvent, GpuSample
from telemetry.schedule import COLLECT_SCHEDULE_NAME

from .conftest import HOST, sent_to
from .fake_nvml import FakeGpu, FakeNvml, install, lost

pytestmark = pytest.mark.django_db


def health(uuid: str) -> str:
    return Gpu.objects.get(uuid=uuid).health


def events(uuid: str) -> list[tuple[str, str]]:
    return [(e.kind, e.severity) for e in GpuEvent.objects.filter(gpu__uuid=uuid).order_by("id")]


def test_first_sample_registers_the_node_and_its_gpus_with_power_constraints(nvml: FakeNvml) -> None:
    result = collector.collect(HOST)
    node = Node.objects.get(hostname=HOST)
    gpus = list(node.gpus.order_by("index"))
    assert [gpu.uuid for gpu in gpus] == ["GPU-h0", "GPU-h1", "GPU-h2", "GPU-h3"]
    gpu = gpus[0]
    assert (gpu.model, gpu.memory_mib, gpu.power_limit_w) == ("NVIDIA H100 80GB HBM3", 81920, 700)
    assert (gpu.power_min_w, gpu.power_max_w, gpu.power_default_w, gpu.mig_parent_uuid) == (200, 700, 700, "")
    assert node.last_seen_at is not None
    assert result is not None and result.samples == 4 and not result.simulated
    sample = GpuSample.objects.get(gpu=gpu)
    assert (sample.simulated, sample.power_w, sample.gpu_util) == (False, pytest.approx(512.345), 87.0)


def test_mig_instances_are_registered_with_their_parent(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    settings.NODE_HOSTNAME = HOST
    fake = install(monkeypatch, [FakeGpu("GPU-p", name="NVIDIA A100-SXM4-80GB", migs=[FakeGpu("MIG-a"), None])])
    collector.collect(HOST)
    fake.release()
    mig = Gpu.objects.get(uuid="MIG-a")
    assert (mig.mig_parent_uuid, mig.index, mig.power_min_w, mig.power_max_w) == ("GPU-p", 100, None, None)
    assert GpuSample.objects.get(gpu=mig).power_w is None  # per physical GPU: the parent's sample has it
    assert GpuSample.objects.get(gpu__uuid="GPU-p").power_w is not None


def test_a_gpu_lost_mid_sample_is_marked_lost_and_the_others_still_sampled(nvml: FakeNvml) -> None:
    collector.collect(HOST)
    nvml.gpu("GPU-h2").fail["nvmlDeviceGetPowerUsage"] = lost()
    result = collector.collect(HOST)
    assert result is not None and result.lost == ("GPU-h2",) and result.samples == 3
    assert health("GPU-h2") == GpuHealth.LOST and health("GPU-h1") == GpuHealth.OK
    assert events("GPU-h2") == [("lost", "critical")]
    assert GpuSample.objects.filter(gpu__uuid="GPU-h2").count() == 1  # only the first sample

    collector.collect(HOST)  # still lost: no second event
    assert nvml.calls["nvmlInit"] == 2  # NVML re-initialised after the loss
    assert events("GPU-h2") == [("lost", "critical")]


def test_a_lost_gpu_that_answers_again_is_degraded_with_a_recovered_event(nvml: FakeNvml) -> None:
    collector.collect(HOST)
    nvml.gpu("GPU-h1").fail["nvmlDeviceGetTemperature"] = lost()
    collector.collect(HOST)
    nvml.gpu("GPU-h1").fail.clear()
    result = collector.collect(HOST)
    assert result is not None and result.recovered == ("GPU-h1",)
    assert health("GPU-h1") == GpuHealth.DEGRADED
    assert events("GPU-h1") == [("lost", "critical"), ("recovered", "info")]


def test_a_gpu_an_operator_marked_lost_stays_lost(nvml: FakeNvml) -> None:
    collector.collect(HOST)
    inventory.set_gpu_health([Gpu.objects.get(uuid="GPU-h0")], GpuHealth.LOST)
    collector.collect(HOST)
    assert health("GPU-h0") == GpuHealth.LOST and not events("GPU-h0")


def test_a_registered_gpu_no_longer_on_the_bus_is_lost(nvml: FakeNvml) -> None:
    collector.collect(HOST)
    collector.reset()  # the agent restarts…
    nvml.gpus.pop()  # …and one GPU is gone
    collector.collect(HOST)
    assert health("GPU-h3") == GpuHealth.LOST
    assert "not found" in GpuEvent.objects.get(gpu__uuid="GPU-h3").message


def test_without_nvml_the_nodes_gpus_are_simulated(no_nvml: FakeNvml, node: Node, settings: Any) -> None:
    settings.NODE_HOSTNAME = node.hostname
    result = collector.collect(node.hostname)
    assert result is not None and result.simulated and result.samples == 4
    assert set(GpuSample.objects.values_list("simulated", flat=True)) == {True}
    assert Node.objects.get(pk=node.pk).last_seen_at is not None


def test_the_task_refuses_a_message_for_another_node(nvml: FakeNvml) -> None:
    assert tasks.collect("someone-else") == 0
    assert not Node.objects.exists()
    assert tasks.collect(HOST) == 4


def test_beat_fan_out_reaches_only_nodes_whose_agent_collects(nvml: FakeNvml, node: Node) -> None:
    collector.collect(HOST)  # HOST's agent has collected; ``node`` (node1) never had an agent
    inventory.register_node("stale", [])
    Node.objects.filter(hostname="stale").update(last_seen_at=timezone.now() - timedelta(hours=2))
    sent_to(f"node.{HOST}")  # drain
    assert collector.send_collects(app, timezone.now()) == [HOST]
    assert sent_to(f"node.{HOST}") == [("telemetry.collect", "['gpu01']")]
    assert sent_to("node.node1") == [] and sent_to("node.stale") == []


def test_sync_schedules_creates_the_collect_entry(db: None, settings: Any) -> None:
    settings.TELEMETRY_SECONDS = 7
    sync_periodic_tasks()
    entry = PeriodicTask.objects.get(name=COLLECT_SCHEDULE_NAME)
    assert (entry.task, entry.interval.every, entry.expire_seconds) == ("telemetry.collect_nodes", 7, 7)


def test_an_agent_collects_once_when_it_starts(settings: Any) -> None:
    settings.NODE_HOSTNAME = HOST
    agent = Celery("agent", broker="memory://", set_as_current=False)
    agent.amqp.queues.select([f"node.{HOST}"])
    sent_to(f"node.{HOST}")
    tasks.collect_when_an_agent_starts(SimpleNamespace(app=agent))
    assert sent_to(f"node.{HOST}") == [("telemetry.collect", "['gpu01']")]
    web = Celery("web", broker="memory://", set_as_current=False)  # a worker on other queues does nothing
    tasks.collect_when_an_agent_starts(SimpleNamespace(app=web))
    assert sent_to(f"node.{HOST}") == []
