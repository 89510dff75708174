"""``/api/whatif/``: operators script what-ifs; the same validation and scoping as the Energy page."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from scheduler import whatif
from scheduler.models import WhatIfRun, WhatIfStatus

from .conftest import token_client

TRACE = "pollux/workloads-realistic/workload-1.csv"


@pytest.fixture(autouse=True)
def traces_dir(settings, fixtures_dir: Path) -> Path:  # type: ignore[no-untyped-def]
    settings.TRACES_DIR = fixtures_dir
    return fixtures_dir


def test_staff_create_a_what_if_and_read_it_back(staff_api: APIClient, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks() as sent:
        response = staff_api.post("/api/whatif/", {"trace": TRACE, "policy": "fifo", "nodes": 2,
                                                   "power_cap_fraction": 0.8}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "queued" and body["scenario"]["power_cap_fraction"] == 0.8 and len(sent) == 1
    assert staff_api.get(f"/api/whatif/{body['id']}/").json()["scenario"]["trace"] == TRACE
    assert [run["id"] for run in staff_api.get("/api/whatif/").json()["results"]] == [body["id"]]


@pytest.mark.parametrize(("body", "field"), [
    ({"trace": "/etc/passwd"}, "trace"),
    ({"trace": "../../var/secret_key"}, "trace"),
    ({"trace": TRACE, "nodes": 0}, "nodes"),
    ({"trace": TRACE, "load_factor": 0}, "load_factor"),
    ({"trace": TRACE, "power_cap_fraction": "0.8"}, "power_cap_fraction"),
    ({"trace": TRACE, "policy": "nope"}, "policy"),
    ({"trace": TRACE, "measured_profiles": True}, "measured_profiles"),
    ({"trace": TRACE, "colour": "blue"}, "colour"),
    ({"policy": "fifo"}, "trace"),
    # Unhashable names (found by the write fuzz): each is refused by name, not looked up.
    ({"trace": TRACE, "gpu_type": ["t4"]}, "gpu_type"),
    ({"trace": TRACE, "preset": {"a": 1}}, "preset"),
    ({"trace": TRACE, "format": ["csv"]}, "format"),
    ({"trace": TRACE, "node_groups": [[["t4"], 4, 1]]}, "node_groups"),
])
def test_a_bad_field_is_a_400_naming_it_and_nothing_is_stored(staff_api: APIClient, body: dict, field: str) -> None:
    response = staff_api.post("/api/whatif/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not WhatIfRun.objects.exists()


def test_tenants_read_their_share_and_cannot_create_or_cancel(member_api: APIClient, operator: User) -> None:
    run = whatif.create_run(whatif.scenario_from_dict({"trace": TRACE, "policy": "fifo", "nodes": 2}), operator)
    WhatIfRun.objects.filter(pk=run.pk).update(
        status=WhatIfStatus.FAILED, error="secret detail",
        summary={"avg_jct_s": 5.0, "tenants": {"vision": {"jobs": 1}, "language": {"jobs": 2}}})
    seen = member_api.get(f"/api/whatif/{run.pk}/").json()
    assert seen["summary"]["tenants"] == {"vision": {"jobs": 1}} and "secret" not in seen["error"]
    assert member_api.post("/api/whatif/", {"trace": TRACE}, format="json").status_code == 403
    assert member_api.post(f"/api/whatif/{run.pk}/cancel/").status_code == 403
    assert APIClient().get("/api/whatif/").status_code == 401


def test_cancel_stops_a_queued_run_and_needs_the_permission(operator: User, db: None) -> None:
    run = whatif.create_run(whatif.scenario_from_dict({"trace": TRACE, "policy": "fifo", "nodes": 2}), operator)
    bare = User.objects.create_user("staff2", password="pw-staff2-123", is_staff=True)
    api = token_client(bare)
    assert api.post(f"/api/whatif/{run.pk}/cancel/").status_code == 403
    bare.user_permissions.add(Permission.objects.get(codename="change_whatifrun"))
    assert api.post(f"/api/whatif/{run.pk}/cancel/").json()["status"] == "cancelled"  # a new request reloads perms
    assert whatif.execute_run(run.pk) is False  # a cancelled run is never simulated


def test_the_schema_lists_the_what_if_endpoints(staff_api: APIClient) -> None:
    schema = staff_api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert {"/api/whatif/", "/api/whatif/{id}/", "/api/whatif/{id}/cancel/"} <= set(schema["paths"])


def test_a_what_if_posted_while_the_broker_is_away_is_201_once_and_sent_when_it_is_back(
        staff_api: APIClient, monkeypatch, django_capture_on_commit_callbacks) -> None:
    """During a Redis restart POST answered 500 though the run was stored queued: a client's retry made a second."""
    from celery.canvas import Signature
    from django.utils import timezone
    from kombu.exceptions import OperationalError

    from scheduler.whatif import runs

    def broker_away(*args: object, **kwargs: object) -> None:
        raise OperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")

    monkeypatch.setattr(Signature, "apply_async", broker_away)
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_api.post("/api/whatif/", {"trace": TRACE, "policy": "fifo", "nodes": 2}, format="json")
    assert response.status_code == 201, response.content
    run = WhatIfRun.objects.get()
    assert run.status == WhatIfStatus.QUEUED and run.sent_at is None
    sent: list[int] = []
    monkeypatch.setattr(runs, "launch_run", lambda again, app=None: sent.append(again.pk))
    assert whatif.recover_runs(timezone.now())["resent"] == 1 and sent == [run.pk]  # at the next recovery
