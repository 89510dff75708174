"""Every door, fuzzed with the API fuzzer's own hostile values (``tests.hostile``): admin's forms and every Dash
callback of every page. Neither ever answers a 5xx; a form that is refused writes nothing and one that is saved
stores only what its model's rules allow; and no callback writes anything for a user without permissions — the
enumeration that fails the day a page gains a callback that changes something without checking a permission."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from hypothesis import example, given
from hypothesis import strategies as st

from cluster_ops.dashboards.pages import PAGES
from scheduler.live.config import scheduler_settings
from scheduler.models import Job, JobState, Node, Tenant
from tests.hostile import VALUES, as_form_text, fuzz_settings

pytestmark = pytest.mark.django_db

FUZZ = fuzz_settings(25)

# Admin's add (and change) forms of the product's own models, and beat's interval: field → a plausible value, mixed
# with the hostile ones so that the other fields' checks are reached too.
FORMS: dict[str, dict[str, Any]] = {
    "scheduler.Job": {"name": "fuzz", "tenant": "1", "workload_profile": "cifar10", "total_work": "10",
                      "min_gpus": "1", "max_gpus": "2", "priority": "0", "gpu_type": "", "batch_size": "",
                      "command": "", "script_path": "", "expected_seconds": ""},
    "scheduler.Tenant": {"name": "fuzz-tenant", "gpu_quota": "4", "fair_share_weight": "1", "max_priority": "10"},
    "scheduler.Node": {"hostname": "fuzz-node", "schedulable": "on"},
    "scheduler.Gpu": {"node": "1", "index": "7", "uuid": "GPU-fuzz", "model": "NVIDIA A100-SXM4-80GB",
                      "memory_mib": "81920", "power_limit_w": "400", "health": "ok"},
    "reports.ReportRecipient": {"tenant": "", "email": "ops@example.com", "daily": "on", "weekly": ""},
    "django_celery_beat.IntervalSchedule": {"every": "10", "period": "seconds"},
}
# Values seen to pass a door before (more GPUs than the cluster, an unknown type, a quota of 10^11, a beat
# interval beat cannot run): the fuzzer tries them first, every run.
KNOWN: dict[str, dict[str, str]] = {
    "scheduler.Job": {"max_gpus": "10000", "gpu_type": "no-such-type"},
    "scheduler.Tenant": {"gpu_quota": "99999999999"},
    "django_celery_beat.IntervalSchedule": {"every": "99999999999999"},
}
SETTINGS_FORM = {"policy": "pollux", "round_seconds": "60", "executor": "simulated", "simulated_speedup": "1",
                 "restart_seconds": "30", "policy_config": "{}", "_preview_confirmed": "1"}


def form(plausible: dict[str, Any]) -> st.SearchStrategy[dict[str, str]]:
    """The plausible form with up to three fields hostile (as a browser posts them) or left out, so that the checks
    behind the first field's are reached too; sometimes an unknown field besides."""
    names = st.sampled_from([*plausible, "bogus"])
    hostile = st.dictionaries(names, st.one_of(VALUES.map(as_form_text), st.none()), min_size=1, max_size=3)
    return hostile.map(lambda changes: {name: value for name, value in {**plausible, **changes}.items()
                                        if value is not None})


def refused_or_valid(model: Any, response: Any, before: int, label: str) -> None:
    assert response.status_code < 500, (label, response.status_code)
    if response.status_code == 302:  # saved: only what the model's own rules allow
        for row in model.objects.all():
            row.full_clean()
    else:
        assert model.objects.count() == before, f"{label}: a refused form wrote a row"


@pytest.fixture
def cluster(node: Node, tenant: Tenant, job: Job) -> Node:
    """A node of 4 GPUs and a job that has run: enough history for the Energy page to have something to replay."""
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=timezone.now() - timedelta(hours=1))
    return node


def management_forms(client: Client, url: str) -> dict[str, str]:
    """The hidden counts of a page's inline formsets, as the browser sends them back (without them Django refuses
    the whole form before any field's check runs)."""
    page = client.get(url).content.decode()
    return dict(re.findall(r'name="([\w-]+-(?:TOTAL|INITIAL|MIN_NUM|MAX_NUM)_FORMS)"[^>]*value="(\d*)"', page))


@pytest.mark.parametrize("label", sorted(FORMS))
def test_admin_add_forms_never_fail_and_store_nothing_out_of_rule(operator_client: Client, cluster: Node,
                                                                   label: str) -> None:
    model = apps.get_model(label)
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")

    first_rows = set(model.objects.values_list("pk", flat=True))
    inlines = management_forms(operator_client, url)

    @FUZZ
    @given(data=form(FORMS[label]))
    @example(data={**FORMS[label], **KNOWN.get(label, {})})
    def post(data: dict[str, str]) -> None:
        before = model.objects.count()
        refused_or_valid(model, operator_client.post(url, {**inlines, **data}), before, label)
        model.objects.exclude(pk__in=first_rows).delete()  # each example starts from the same rows

    post()


def test_the_job_change_form_never_fails(operator_client: Client, cluster: Node, job: Job) -> None:
    url = reverse("admin:scheduler_job_change", args=[job.pk])
    inlines = management_forms(operator_client, url)

    @FUZZ
    @given(data=form(FORMS["scheduler.Job"]))
    @example(data={**FORMS["scheduler.Job"], **KNOWN["scheduler.Job"]})
    def post(data: dict[str, str]) -> None:
        response = operator_client.post(url, {**inlines, **data})
        assert response.status_code < 500
        saved = Job.objects.get(pk=job.pk)
        saved.full_clean()
        assert 1 <= saved.min_gpus <= saved.max_gpus <= 4  # at most the cluster's 4 GPUs, whatever was typed

    post()


