"""Redis gone for a minute under the real stack (gunicorn, a Celery worker, beat): the web keeps working, rounds resume.

Redis holds only transient messages; the database holds everything that matters. So with
Redis stopped, the web UI must keep answering and storing submissions (through the admin
form and the REST API), the worker and beat must wait for Redis rather than die, and once
Redis is back on its port, beat's rounds must resume by themselves and schedule what was
submitted meanwhile.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html.parser import HTMLParser
from http.cookiejar import CookieJar
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from django.utils import timezone

from cluster_ops.api_tokens import issue_token
from scheduler import inventory
from scheduler.jobs import verbs
from scheduler.live.config import sync_round_schedule, update_settings
from scheduler.models import ACTIVE_STATES, FINISHED_STATES, Job, RoundStatus, SchedulingRound, Tenant, WhatIfRun

from ..round_invariants import problems
from .conftest import free_port, wait_until
from .processes import BIN, REPO, RedisServer, Service, celery_beat, celery_worker, gunicorn, service_env

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

OUTAGE_SECONDS = 60
RESUME_SECONDS = 30
SLOW_SECONDS = 2.0  # a page slower than this counts as not answering
PASSWORD = "outage-test-password-1"


@dataclass
class Stack:
    base: str
    redis: RedisServer
    services: list[Service] = field(default_factory=list)

    def tails(self) -> str:
        return "\n".join(service.tail(2000) for service in self.services)

    def dead(self) -> list[str]:
        return [service.name for service in self.services if not service.alive()]


def test_web_stays_up_and_rounds_resume_after_redis_is_down_for_a_minute(tmp_path: Path) -> None:
    token = seed()
    stack = Stack("", RedisServer(free_port(), tmp_path))
    try:
        start_stack(stack, tmp_path)
        assert wait_until(lambda: ok_round_since(None), seconds=60), f"no round before the outage\n{stack.tails()}"
        browser = Browser(stack.base)
        browser.log_in("admin", PASSWORD)
        api = Api(stack.base, token)

        stack.redis.stop()
        stopped_at = timezone.now()
        outage = run_outage(stack, browser, api)
        stack.redis.start()
        back_at = timezone.now()
        during = SchedulingRound.objects.filter(started_at__range=(stopped_at + timedelta(seconds=5), back_at))
        assert not during.exists(), "rounds ran while Redis was down: was it down at all?"

        assert not outage.slow, f"{len(outage.slow)} slow or failed page(s) while Redis was down: {outage.slow[:10]}"
        assert len(outage.submitted) >= 4, f"only {len(outage.submitted)} submissions during the outage"
        stored = set(Job.objects.filter(pk__in=outage.submitted).values_list("pk", flat=True))
        assert stored == set(outage.submitted), f"submissions not stored: {set(outage.submitted) - stored}"
        assert not outage.deaths, f"processes died while Redis was down: {outage.deaths}\n{stack.tails()}"
        # A what-if asked for meanwhile was a 500 though stored: now 201, stored once, and left
        # unsent for the recovery to send when the broker is back.
        assert outage.whatifs and list(WhatIfRun.objects.values_list("pk", "sent_at")) == [(outage.whatifs[0], None)]

        assert wait_until(lambda: ok_round_since(back_at), seconds=RESUME_SECONDS), (
            f"no round completed within {RESUME_SECONDS} s of Redis coming back\n{stack.tails()}")
        assert wait_until(lambda: all_scheduled(outage.submitted), seconds=RESUME_SECONDS), (
            f"jobs submitted during the outage not scheduled: {waiting(outage.submitted)}\n{stack.tails()}")
        assert not stack.dead(), f"{stack.dead()} died\n{stack.tails()}"
        assert not problems(), problems()
        print(f"\noutage: {outage.requests} requests, slowest {outage.slowest:.3f} s, "
              f"{len(outage.submitted)} jobs submitted; first round after Redis returned: "
              f"{(first_round_since(back_at) - back_at).total_seconds():.1f} s")
    finally:
        for service in stack.services:
            service.stop()
        stack.redis.stop()


# --- the stack ------------------------------------------------------------------------


def seed() -> str:
    """An admin, an API client's token, 2 nodes × 8 GPUs, one tenant, two jobs; rounds every 2 s (tiresias)."""
    admin = User.objects.create_superuser("admin", "admin@example.com", None)
    # Hashed here with what the served settings use: the test settings' MD5 hasher is unknown to them.
    admin.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    admin.save()
    for host in ("a100-00", "a100-01"):
        inventory.register_node(host, [inventory.GpuSpec(i, f"GPU-{host}-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400)
                                      for i in range(8)])
    tenant = Tenant.objects.create(name="vision", gpu_quota=16)
    for number in range(2):
        verbs.submit_job(tenant=tenant, name=f"before-{number}", workload_profile="bert", total_work=1e9,
                            min_gpus=1, max_gpus=2)
    update_settings(policy="tiresias", round_seconds=2, executor="simulated")
    sync_round_schedule()
    return issue_token(admin)


def start_stack(stack: Stack, tmp_path: Path) -> None:
    """Redis, then static files, then a worker (prefork, as the Procfile), beat and gunicorn, as `make run` does."""
    stack.redis.start()
    env = service_env(tmp_path, stack.redis.url, TRACES_DIR=str(Path(__file__).parents[1] / "fixtures"))
    done = subprocess.run([str(BIN / "python"), "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    address = f"127.0.0.1:{free_port()}"
    stack.base = f"http://{address}"
    stack.services += [celery_worker("worker", env, tmp_path, pool="prefork"), celery_beat(env, tmp_path),
                       gunicorn(address, env, tmp_path)]
    assert wait_until(lambda: status(f"{stack.base}/accounts/login/") == 200, seconds=60), stack.tails()


def status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def ok_round_since(since: datetime | None) -> bool:
    rounds = SchedulingRound.objects.filter(status=RoundStatus.OK)
    return rounds.filter(started_at__gt=since).exists() if since else rounds.exists()


def first_round_since(since: datetime) -> datetime:
    return SchedulingRound.objects.filter(status=RoundStatus.OK, started_at__gt=since).order_by("started_at")[
        0].started_at


def all_scheduled(jobs: list[int]) -> bool:
    return not waiting(jobs)


def waiting(jobs: list[int]) -> dict[int, str]:
    started = ACTIVE_STATES | FINISHED_STATES
    return dict(Job.objects.filter(pk__in=jobs).exclude(state__in=started).values_list("pk", "state"))


# --- a minute without Redis -------------------------------------------------------------


@dataclass
class Outage:
    requests: int = 0
    slowest: float = 0.0
    slow: list[str] = field(default_factory=list)
    submitted: list[int] = field(default_factory=list)
    deaths: list[str] = field(default_factory=list)
    whatifs: list[int] = field(default_factory=list)


def run_outage(stack: Stack, browser: Browser, api: Api) -> Outage:
    """Use the web for OUTAGE_SECONDS: pages every ~2 s, a submission (admin or API, in turn) every ~10 s.

    The admin job list must show every job submitted so far: a page served from a stale
    cache or a login redirect does not count as answering.
    """
    outage, start = Outage(), time.monotonic()
    anonymous = Browser(stack.base)
    while time.monotonic() - start < OUTAGE_SECONDS:
        timed(outage, "GET /accounts/login/", anonymous.page, "/accounts/login/", 'name="username"')
        timed(outage, "GET /", browser.page, "/", "Cluster Ops")
        names = Job.objects.filter(pk__in=outage.submitted).values_list("name", flat=True)
        timed(outage, "GET /admin/scheduler/job/", browser.page, "/admin/scheduler/job/", *names)
        if len(outage.submitted) < (time.monotonic() - start) / 10:
            number = len(outage.submitted)
            if number % 2:
                job = timed(outage, "API POST /api/jobs/", api.submit, f"outage-api-{number}")
            else:
                job = timed(outage, "admin add job", browser.add_job, f"outage-admin-{number}")
            if job:
                outage.submitted.append(job)
        if not outage.whatifs and time.monotonic() - start > 5:
            run = timed(outage, "API POST /api/whatif/", api.whatif)
            outage.whatifs += [run] if run else []
        outage.deaths += [f"{name} at {time.monotonic() - start:.0f} s" for name in stack.dead()
                          if not any(d.startswith(name) for d in outage.deaths)]
        time.sleep(1.5)
    return outage


def timed(outage: Outage, what: str, call: Callable[..., int | None], *args: str) -> int | None:
    """``call(*args)``: one request. A failure, or an answer slower than SLOW_SECONDS, is recorded as slow."""
    began = time.monotonic()
    try:
        result = call(*args)
    except Exception as error:  # noqa: BLE001 - every failure is a finding, named in the assertion
        outage.slow.append(f"{what}: {type(error).__name__}: {error}")
        return None
    took = time.monotonic() - began
    outage.requests, outage.slowest = outage.requests + 1, max(outage.slowest, took)
    if took > SLOW_SECONDS:
        outage.slow.append(f"{what}: {took:.2f} s")
    return result


class HiddenInputs(HTMLParser):
    """The hidden fields of a page's form (CSRF token, inline management forms)."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "input" and named.get("type") == "hidden" and named.get("name"):
            self.values[named["name"] or ""] = named.get("value") or ""


class Browser:
    """A person at a browser: cookies, CSRF tokens, forms."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))

    def get(self, path: str) -> str:
        with self.opener.open(f"{self.base}{path}", timeout=10) as response:
            assert response.status == 200, f"GET {path}: {response.status}"
            assert response.url == f"{self.base}{path}", f"GET {path} was sent to {response.url}"
            return response.read().decode()

    def page(self, path: str, *expected: str) -> None:
        """GET ``path``: a 200 from that very page (not a redirect), showing each of ``expected``."""
        html = self.get(path)
        missing = [text for text in expected if text not in html]
        assert not missing, f"GET {path} lacks {missing}"

    def post_form(self, path: str, fields: dict[str, str]) -> tuple[str, str]:
        """Submit the form at ``path`` with its hidden fields; returns (final URL, page)."""
        parser = HiddenInputs()
        parser.feed(self.get(path))
        data = urlencode({**parser.values, **fields}).encode()
        request = urllib.request.Request(f"{self.base}{path}", data, headers={"Referer": f"{self.base}{path}"})
        with self.opener.open(request, timeout=10) as response:
            return response.url, response.read().decode()

    def log_in(self, username: str, password: str) -> None:
        url, _ = self.post_form("/accounts/login/", {"username": username, "password": password})
        assert "/accounts/login/" not in url, f"log in as {username} failed"

    def add_job(self, name: str) -> int:
        """Submit a job through the admin add form; returns the stored job's id."""
        tenant = str(Tenant.objects.get(name="vision").pk)
        url, page = self.post_form("/admin/scheduler/job/add/", {
            "name": name, "tenant": tenant, "owner": "", "workload_profile": "bert", "total_work": "1e9",
            "min_gpus": "1", "max_gpus": "1", "priority": "0",
        })
        assert re.search(r"/admin/scheduler/job/(\?.*)?$", url), f"admin add of {name} not accepted:\n{page[-2000:]}"
        return Job.objects.get(name=name).pk


class Api:
    """A program using the REST API with a token."""

    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token

    def submit(self, name: str) -> int:
        body = {"tenant": "vision", "name": name, "workload_profile": "bert", "total_work": 1e9, "min_gpus": 1}
        return self.create("/api/jobs/", body, f"API submit of {name}")

    def whatif(self) -> int:
        return self.create("/api/whatif/", {"trace": "traces/native/workload.csv", "policy": "fifo", "nodes": 2},
                           "API what-if")

    def create(self, path: str, body: dict[str, object], what: str) -> int:
        """POST ``body`` to ``path``: a 201, whose row's id is returned."""
        request = urllib.request.Request(
            f"{self.base}{path}", json.dumps(body).encode(),
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 201, f"{what}: {response.status}"
            return int(json.loads(response.read())["id"])
