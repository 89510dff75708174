"""The jobs API: submit, list and filter, change, cancel; errors name their field; retries are safe."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from rest_framework.test import APIClient

from scheduler.api.errors import field_errors
from scheduler.models import Job, JobState, RescaleEvent, Tenant

from .conftest import new_job, token_client

# --- submitting ---------------------------------------------------------------------------


def test_submit_returns_the_job_with_its_report_token(member_api: APIClient, member: User) -> None:
    response = member_api.post("/api/jobs/", new_job(min_gpus=2, gpu_type="A100", batch_size=256,
                                                     command="python train.py"), format="json")
    assert response.status_code == 201
    body, job = response.json(), Job.objects.get()
    assert body["id"] == job.pk and body["report_token"] == job.report_token
    assert (body["tenant"], body["owner"], body["state"]) == ("vision", "alice", "pending")
    assert (job.min_gpus, job.max_gpus, job.gpu_type, job.batch_size, job.command) == (
        2, 2, "a100", 256, "python train.py"
    )


def test_job_detail_does_not_show_the_report_token(member_api: APIClient, job: Job) -> None:
    assert "report_token" not in member_api.get(f"/api/jobs/{job.pk}/").json()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"min_gpus": 0}, "min_gpus"),
        ({"min_gpus": 4, "max_gpus": 2}, "max_gpus"),
        ({"total_work": -1}, "total_work"),
        ({"total_work": "nan"}, "total_work"),
        ({"workload_profile": "resnet9000"}, "workload_profile"),
        ({"name": ""}, "name"),
        ({"tenant": "no-such-tenant"}, "tenant"),
        ({"tenant": "language"}, "tenant"),  # exists, but alice is not a member
        ({"batch_size": 0}, "batch_size"),
        ({"priority": "high"}, "priority"),
        ({"client_key": "k" * 256}, "client_key"),
    ],
)
def test_submit_errors_name_the_field(member_api: APIClient, other_tenant: Tenant, changes: dict, field: str) -> None:
    response = member_api.post("/api/jobs/", new_job(**changes), format="json")
    assert response.status_code == 400 and list(response.json()) == [field], response.json()
    assert not Job.objects.exists()


def test_service_errors_keep_their_field_and_the_rest_is_non_field() -> None:
    assert field_errors(ValidationError({"state": "no"})) == {"state": ["no"]}
    assert field_errors(ValidationError({"__all__": "no"})) == {"non_field_errors": ["no"]}
    assert field_errors(ValidationError("no")) == {"non_field_errors": ["no"]}


# --- idempotency ----------------------------------------------------------------------------


def test_a_repeated_idempotency_key_returns_the_stored_job(member_api: APIClient) -> None:
    first = member_api.post("/api/jobs/", new_job(), format="json", HTTP_IDEMPOTENCY_KEY="try-1")
    retry = member_api.post("/api/jobs/", new_job(), format="json", HTTP_IDEMPOTENCY_KEY="try-1")
    assert (first.status_code, retry.status_code) == (201, 200)
    assert retry.json()["id"] == first.json()["id"] and retry.json()["name"] == "resnet50"
    assert Job.objects.get().client_key == "try-1"


def test_the_key_may_come_in_the_body(member_api: APIClient) -> None:
    codes = [member_api.post("/api/jobs/", new_job(client_key="k1"), format="json").status_code for _ in range(2)]
    assert codes == [201, 200] and Job.objects.count() == 1


def test_header_and_body_keys_must_agree(member_api: APIClient) -> None:
    response = member_api.post("/api/jobs/", new_job(client_key="a"), format="json", HTTP_IDEMPOTENCY_KEY="b")
    assert response.status_code == 400 and list(response.json()) == ["client_key"]


def test_keys_are_per_tenant_and_jobs_without_keys_never_collide(staff_api: APIClient, other_tenant: Tenant,
                                                                tenant: Tenant) -> None:
    for tenant_name in ("vision", "language"):
        response = staff_api.post("/api/jobs/", new_job(tenant=tenant_name), format="json", HTTP_IDEMPOTENCY_KEY="k")
        assert response.status_code == 201
    for _ in range(2):
        assert staff_api.post("/api/jobs/", new_job(), format="json").status_code == 201
    assert Job.objects.count() == 4


# --- listing -----------------------------------------------------------------------------------


def ids(response) -> list[int]:  # type: ignore[no-untyped-def]
    return [row["id"] for row in response.json()["results"]]


def test_members_list_their_tenants_jobs_and_staff_all(member_api, staff_api, job: Job, other_job: Job) -> None:  # type: ignore[no-untyped-def]
    assert ids(member_api.get("/api/jobs/")) == [job.pk]
    assert sorted(ids(staff_api.get("/api/jobs/"))) == sorted([job.pk, other_job.pk])


def test_filters_by_state_and_tenant(staff_api: APIClient, job: Job, other_job: Job) -> None:
    Job.objects.filter(pk=other_job.pk).update(state=JobState.RUNNING)
    assert ids(staff_api.get("/api/jobs/", {"state": "running"})) == [other_job.pk]
    assert ids(staff_api.get("/api/jobs/", {"tenant": "vision"})) == [job.pk]
    assert ids(staff_api.get("/api/jobs/", {"tenant": "vision", "state": "running"})) == []
    bad = staff_api.get("/api/jobs/", {"state": "sleeping"})
    assert bad.status_code == 400 and list(bad.json()) == ["state"]


def test_a_tenant_filter_never_widens_what_a_member_sees(member_api: APIClient, job: Job, other_job: Job) -> None:
    assert ids(member_api.get("/api/jobs/", {"tenant": "language"})) == []


def test_pages(member_api: APIClient) -> None:
    for n in range(5):
        member_api.post("/api/jobs/", new_job(name=f"job-{n}"), format="json")
    page = member_api.get("/api/jobs/", {"page_size": 2}).json()
    assert page["count"] == 5 and len(page["results"]) == 2 and "page=2" in page["next"]
    assert [row["name"] for row in page["results"]] == ["job-4", "job-3"]  # newest first


# --- changing and cancelling --------------------------------------------------------------------


def test_patch_changes_bounds_and_priority_through_the_services(member_api, member: User, job: Job) -> None:  # type: ignore[no-untyped-def]
    response = member_api.patch(f"/api/jobs/{job.pk}/", {"max_gpus": 8, "priority": 5}, format="json")
    assert response.status_code == 200 and (response.json()["max_gpus"], response.json()["priority"]) == (8, 5)
    reasons = set(RescaleEvent.objects.filter(job=job, actor=member).values_list("reason", flat=True))
    assert reasons == {"GPU bounds 1..4 → 1..8", "priority 0 → 5"}


@pytest.mark.parametrize(
    ("body", "field"),
    [({"max_gpus": 0}, "max_gpus"), ({"min_gpus": 5}, "max_gpus"), ({"state": "running"}, "state"),
     ({"name": "x", "priority": 1}, "name")],
)
def test_patch_errors_name_the_field(member_api: APIClient, job: Job, body: dict, field: str) -> None:
    response = member_api.patch(f"/api/jobs/{job.pk}/", body, format="json")
    assert response.status_code == 400 and list(response.json()) == [field], response.json()
    assert Job.objects.get(pk=job.pk).priority == 0


def test_cancel_is_idempotent_and_a_finished_job_is_a_conflict(member_api: APIClient, job: Job,
                                                              other_job: Job) -> None:
    for _ in range(2):
        response = member_api.post(f"/api/jobs/{job.pk}/cancel/", {"reason": "wrong data"}, format="json")
        assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert RescaleEvent.objects.get(job=job).reason == "wrong data"
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    response = member_api.post(f"/api/jobs/{job.pk}/cancel/", format="json")
    assert response.status_code == 409 and list(response.json()) == ["state"]


# --- authentication ------------------------------------------------------------------------------


def test_a_wrong_token_is_401(job: Job) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get("/api/jobs/").status_code == 401


def test_anonymous_clients_get_json_not_a_login_page(client: Client, db: None) -> None:
    response = client.post("/api/jobs/", {}, content_type="application/json")
    assert response.status_code == 401 and response.json()["detail"]


def test_session_auth_enforces_csrf_on_writes(member: User, tenant: Tenant) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(member)
    assert browser.get("/api/jobs/").status_code == 200  # reads need no CSRF token
    refused = browser.post("/api/jobs/", new_job(), content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    secret = "a" * 32
    browser.cookies[settings.CSRF_COOKIE_NAME] = secret
    accepted = browser.post("/api/jobs/", new_job(), content_type="application/json", HTTP_X_CSRFTOKEN=secret)
    assert accepted.status_code == 201


def test_token_auth_needs_no_csrf_token(member: User, tenant: Tenant) -> None:
    client = token_client(member, enforce_csrf_checks=True)
    assert client.post("/api/jobs/", new_job(), format="json").status_code == 201


def test_schema_lists_every_endpoint(member_api: APIClient) -> None:
    schema = member_api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert set(schema["paths"]) == {
        "/api/", "/api/jobs/", "/api/jobs/{id}/", "/api/jobs/{id}/cancel/", "/api/jobs/{id}/report/",
        "/api/gpus/{id}/power-cap/", "/api/whatif/", "/api/whatif/{id}/", "/api/whatif/{id}/cancel/",
        "/api/utilisation/",
    }


def test_schema_validates_without_warnings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/jobs/{id}/report/" in (tmp_path / "schema.yaml").read_text()
