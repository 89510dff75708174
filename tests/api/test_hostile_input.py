"""Hostile inputs, each refused with a 400 (or 409) naming its field, and nothing stored.

Each test here failed before the bounds (``scheduler/bounds.py``) and the inventory check existed.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from scheduler import inventory as gpu_inventory
from scheduler.models import Job, JobReport, Node

from .conftest import new_job
from .test_report import report, running  # noqa: F401  (fixture)


@pytest.fixture
def inventory(db: None) -> Node:
    """128 A100s in 16 nodes of 8, as the demo's A100 half."""
    for n in range(16):
        specs = [gpu_inventory.GpuSpec(i, f"GPU-h{n}-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(8)]
        node = gpu_inventory.register_node(f"hostile{n}", specs)
    return node


def test_a_report_whose_throughput_overflows_is_refused_and_the_job_list_still_renders(
    running: Job, member_api: APIClient, staff_api: APIClient  # noqa: F811
) -> None:
    response = report(running, progress=1, step_seconds=1e-320, batch_size=128, gpus=1, throughput=None)
    assert response.status_code == 400 and "step_seconds" in response.json()
    assert not JobReport.objects.exists()
    assert Job.objects.get(pk=running.pk).last_throughput is None
    assert member_api.get("/api/jobs/").status_code == 200
    assert staff_api.get("/api/jobs/").status_code == 200


@pytest.mark.parametrize(("fields", "field"), [
    ({"gpus": 10_000}, "gpus"),  # the job holds 8
    ({"gpus": 9}, "gpus"),
    ({"progress": 1e308}, "progress"),
    ({"progress": 1_000_001.0}, "progress"),  # its total work is 1,000
    ({"progress": 1001.0}, "progress"),
    ({"throughput": 1e300}, "throughput"),
    ({"gpus": True}, "gpus"),
    ({"batch_size": 2**40}, "batch_size"),
])
def test_a_report_that_contradicts_its_job_is_refused(running: Job, fields: dict, field: str) -> None:  # noqa: F811
    response = report(running, **fields)
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not JobReport.objects.exists()


@pytest.mark.parametrize(("fields", "field"), [
    ({"total_work": True}, "total_work"),
    ({"total_work": 1e308}, "total_work"),
    ({"min_gpus": 2**63 - 1}, "min_gpus"),
    ({"max_gpus": 2**63 - 1}, "max_gpus"),
    ({"priority": 2**63 - 1}, "priority"),
    ({"priority": 2**31}, "priority"),
    ({"min_gpus": True}, "min_gpus"),
    ({"batch_size": 2**31}, "batch_size"),
    ({"name": "x" * 201}, "name"),
    ({"expected_seconds": "nan"}, "expected_seconds"),
    ({"expected_seconds": 0}, "expected_seconds"),
    ({"expected_seconds": 1e12}, "expected_seconds"),
    ({"expected_seconds": True}, "expected_seconds"),
])
def test_numbers_outside_their_documented_range_are_refused(member_api: APIClient, fields: dict, field: str) -> None:
    response = member_api.post("/api/jobs/", new_job(**fields), format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Job.objects.exists()


def test_an_unknown_gpu_type_is_refused_naming_what_exists(inventory: Node, member_api: APIClient) -> None:
    response = member_api.post("/api/jobs/", new_job(gpu_type="z80"), format="json")
    assert response.status_code == 400
    assert "a100: 128" in response.json()["gpu_type"][0]
    assert not Job.objects.exists()


def test_more_gpus_than_the_cluster_has_is_refused(inventory: Node, member_api: APIClient) -> None:
    response = member_api.post("/api/jobs/", new_job(min_gpus=200, max_gpus=200), format="json")
    assert response.status_code == 400 and "a100: 128" in response.json()["min_gpus"][0]
    past = member_api.post("/api/jobs/", new_job(min_gpus=128, max_gpus=256), format="json")  # its size is named
    assert past.status_code == 400 and "the cluster has 128 GPUs" in past.json()["max_gpus"][0]
    assert member_api.post("/api/jobs/", new_job(min_gpus=128, max_gpus=128), format="json").status_code == 201


def test_a_patch_cannot_raise_min_gpus_beyond_the_inventory(inventory: Node, job: Job, staff_api: APIClient) -> None:
    response = staff_api.patch(f"/api/jobs/{job.pk}/", {"min_gpus": 129, "max_gpus": 129}, format="json")
    assert response.status_code == 400 and "min_gpus" in response.json()
    assert Job.objects.get(pk=job.pk).min_gpus == 1


def test_an_idempotency_key_reused_with_another_body_is_a_conflict(member_api: APIClient) -> None:
    first = member_api.post("/api/jobs/", new_job(), format="json", HTTP_IDEMPOTENCY_KEY="run-7")
    again = member_api.post("/api/jobs/", new_job(), format="json", HTTP_IDEMPOTENCY_KEY="run-7")
    other = member_api.post("/api/jobs/", new_job(total_work=999.0), format="json", HTTP_IDEMPOTENCY_KEY="run-7")
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    assert "run-7" in other.json()["client_key"][0]
    assert Job.objects.count() == 1 and Job.objects.get().total_work == 100.0


def test_an_expected_duration_is_stored_and_shown(inventory: Node, member_api: APIClient) -> None:
    response = member_api.post("/api/jobs/", new_job(expected_seconds=5400), format="json")
    assert response.status_code == 201 and response.json()["expected_seconds"] == 5400
    assert response.json()["estimated_start"] is None  # no forecast made yet
    assert Job.objects.get().expected_seconds == 5400
