"""The dashboard pages without a browser: routing, login, tenant scoping inside Dash callbacks, the seed command."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from cluster_ops.dashboards import common, utilisation
from cluster_ops.dashboards.pages import PAGES
from scheduler.jobs import verbs
from scheduler.models import Gpu, Job, Tenant


@pytest.fixture
def member(tenant: Tenant, other_tenant: Tenant) -> User:
    user = User.objects.create_user("vision-member", password="pw-member-123")
    tenant.members.add(user)
    verbs.submit_job(tenant=tenant, name="resnet-vision", workload_profile="cifar10", total_work=10.0)
    verbs.submit_job(tenant=other_tenant, name="bert-language", workload_profile="bert", total_work=10.0)
    return user


def dash_update(client: Client, app: str, outputs: list[tuple[str, str]],
                inputs: list[tuple[str, str, Any]]) -> str:
    """POST one callback to a Dash app as the browser does; returns the response body."""
    output = outputs[0][0] + "." + outputs[0][1] if len(outputs) == 1 else \
        ".." + "...".join(f"{i}.{p}" for i, p in outputs) + ".."
    specs = [{"id": i, "property": p} for i, p in outputs]
    body = {"output": output, "outputs": specs[0] if len(specs) == 1 else specs,
            "inputs": [{"id": i, "property": p, "value": v} for i, p, v in inputs], "changedPropIds": [], "state": []}
    response = client.post(f"/django_plotly_dash/app/{app}/_dash-update-component", json.dumps(body),
                           content_type="application/json")
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def test_every_page_is_served_behind_login(client: Client, member: User) -> None:
    for page in PAGES:
        assert client.get(f"/dash/{page.slug}/")["Location"].startswith("/accounts/login/")
        assert client.get(f"/django_plotly_dash/app/{page.app_name}/")["Location"].startswith("/accounts/login/")
    client.force_login(member)
    for page in PAGES:
        html = client.get(f"/dash/{page.slug}/").content.decode()
        assert f'src="/django_plotly_dash/app/{page.app_name}/"' in html and page.title in html
    assert client.get("/dash/no-such-page/").status_code == 404


def test_dash_apps_answer_with_local_assets_only(client: Client, member: User) -> None:
    client.force_login(member)
    index = client.get("/django_plotly_dash/app/overview/").content.decode()
    assert '<link rel="stylesheet" href="/static/vendor/bootstrap/bootstrap.min.css">' in index
    assert '<script src="/django_plotly_dash/app/overview/_dash-component-suites/dash/' in index
    assert not re.search(r'(src|href)="(https?:)?//', index)  # nothing from another host
    assert client.get("/static/vendor/bootstrap/bootstrap.min.css").status_code == 200


def test_overview_callback_sees_only_the_users_tenants(client: Client, member: User, operator: User) -> None:
    outputs = [("overview-stats", "children"), ("overview-gpus", "figure"), ("overview-tenant-jobs", "figure"),
               ("overview-waits", "figure"), ("overview-alerts", "children"), ("overview-next", "children"),
               ("overview-tenants", "children"), ("overview-round", "children")]
    client.force_login(member)
    seen = dash_update(client, "overview", outputs, [("overview-tick", "n_intervals", None)])
    assert "vision" in seen and "language" not in seen and "bert-language" not in seen
    client.force_login(operator)
    seen = dash_update(client, "overview", outputs, [("overview-tick", "n_intervals", None)])
    assert "vision" in seen and "language" in seen


def test_utilisation_scopes_refuse_other_tenants(client: Client, member: User, other_tenant: Tenant,
                                                 operator: User, node: Any) -> None:
    assert [s.label for s in utilisation.scopes(member)] == ["tenant vision"]
    assert [s.label for s in utilisation.scopes(operator)] == ["whole cluster", "node node1", "tenant language",
                                                               "tenant vision"]
    crafted = f"tenant:{other_tenant.pk}"
    assert utilisation.resolve(crafted, member).label == "tenant vision"  # type: ignore[union-attr]
    client.force_login(member)
    options = dash_update(client, "utilisation", [("util-scope", "options"), ("util-scope", "value")],
                          [("util-init", "data", 0)])
    assert "tenant vision" in options and "language" not in options and "node" not in options
    figure = dash_update(client, "utilisation", [("util-over-time", "figure")],
                         [("util-range", "value", "30d"), ("util-scope", "value", crafted)])
    assert "language" not in figure and common.NO_TELEMETRY not in figure  # the member's own tenant, no data yet


def test_time_ranges_fall_back_to_the_default() -> None:
    assert common.time_range("1h").total_seconds() == 3600
    assert common.time_range("30d").days == 30
    assert common.time_range("bogus") == common.time_range(common.DEFAULT_RANGE)


def test_seed_command_fills_an_empty_database_and_refuses_a_full_one(db: None) -> None:
    call_command("seed_dashboard_data", gpus=8, days=1, jobs=20)
    assert Gpu.objects.count() == 8 and Job.objects.filter(state__in=["succeeded", "failed", "cancelled"]).count() == 20
    assert Job.objects.filter(state="pending").exists()
    with pytest.raises(CommandError, match="--force"):
        call_command("seed_dashboard_data", gpus=8, days=1, jobs=20)
    call_command("seed_dashboard_data", gpus=16, days=1, jobs=10, force=True)
    assert Gpu.objects.count() == 16 and Tenant.objects.count() == 3
