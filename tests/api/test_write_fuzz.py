"""Generated bodies against every write endpoint: never a 5xx, nothing half-written, every 400 names a
field, and the job list still renders afterwards."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import cache
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from scheduler.models import Allocation, Job, JobReport, JobState, Node, RescaleEvent, WhatIfRun
from telemetry.models import PowerCap
from tests.hostile import VALUES, fuzz_settings

from .test_report import hold_gpus

pytestmark = pytest.mark.django_db

FIELDS = {
    "submit": ["tenant", "name", "workload_profile", "total_work", "min_gpus", "max_gpus", "priority", "gpu_type",
               "batch_size", "command", "client_key"],
    "change": ["min_gpus", "max_gpus", "priority"],
    "cancel": ["reason"],
    "report": ["progress", "throughput", "step_seconds", "batch_size", "gpus", "nodes", "grad_noise_scale"],
    "power_cap": ["watts"],
    "whatif": ["trace", "policy", "nodes", "gpus_per_node", "gpu_type", "power_cap_fraction", "load_factor",
               "node_groups", "power_caps_by_type", "tenant_quotas", "max_jobs", "seed", "preset", "round_seconds",
               "format", "elastic", "policy_config", "measured_profiles", "charge_first_start", "pue"],
}
PLAUSIBLE = {"tenant": "vision", "name": "fuzz", "workload_profile": "cifar10", "total_work": 10.0,
             "trace": "traces/native/workload.csv", "progress": 1.0, "throughput": 5.0, "batch_size": 64, "gpus": 1}


def bodies(kind: str) -> st.SearchStrategy[Any]:
    """Mostly objects of the endpoint's fields (plausible values mixed with hostile ones), sometimes anything."""
    fields = FIELDS[kind]
    value_for = {name: st.one_of(st.just(PLAUSIBLE[name]), VALUES) if name in PLAUSIBLE else VALUES
                 for name in fields}
    objects = st.fixed_dictionaries({}, optional={**value_for, "bogus": VALUES})
    return st.one_of(objects, objects, objects, VALUES)


def counts() -> tuple[int, ...]:
    return tuple(model.objects.count() for model in (Job, JobReport, RescaleEvent, WhatIfRun, PowerCap, Allocation))


def check(response: Any, kind: str, body: Any, before: tuple[int, ...], api: APIClient) -> None:
    assert response.status_code < 500, response.content[:300]
    if response.status_code >= 400:
        assert counts() == before, f"{kind}: a {response.status_code} wrote something"
    if response.status_code == 400:
        errors = response.json()
        assert isinstance(errors, dict) and errors, errors
        sent = {str(key) for key in body} if isinstance(body, dict) else set()
        # A field of the endpoint, one the client sent (an unknown one, named), or the body as a whole.
        assert set(errors) <= set(FIELDS[kind]) | sent | {"non_field_errors", "scenario", "body"}, errors
        assert all(isinstance(messages, list) and messages and all(isinstance(m, str) for m in messages)
                   for messages in errors.values()), errors
    assert api.get("/api/jobs/").status_code == 200


def post(api: APIClient, method: str, path: str, body: Any, **headers: str) -> Any:
    return getattr(api, method)(path, json.dumps(body, allow_nan=True), content_type="application/json", **headers)


FUZZ = fuzz_settings(60)  # FUZZ_EXAMPLES=1500 for a long run by hand; CI runs 60 per endpoint


@pytest.fixture
def running_job(job: Job) -> Job:
    hold_gpus(job, nodes=1, per_node=4)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, gpu_type="a100", max_gpus=4)
    return Job.objects.get(pk=job.pk)


@pytest.fixture
def fuzz(staff_api: APIClient) -> Callable[[str, str, str, Any], None]:
    def send(kind: str, method: str, path: str, body: Any, **headers: str) -> None:
        cache.clear()  # each example is a fresh client: the throttles' counts would otherwise end a long run in 429s
        before = counts()
        check(post(staff_api, method, path, body, **headers), kind, body, before, staff_api)
    return send


@FUZZ
@given(body=bodies("submit"))
def test_submissions(fuzz: Callable, node: Node, tenant: object, body: Any) -> None:
    fuzz("submit", "post", "/api/jobs/", body)


@FUZZ
@given(body=bodies("change"))
def test_changes(fuzz: Callable, job: Job, body: Any) -> None:
    fuzz("change", "patch", f"/api/jobs/{job.pk}/", body)


@FUZZ
@given(body=bodies("cancel"))
def test_cancellations(fuzz: Callable, job: Job, body: Any) -> None:
    fuzz("cancel", "post", f"/api/jobs/{job.pk}/cancel/", body)
    Job.objects.filter(pk=job.pk).update(state=JobState.PENDING)


@FUZZ
@given(body=bodies("report"))
def test_reports(fuzz: Callable, running_job: Job, body: Any) -> None:
    fuzz("report", "post", f"/api/jobs/{running_job.pk}/report/", body, HTTP_X_JOB_TOKEN=running_job.report_token)
    job = Job.objects.get(pk=running_job.pk)
    assert job.progress <= job.total_work and (job.last_throughput is None or job.last_throughput <= 1e9)


@FUZZ
@given(body=bodies("power_cap"))
def test_power_caps(fuzz: Callable, node: Node, body: Any) -> None:
    fuzz("power_cap", "post", f"/api/gpus/{node.gpus.first().pk}/power-cap/", body)


@FUZZ
@given(body=bodies("whatif"))
def test_whatifs(fuzz: Callable, settings: Any, fixtures_dir: Any, body: Any) -> None:  # noqa: F811
    settings.TRACES_DIR = fixtures_dir
    fuzz("whatif", "post", "/api/whatif/", body)