def test_the_scheduler_settings_form_never_fails_or_stores_a_broken_value(operator_client: Client,
                                                                          cluster: Node) -> None:
    url = reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk])

    @FUZZ
    @given(data=form(SETTINGS_FORM))
    @example(data={**SETTINGS_FORM, "round_seconds": "99999999999999", "policy_config": '{"p": "abc"}'})
    @example(data={**SETTINGS_FORM, "policy_config": "0"})  # found by this fuzzer: a 500
    def post(data: dict[str, str]) -> None:
        assert operator_client.post(url, {**data, "_preview_confirmed": "1"}).status_code < 500
        from scheduler.live.config import settings_errors
        assert settings_errors(scheduler_settings()) == {}

    post()


# --- Dash: every callback of every page ---------------------------------------------------------------------


def callbacks() -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(app name, index, callback set) of every server-side callback of every page's Dash app."""
    for page in PAGES:
        app = importlib.import_module(f"cluster_ops.dashboards.{page.app_name}").app
        for index, (spec, _function) in enumerate(app._callback_sets):
            yield page.app_name, index, spec


def _ids(things: Any) -> list[tuple[str, str]]:
    return [(t.component_id, t.component_property) for t in (things if isinstance(things, list | tuple) else [things])]


def request_body(spec: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    """The body Dash's renderer posts for one callback, its inputs and states given ``values`` in order."""
    outputs = _ids(spec["output"])
    given_ids = _ids(spec["inputs"]) + _ids(spec["state"])
    filled = [{"id": i, "property": p, "value": v} for (i, p), v in zip(given_ids, values, strict=True)]
    inputs, state = filled[:len(spec["inputs"])], filled[len(spec["inputs"]):]
    output = (f"{outputs[0][0]}.{outputs[0][1]}" if not isinstance(spec["output"], list)
              else ".." + "...".join(f"{i}.{p}" for i, p in outputs) + "..")
    specs = [{"id": i, "property": p} for i, p in outputs]
    return {"output": output, "outputs": specs if isinstance(spec["output"], list) else specs[0],
            "inputs": inputs, "state": state, "changedPropIds": [f"{inputs[0]['id']}.{inputs[0]['property']}"]}


CALLBACKS = {f"{app}#{index}": spec for app, index, spec in callbacks()}
CLICKED = {"n_clicks": 1, "n_intervals": 1}  # a button pressed, a timer fired: what makes a callback act


def plausible_values(app_name: str, spec: dict[str, Any]) -> list[Any]:
    """What the page's own layout holds for a callback's inputs and states (its controls' first values)."""
    layout = importlib.import_module(f"cluster_ops.dashboards.{app_name}").app.layout
    components = {c.id: c for c in layout._traverse() if isinstance(getattr(c, "id", None), str)}
    return [CLICKED.get(prop, getattr(components.get(ident), prop, None))
            for ident, prop in _ids(spec["inputs"]) + _ids(spec["state"])]


@pytest.fixture
def viewer_client(db: None) -> Client:
    """Staff holding every view permission and nothing else: whatever a callback starts, they may not."""
    user = User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    client = Client()
    client.force_login(user)
    return client


def writes(queries: list[dict[str, str]]) -> list[str]:
    """The statements that changed a table other than the session's (which Django's login touches) and
    django-plotly-dash's own list of apps (which it fills on an app's first request)."""
    changing, bookkeeping = ("INSERT", "UPDATE", "DELETE"), ("django_session", "django_plotly_dash_")
    statements = [q["sql"] or "" for q in queries]
    return [sql[:120] for sql in statements if sql.lstrip().upper().startswith(changing)
            and not any(table in sql for table in bookkeeping)]


def test_every_page_has_its_callbacks_enumerated() -> None:
    assert {name.split("#")[0] for name in CALLBACKS} == {page.app_name for page in PAGES}
    assert len(CALLBACKS) >= 20 and any("energy-run" in json.dumps(str(s["inputs"])) for s in CALLBACKS.values())


@pytest.mark.parametrize("name", sorted(CALLBACKS))
def test_every_callback_takes_hostile_values_and_writes_nothing_without_a_permission(viewer_client: Client,
                                                                                     cluster: Node, name: str) -> None:
    app, spec = name.split("#")[0], CALLBACKS[name]
    plausible = plausible_values(app, spec)
    # The page's own values with one to three of them hostile: the checks behind the first are reached too.
    changes = st.dictionaries(st.integers(0, len(plausible) - 1), VALUES, max_size=3)

    @FUZZ
    @example(changed={})  # the page's own values: a button that starts something must check the permission
    @example(changed={0: "\x00"})  # PostgreSQL refuses a NUL in a query: it failed the request there
    @given(changed=changes)
    def call(changed: dict[int, Any]) -> None:
        values = [changed.get(i, value) for i, value in enumerate(plausible)]
        cache.clear()  # the per-user start throttle must not be what refuses
        with CaptureQueriesContext(connection) as queries:
            response = viewer_client.post(f"/django_plotly_dash/app/{app}/_dash-update-component",
                                          json.dumps(request_body(spec, values), allow_nan=True),
                                          content_type="application/json")
        assert response.status_code < 500, (name, values, response.content[:300])
        assert writes(queries.captured_queries) == [], (name, values)

    call()
