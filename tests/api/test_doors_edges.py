"""Every door, its edges: API tokens that cannot be read back, throttles on the real client address, JSON nested
without bound, and a Dash callback body that is not Dash's — each refused as the API refuses bad input."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from knox.models import AuthToken
from rest_framework.test import APIClient

from cluster_ops.api_tokens import issue_token
from cluster_ops.common import bounded_json
from scheduler.models import Job

from .conftest import token_client


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- API tokens (failure 4) -------------------------------------------------------------------------------------


def test_tokens_are_stored_hashed_and_admin_shows_only_their_first_characters(operator: User) -> None:
    token = issue_token(operator)
    stored = AuthToken.objects.get(user=operator)
    assert token not in (stored.digest, stored.token_key) and token.startswith(stored.token_key)
    viewer = User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    client = Client()
    client.force_login(viewer)
    listing = client.get("/admin/knox/authtoken/")
    assert listing.status_code == 200 and stored.token_key in listing.content.decode()
    page = client.get(f"/admin/knox/authtoken/{stored.pk}/change/").content.decode()
    assert token not in listing.content.decode() + page  # (the digest is the row's key: no way back to the token)
    assert client.get("/admin/authtoken/tokenproxy/").status_code == 404  # DRF's clear-text tokens are gone


def test_a_hashed_token_authenticates_and_a_wrong_or_garbled_one_is_a_401(operator: User) -> None:
    assert token_client(operator).get("/api/jobs/").status_code == 200
    for garbage in ("Token cops_0000", "Token " + "é" * 10, "Token " + "a" * 5000):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=garbage)
        assert client.get("/api/jobs/").status_code == 401


def test_admin_shows_a_new_token_once(admin_client: Client, operator: User) -> None:
    response = admin_client.post("/admin/knox/authtoken/add/", {"user": operator.pk, "expiry": ""}, follow=True)
    shown = [str(m) for m in response.context["messages"]]
    token = next(text.split(": ", 1)[1].split(" ")[0] for text in shown if "API token" in text)
    assert APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/jobs/").status_code == 200
    again = admin_client.get(f"/admin/knox/authtoken/{AuthToken.objects.get().pk}/change/").content.decode()
    assert token not in again


def test_create_api_token_prints_a_working_token_once(operator: User, capsys: pytest.CaptureFixture[str]) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    call_command("create_api_token", operator.username)
    token = capsys.readouterr().out.strip()
    assert APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/jobs/").status_code == 200
    with pytest.raises(CommandError, match="username"):
        call_command("create_api_token", "nobody")


# --- the client's address (failure 10) --------------------------------------------------------------------------


@pytest.mark.django_db
def test_rotating_x_forwarded_for_is_throttled_like_any_other_client(settings: object) -> None:
    statuses = []
    for attempt in range(200):
        client = APIClient(HTTP_X_FORWARDED_FOR=f"10.{attempt // 250}.{attempt % 250}.1")
        client.credentials(HTTP_AUTHORIZATION=f"Token cops_wrong{attempt:04d}")
        statuses.append(client.get("/api/jobs/").status_code)
    assert statuses.count(429) >= 150 and set(statuses) == {401, 429}


@pytest.mark.django_db
def test_behind_trusted_proxies_the_address_they_saw_counts(settings: object) -> None:
    from cluster_ops.security import client_address

    settings.BEHIND_PROXY = 2  # type: ignore[attr-defined]
    request = type("R", (), {"META": {"HTTP_X_FORWARDED_FOR": "6.6.6.6, 1.2.3.4, 10.0.0.2",
                                      "REMOTE_ADDR": "10.0.0.1"}})()
    assert client_address(request) == "1.2.3.4"  # the client's own entry (6.6.6.6) is not trusted
    settings.BEHIND_PROXY = 0  # type: ignore[attr-defined]
    assert client_address(request) == "10.0.0.1"


def test_behind_proxy_reads_true_false_or_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from cluster_ops.settings import trusted_proxies

    for raw, expected in (("", 0), ("false", 0), ("true", 1), ("2", 2)):
        monkeypatch.setenv("BEHIND_PROXY", raw)
        assert trusted_proxies("BEHIND_PROXY") == expected


# --- JSON nested without bound (failure 11) ---------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1_000, 5_000])
def test_deep_json_is_a_400_on_every_json_endpoint(staff_api: APIClient, job: Job, depth: int) -> None:
    body = nested(depth)
    for path in ("/api/jobs/", "/api/whatif/", f"/api/jobs/{job.pk}/report/"):
        response = staff_api.post(path, body, content_type="application/json", HTTP_X_JOB_TOKEN=job.report_token)
        assert response.status_code == 400, (path, response.status_code)
        assert "nested" in json.dumps(response.json())


def test_nesting_is_measured_outside_strings() -> None:
    assert bounded_json.nesting_depth('{"a": "[[[[[[", "b": [1, {"c": []}]}') == 4
    assert bounded_json.loads(json.dumps({"text": "]" * 500})) == {"text": "]" * 500}
    with pytest.raises(bounded_json.TooDeep):
        bounded_json.loads(nested(65))


# --- a body that is not Dash's (failure 12) ---------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe", nested(5_000).encode(), b'{"inputs": []}'])
def test_a_malformed_dash_callback_body_is_a_400(client: Client, operator: User, body: bytes) -> None:
    client.force_login(operator)
    response = client.post("/django_plotly_dash/app/jobs/_dash-update-component", body,
                           content_type="application/json")
    assert response.status_code == 400 and "reload" in response.json()["error"]
