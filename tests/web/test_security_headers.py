"""50 wrong passwords and then the right one logged in; 300 API GETs in 7 s met no 429; no
page had a Content-Security-Policy. Login lock-out (django-axes), DRF throttles and django-csp now."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.settings import api_settings
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from scheduler.models import Job

pytestmark = pytest.mark.django_db
PASSWORD = "pw-right-one-123"


@pytest.fixture
def person(db: None) -> User:
    return User.objects.create_user("carol", password=PASSWORD)


def log_in(username: str, password: str, address: str = "10.0.0.7") -> int:
    response = Client(REMOTE_ADDR=address).post("/accounts/login/", {"username": username, "password": password})
    return response.status_code  # 302: logged in; 200: the form again; 429: locked out


def test_repeated_wrong_passwords_lock_the_user_out_even_with_the_right_one(person: User) -> None:
    assert log_in("carol", PASSWORD) == 302
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert log_in("carol", "wrong") == 200
    assert log_in("carol", "wrong") == 429  # the last failure allowed locks
    assert log_in("carol", PASSWORD) == 429
    # Per user and address: an attacker elsewhere cannot keep carol (or admin) locked out.
    assert log_in("carol", PASSWORD, address="10.0.0.8") == 302


def test_one_address_guessing_many_users_is_locked_out(person: User) -> None:
    for n in range(settings.AXES_FAILURE_LIMIT):
        log_in(f"guess{n}", "wrong", address="10.9.9.9")
    assert log_in("carol", PASSWORD, address="10.9.9.9") == 429
    assert log_in("carol", PASSWORD, address="10.0.0.1") == 302  # the user's own address is not locked


@pytest.mark.parametrize("path", ["/accounts/login/", "/", "/reports/", "/admin/", "/api/jobs/",
                                  "/django_plotly_dash/app/overview/"])
def test_every_page_has_a_content_security_policy(operator_client: Client, path: str) -> None:
    policy = operator_client.get(path)["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'self'" and directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'self'"
    scripts = directives["script-src"].split()
    assert scripts[0] == "'self'" and "'unsafe-eval'" not in scripts and "'unsafe-inline'" not in scripts
    # A page with an inline script of ours allows it by a nonce of that response only.
    assert any(source.startswith("'nonce-") for source in scripts) is (path == "/")


@pytest.mark.parametrize("app", ["overview", "utilisation", "fairness", "jobs", "energy"])
def test_the_dash_pages_inline_scripts_are_allowed_by_hash(operator_client: Client, app: str) -> None:
    page = operator_client.get(f"/django_plotly_dash/app/{app}/")
    inline = [body for attrs, body in re.findall(r"<script([^>]*)>(.*?)</script>", page.content.decode(), re.S)
              if "src=" not in attrs and "application/json" not in attrs]
    assert inline, "Dash's page changed: no inline script found"
    hashes = {f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'" for body in inline}
    assert hashes <= set(settings.DASH_INLINE_SCRIPT_HASHES), "recompute DASH_INLINE_SCRIPT_HASHES in settings.py"


def test_anonymous_api_clients_are_throttled() -> None:
    limit = int(api_settings.DEFAULT_THROTTLE_RATES["anon"].split("/")[0])
    codes = [APIClient().get("/api/jobs/").status_code for _ in range(limit + 1)]
    assert codes[:limit] == [401] * limit and codes[-1] == 429


def test_a_user_past_the_rate_is_throttled(person: User, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "user", "5/minute")
    client = APIClient()
    client.force_authenticate(person)
    codes = [client.get("/api/jobs/").status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]


def test_a_jobs_reports_share_one_budget(job: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "job-report", "3/minute")
    body = {"progress": 1, "throughput": 1, "batch_size": 1, "gpus": 1}
    codes = [APIClient(REMOTE_ADDR=f"10.1.0.{n}").post(f"/api/jobs/{job.pk}/report/", body, format="json",
                                                        HTTP_X_JOB_TOKEN=job.report_token).status_code
             for n in range(4)]
    assert codes[:3] == [409] * 3 and codes[3] == 429  # not running: refused, but counted; then throttled


def test_wrong_api_tokens_from_one_address_are_throttled() -> None:
    """90 wrong tokens got 90 × 401 and never a 429: tokens could be guessed at line rate."""
    client = APIClient(REMOTE_ADDR="10.3.3.3")
    codes = [client.get("/api/jobs/", HTTP_AUTHORIZATION=f"Token wrong{n:036d}").status_code for n in range(30)]
    assert codes[0] == 401 and codes[-1] == 429 and set(codes) == {401, 429}
    refused = client.get("/api/jobs/", HTTP_AUTHORIZATION="Token wrong")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert APIClient(REMOTE_ADDR="10.3.3.4").get("/api/jobs/", HTTP_AUTHORIZATION="Token x").status_code == 401
