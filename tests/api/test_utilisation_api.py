"""``GET /api/utilisation/``: the Utilisation page's series for scripts, hostile parameters refused by field."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from scheduler.models import Allocation, Job, Node, Tenant
from telemetry.models import ScopeMinute

from .conftest import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_api(operator) -> APIClient:  # type: ignore[no-untyped-def]
    return token_client(operator)


@pytest.fixture
def minutes(now, tenant: Tenant, node: Node) -> None:  # type: ignore[no-untyped-def]
    first = now.replace(second=0, microsecond=0) - timedelta(minutes=30)
    for i in range(30):
        start = first + i * timedelta(minutes=1)
        ScopeMinute.objects.create(scope="cluster", start=start, gpus=4, gpu_util_avg=50, allocated_seconds=180)
        ScopeMinute.objects.create(scope=f"tenant:{tenant.pk}", start=start, gpus=2, allocated_seconds=120)
        ScopeMinute.objects.create(scope=f"node:{node.pk}", start=start, gpus=4, allocated_seconds=180)


def test_the_cluster_minute_by_minute(staff_api: APIClient, minutes: None) -> None:
    body = staff_api.get("/api/utilisation/", {"scope": "cluster"}).json()
    assert body["step"] == "minute" and len(body["points"]) == 30
    assert body["points"][0]["allocated_gpus"] == 3 and body["points"][0]["gpu_util"] == 50


def test_a_member_reads_their_tenant(member_api: APIClient, minutes: None) -> None:
    body = member_api.get("/api/utilisation/", {"scope": "tenant:vision"}).json()
    assert [p["allocated_gpus"] for p in body["points"]] == [2] * 30


def test_hour_steps_include_the_running_hour(staff_api: APIClient, minutes: None, now) -> None:  # type: ignore[no-untyped-def]
    body = staff_api.get("/api/utilisation/", {"scope": "node:node1", "step": "hour"}).json()
    assert body["step"] == "hour" and body["points"] and body["points"][-1]["allocated_gpus"] == 3


@pytest.mark.parametrize(("query", "field"), [
    ({"scope": "galaxy"}, "scope"),
    ({"scope": "x" * 300}, "scope"),
    ({"start": "yesterday"}, "start"),
    ({"end": "2026-13-45T99:00:00Z"}, "end"),
    ({"start": "2026-12-01T10:00:00Z", "end": "2026-12-01T09:00:00Z"}, "start"),
    ({"start": "2025-01-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"}, "start"),
    ({"start": "2026-11-01T00:00:00Z", "end": "2026-11-05T00:00:00Z", "step": "minute"}, "step"),
    ({"step": "second"}, "step"),
])
def test_hostile_parameters_are_400s_naming_the_field(staff_api: APIClient, db: None, query: dict[str, str],
                                                       field: str) -> None:
    response = staff_api.get("/api/utilisation/", query)
    assert response.status_code == 400 and list(response.json()) == [field], response.content


def test_the_schema_documents_the_endpoint(staff_api: APIClient) -> None:
    schema = staff_api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/utilisation/"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"scope", "start", "end", "step"}


def test_the_totals_are_the_ledgers_the_same_as_a_reports(staff_api: APIClient, member_api: APIClient, job: Job,
                                                          node: Node, now) -> None:  # type: ignore[no-untyped-def]
    gpu = node.gpus.order_by("index").first()
    Allocation.objects.create(job=job, gpu=gpu, started_at=now - timedelta(minutes=90),
                              ended_at=now - timedelta(minutes=30))
    start, end = now - timedelta(hours=1), now - timedelta(minutes=10)

    cluster = staff_api.get("/api/utilisation/", {"start": start.isoformat(), "end": end.isoformat()}).json()
    mine = member_api.get("/api/utilisation/", {"scope": "tenant:vision", "start": start.isoformat(),
                                                "end": end.isoformat()}).json()

    assert cluster["totals"]["allocated_gpu_hours"] == pytest.approx(0.5)  # 30 of the 60 minutes held, clipped
    assert mine["totals"]["allocated_gpu_hours"] == pytest.approx(0.5)
    assert staff_api.get("/api/utilisation/", {"scope": "node:node1"}).json()["totals"] is None
