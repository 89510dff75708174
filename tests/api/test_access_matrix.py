"""Every URL × {anonymous, member of the job's tenant, member of another tenant, staff} → the right answer.

Web pages send anonymous people to log in; the API answers 401 JSON instead. Another
tenant's job is a 404 (its existence is not revealed); staff see everything.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from scheduler.models import Job

from .conftest import new_job, token_client

ROLES = ("anonymous", "member", "outsider", "staff")
LOGIN = "login"  # a 302 to a login page


@pytest.fixture
def people(member: User, outsider: User, operator: User) -> dict[str, User | None]:
    return {"anonymous": None, "member": member, "outsider": outsider, "staff": operator}


# --- web pages (session) --------------------------------------------------------------

ADMIN_APPS = ("scheduler", "cluster_ops", "reports", "knox")
ADMIN_ONLY = {"anonymous": LOGIN, "member": LOGIN, "outsider": LOGIN, "staff": 200}


def _changelists() -> list[str]:
    models = (model._meta for model in admin.site._registry)
    return sorted(f"admin:{m.app_label}_{m.model_name}_changelist" for m in models if m.app_label in ADMIN_APPS)


WEB_PAGES: list[tuple[str, dict[str, int | str]]] = [
    ("home", {"anonymous": LOGIN, "member": 200, "outsider": 200, "staff": 200}),
    ("login", {"anonymous": 200, "member": 200, "outsider": 200, "staff": 200}),
    ("admin:index", ADMIN_ONLY),
    *((name, ADMIN_ONLY) for name in _changelists()),
]


def test_the_matrix_covers_the_scheduler_admin_and_tokens() -> None:
    names = {name for name, _ in WEB_PAGES}
    assert {"admin:scheduler_job_changelist", "admin:knox_authtoken_changelist"} <= names
    assert len([name for name in names if name.startswith("admin:scheduler_")]) >= 10


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("url_name", "expected"), WEB_PAGES, ids=[name for name, _ in WEB_PAGES])
def test_web_pages(people: dict[str, User | None], job: Job, role: str, url_name: str,
                   expected: dict[str, int | str]) -> None:
    client, user = Client(), people[role]
    if user is not None:
        client.force_login(user)
    if expected[role] == LOGIN:
        response = client.get(reverse(url_name))
        assert response.status_code == 302 and "login" in response["Location"]
    else:  # followed: a one-row admin (scheduler settings) redirects to its only row
        response = client.get(reverse(url_name), follow=True)
        assert response.status_code == expected[role]
        assert not any("login" in url for url, _ in response.redirect_chain)


# --- the API (tokens) -------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # {job}: the id of the member's tenant's job
    body: dict[str, object] | None
    expected: tuple[int, int, int, int]  # anonymous, member, outsider, staff


API_CALLS = [
    Call("get", "/api/jobs/", None, (401, 200, 200, 200)),
    Call("post", "/api/jobs/", new_job(), (401, 201, 400, 201)),
    Call("get", "/api/jobs/{job}/", None, (401, 200, 404, 200)),
    Call("patch", "/api/jobs/{job}/", {"priority": 3}, (401, 200, 404, 200)),
    Call("put", "/api/jobs/{job}/", new_job(), (401, 405, 405, 405)),
    Call("delete", "/api/jobs/{job}/", None, (401, 405, 405, 405)),
    Call("post", "/api/jobs/{job}/cancel/", {}, (401, 200, 404, 200)),
    Call("get", "/api/jobs/999999/", None, (401, 404, 404, 404)),
    # Reports authenticate with the job's token, never a user: without it, 403 for everyone.
    Call("post", "/api/jobs/{job}/report/", {"progress": 1, "throughput": 1, "batch_size": 1, "gpus": 1},
         (403, 403, 403, 403)),
    Call("get", "/api/schema/", None, (401, 200, 200, 200)),
    # Utilisation: a tenant's series for its members and staff; the cluster's and nodes' for staff only.
    Call("get", "/api/utilisation/?scope=tenant:vision", None, (401, 200, 404, 200)),
    Call("get", "/api/utilisation/?scope=cluster", None, (401, 403, 403, 200)),
    Call("get", "/api/utilisation/?scope=node:node1", None, (401, 403, 403, 200)),
    Call("get", "/api/utilisation/?scope=node:nowhere", None, (401, 403, 403, 404)),
    # What-ifs: everyone reads (scoped figures), only staff create (a trace that does not exist is a 400 here).
    Call("get", "/api/whatif/", None, (401, 200, 200, 200)),
    Call("post", "/api/whatif/", {"trace": "no/such.csv"}, (401, 403, 403, 400)),
    Call("get", "/api/whatif/999999/", None, (401, 404, 404, 404)),
    Call("post", "/api/whatif/999999/cancel/", None, (401, 403, 403, 404)),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("call", API_CALLS, ids=[f"{c.method} {c.path}" for c in API_CALLS])
def test_api(people: dict[str, User | None], job: Job, node: object, role: str, call: Call) -> None:
    client = token_client(people[role])
    response = getattr(client, call.method)(call.path.format(job=job.pk), call.body, format="json",
                                            HTTP_ACCEPT="application/json")
    assert response.status_code == call.expected[ROLES.index(role)], response.content[:300]
    if response.status_code in (401, 403, 404):  # JSON with a reason, never a login page
        assert response["Content-Type"].startswith("application/json") and "detail" in response.json()
    if response.status_code == 401:
        assert response["WWW-Authenticate"] == "Token"


def test_outsider_submitting_to_a_tenant_not_theirs_is_told_which_field(outsider: User, tenant: object) -> None:
    response = token_client(outsider).post("/api/jobs/", new_job(), format="json")
    assert response.status_code == 400 and list(response.json()) == ["tenant"]
    assert not Job.objects.exists()
