"""/metrics: DCGM names and labels parsed back, NULL metrics absent, cluster metrics, and who may read it."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from scheduler.jobs import verbs
from scheduler.models import Allocation, Job, JobState, Node, Tenant
from telemetry import storage
from telemetry.readings import GpuReading

pytestmark = pytest.mark.django_db


def scrape(client: Client, **extra: str) -> dict[str, list]:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {family.name: family.samples for family in text_string_to_metric_families(response.content.decode())}


@pytest.fixture
def metrics_token(settings) -> str:
    settings.METRICS_TOKEN = "s3cret-scrape"
    return "s3cret-scrape"


@pytest.fixture
def telemetry(node: Node, job: Job, other_tenant: Tenant, now: datetime) -> None:
    """GPU 0 measured and held by ``job`` (vision) at 2 %, GPU 1 simulated with utilisation only, GPU 2 stale."""
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    Allocation.objects.create(job=job, gpu=node.gpus.get(index=0), started_at=now - timedelta(hours=1))
    Allocation.objects.create(job=job, gpu=node.gpus.get(index=1), started_at=now - timedelta(hours=1))
    for tenant, age in (("vision", 100), ("language", 300)):
        verbs.submit_job(tenant=tenant, name=f"waits-{age}", workload_profile="cifar10", total_work=1,
                            submitted_at=now - timedelta(seconds=age))
    storage.ingest([
        GpuReading("GPU-node1-0", now - timedelta(seconds=5), gpu_util=2.0, mem_util=1.0, mem_used_mib=2048.0,
                   power_w=95.5, energy_j=1234.5, temperature_c=41.0, sm_clock_mhz=1410.0),
        GpuReading("GPU-node1-1", now - timedelta(seconds=5), simulated=True, gpu_util=80.0),
        GpuReading("GPU-node1-2", now - timedelta(minutes=6), gpu_util=50.0, power_w=300.0),
    ])


def test_gpu_metrics_use_dcgm_names_units_and_labels(telemetry: None, operator_client: Client) -> None:
    families = scrape(operator_client)
    util = {s.labels["UUID"]: s for s in families["DCGM_FI_DEV_GPU_UTIL"]}
    assert set(util) == {"GPU-node1-0", "GPU-node1-1"}  # GPU 2's latest sample is stale
    assert util["GPU-node1-0"].labels == {
        "gpu": "0", "UUID": "GPU-node1-0", "device": "nvidia0", "modelName": "NVIDIA A100-SXM4-80GB",
        "Hostname": "node1", "simulated": "false",
    }
    assert util["GPU-node1-1"].labels["simulated"] == "true" and util["GPU-node1-1"].value == 80
    measured = {name: [(s.labels["UUID"], s.value) for s in samples] for name, samples in families.items()
                if name.startswith("DCGM_")}
    assert measured == {
        "DCGM_FI_DEV_GPU_UTIL": [("GPU-node1-0", 2.0), ("GPU-node1-1", 80.0)],
        "DCGM_FI_DEV_MEM_COPY_UTIL": [("GPU-node1-0", 1.0)],
        "DCGM_FI_DEV_FB_USED": [("GPU-node1-0", 2048.0)],  # GPU 1 reported no memory: absent, not 0
        "DCGM_FI_DEV_POWER_USAGE": [("GPU-node1-0", 95.5)],
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": [("GPU-node1-0", 1234500.0)],  # mJ
        "DCGM_FI_DEV_GPU_TEMP": [("GPU-node1-0", 41.0)],
        "DCGM_FI_DEV_SM_CLOCK": [("GPU-node1-0", 1410.0)],
    }


def test_cluster_metrics(telemetry: None, operator_client: Client) -> None:
    families = scrape(operator_client)
    value = {(s.name, tuple(sorted(s.labels.items()))): s.value for samples in families.values() for s in samples}
    assert value[("cluster_ops_queue_length", ())] == 2
    waits = {s.labels["quantile"]: s.value for s in families["cluster_ops_queue_wait_seconds"]}
    assert waits["0.5"] == pytest.approx(200, abs=5) and waits["0.99"] == pytest.approx(298, abs=5)
    assert value[("cluster_ops_tenant_allocated_gpus", (("tenant", "vision"),))] == 2
    assert value[("cluster_ops_tenant_allocated_gpus", (("tenant", "language"),))] == 0
    assert value[("cluster_ops_tenant_share", (("tenant", "vision"),))] == 0.5  # 2 of the 4 GPUs
    assert value[("cluster_ops_tenant_entitlement", (("tenant", "language"),))] == 0.5  # quotas 8 and 8
    assert value[("cluster_ops_fairness_jain", ())] == 0.5  # share ÷ entitlement: 1 and 0
    assert value[("cluster_ops_idle_allocated_gpus", ())] == 1  # GPU 0: held, 2 % < 5 %


def test_an_empty_cluster_exports_no_guesses(operator_client: Client) -> None:
    families = scrape(operator_client)
    assert families["DCGM_FI_DEV_GPU_UTIL"] == [] and families["cluster_ops_fairness_jain"] == []
    assert families["cluster_ops_queue_wait_seconds"] == []
    assert families["cluster_ops_queue_length"][0].value == 0


def test_the_right_bearer_token_reads(metrics_token: str, client: Client, db: None) -> None:
    assert "cluster_ops_queue_length" in scrape(client, HTTP_AUTHORIZATION=f"Bearer {metrics_token}")


@pytest.mark.parametrize("header", [None, "Bearer wrong", "Token s3cret-scrape", "Bearer"])
def test_without_the_token_anonymous_clients_get_401(metrics_token: str, client: Client, header: str | None) -> None:
    response = client.get("/metrics", **({"HTTP_AUTHORIZATION": header} if header else {}))
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith('Bearer realm="metrics"')
    assert ("invalid_token" in response["WWW-Authenticate"]) == (header == "Bearer wrong")


def test_with_nothing_configured_only_staff_read(client: Client, db: None) -> None:
    assert client.get("/metrics").status_code == 401
    client.force_login(User.objects.create_user("alice", password="pw-alice-123"))
    assert client.get("/metrics").status_code == 403
    client.force_login(User.objects.create_user("ops", password="pw-ops-12345", is_staff=True))
    assert client.get("/metrics").status_code == 200


@pytest.mark.parametrize("address, status", [("10.1.2.3", 200), ("192.168.0.7", 200), ("10.2.0.1", 401)])
def test_the_ip_allow_list_admits_addresses_and_networks(settings, client: Client, db: None, address: str,
                                                          status: int) -> None:
    settings.METRICS_ALLOWED_IPS = ["10.1.0.0/16", "192.168.0.7/32"]
    assert client.get("/metrics", REMOTE_ADDR=address).status_code == status


def test_the_allow_list_setting_names_a_bad_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    from cluster_ops import settings as product

    monkeypatch.setenv("METRICS_ALLOWED_IPS", "10.0.0.0/8, ::1, not-an-ip")
    errors: list[str] = []
    monkeypatch.setattr(product, "CONFIGURATION_ERRORS", errors)
    assert product.envnetworks("METRICS_ALLOWED_IPS") == ["10.0.0.0/8", "::1/128"]
    assert errors == ["METRICS_ALLOWED_IPS: 'not-an-ip' is not an IP address or network"]


def test_only_get_is_served(operator_client: Client) -> None:
    assert operator_client.post("/metrics").status_code == 405
