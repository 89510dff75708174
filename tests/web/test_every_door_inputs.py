"""Every door, one rule per field: what the API refuses, admin refuses too, with the API's message — a job the
cluster cannot run, a quota past the bounds, no work at all, a priority past the tenant's cap, a page size that is
not one — and admin never answers 500."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from scheduler.models import Job, Node, Tenant

from ..api.conftest import new_job, token_client

pytestmark = pytest.mark.django_db


def admin_job(tenant: Tenant, **fields: object) -> dict[str, object]:
    data = {"name": "resnet50", "tenant": tenant.pk, "workload_profile": "cifar10", "total_work": 100.0,
            "min_gpus": 1, "max_gpus": 1, "priority": 0, "gpu_type": "", "command": "", "script_path": ""}
    return {**data, **fields}


def admin_errors(response: object) -> dict[str, list[str]]:
    form = response.context["adminform"].form  # type: ignore[attr-defined]
    return {name: [str(e) for e in errors] for name, errors in form.errors.items()}


@pytest.mark.parametrize(("fields", "field"), [
    ({"min_gpus": 9, "max_gpus": 9}, "min_gpus"),  # more GPUs than the cluster has (failure 7)
    ({"gpu_type": "h100"}, "gpu_type"),  # a type it has none of (failure 7)
    ({"max_gpus": 10_000}, "max_gpus"),  # an upper bound past the cluster's size (failure 9)
    ({"total_work": 0}, "total_work"),  # no work: it would "succeed" at once (failure 9)
    ({"min_gpus": -2}, "min_gpus"), ({"min_gpus": 0}, "min_gpus"),  # one message for one rule (failure 9)
])
def test_admin_and_the_api_refuse_a_job_with_the_same_message(operator_client: Client, operator: User,
                                                             tenant: Tenant, node: Node, fields: dict,
                                                             field: str) -> None:
    response = operator_client.post(reverse("admin:scheduler_job_add"), admin_job(tenant, **fields))
    assert response.status_code == 200, response.status_code  # the form again, never a 500
    said_by_admin = admin_errors(response)
    api = token_client(operator).post("/api/jobs/", new_job(**fields), format="json")
    assert api.status_code == 400
    assert said_by_admin[field] == api.json()[field], (said_by_admin, api.json())
    assert not Job.objects.exists()


def test_max_gpus_past_the_cluster_names_its_size(operator: User, node: Node, tenant: Tenant) -> None:
    api = token_client(operator).post("/api/jobs/", new_job(max_gpus=10_000), format="json")
    assert "less than or equal to 4: the cluster has 4 GPUs (a100: 4)" in api.json()["max_gpus"][0]


def test_a_tenant_quota_past_the_bounds_is_refused(operator_client: Client, tenant: Tenant) -> None:
    url = reverse("admin:scheduler_tenant_change", args=[tenant.pk])
    response = operator_client.post(url, {"name": tenant.name, "gpu_quota": 99_999_999_999, "fair_share_weight": 1,
                                          "max_priority": 100, "_preview_confirmed": 1})
    assert response.status_code == 200 and "less than or equal to 65536" in response.content.decode()
    assert Tenant.objects.get(pk=tenant.pk).gpu_quota == tenant.gpu_quota


def test_a_tenants_members_give_priorities_only_up_to_its_cap(tenant: Tenant, node: Node, operator: User) -> None:
    member = User.objects.create_user("alice", password="pw-alice-123")
    tenant.members.add(member)
    api = token_client(member)
    refused = api.post("/api/jobs/", new_job(priority=1_000_000), format="json")
    assert refused.status_code == 400 and "less than or equal to 100" in refused.json()["priority"][0]
    job = api.post("/api/jobs/", new_job(priority=100), format="json").json()
    patched = api.patch(f"/api/jobs/{job['id']}/", {"priority": 500, "max_gpus": 2}, format="json")
    assert patched.status_code == 400 and Job.objects.get(pk=job["id"]).max_gpus == 1  # nothing half-written
    staff = token_client(operator).patch(f"/api/jobs/{job['id']}/", {"priority": 500}, format="json")
    assert staff.status_code == 200  # operators may order any job
    Tenant.objects.filter(pk=tenant.pk).update(max_priority=1_000)
    assert api.patch(f"/api/jobs/{job['id']}/", {"priority": 900}, format="json").status_code == 200


@pytest.mark.parametrize("size", ["-1", "abc", "0", "501", "9" * 30])
def test_a_page_size_that_is_not_one_is_a_400_naming_it(operator: User, size: str) -> None:
    response = token_client(operator).get(f"/api/jobs/?page_size={size}")
    assert response.status_code == 400 and "page_size" in response.json()


def test_a_good_page_size_is_honoured(operator: User, tenant: Tenant) -> None:
    from scheduler.jobs import verbs

    for index in range(3):
        verbs.submit_job(tenant=tenant, name=f"j{index}", workload_profile="cifar10", total_work=1.0)
    assert len(token_client(operator).get("/api/jobs/?page_size=2").json()["results"]) == 2
