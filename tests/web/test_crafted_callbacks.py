"""Crafted Dash callback values gave 500s (``jobs-job.value="abc"``, ``energy-sweep="x"``,
an unknown output id). Now each callback explains an empty view, and the endpoint never answers 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from .test_dashboards import dash_update

ENERGY_SHOW = [("energy-progress", "children"), ("energy-tick", "disabled"), ("energy-stats", "children"),
               ("energy-tradeoff", "figure"), ("energy-scatter", "figure"), ("energy-tenants", "figure"),
               ("energy-tenant-energy", "figure"), ("energy-past", "children")]


@pytest.fixture
def staff(client: Client, operator: User) -> Client:
    client.force_login(operator)
    return client


@pytest.mark.parametrize("value", ["abc", "-1", "1e400", True, [1], {"a": 1}, "9" * 40, 0])
def test_a_crafted_job_id_gets_an_explained_empty_chart(staff: Client, value: Any) -> None:
    body = dash_update(staff, "jobs", [("jobs-goodput", "figure")], [("jobs-job", "value", value)])
    assert "No such job" in body


@pytest.mark.parametrize("value", ["x", "1.5", -3, None])
def test_a_crafted_sweep_id_gets_an_explained_empty_view(staff: Client, value: Any) -> None:
    body = dash_update(staff, "energy", ENERGY_SHOW, [("energy-sweep", "value", value),
                                                      ("energy-tick", "n_intervals", None)])
    assert ("No such what-if" if value is not None else "No what-if yet") in body


def test_a_crafted_pending_job_gets_an_explanation(staff: Client) -> None:
    body = dash_update(staff, "fairness", [("fair-pending-detail", "children")], [("fair-pending-job", "value", "x")])
    assert "No such job" in body


@pytest.mark.parametrize("body", [
    {"output": "no-such-output.figure", "outputs": {"id": "no-such-output", "property": "figure"},
     "inputs": [{"id": "jobs-job", "property": "value", "value": 1}], "changedPropIds": [], "state": []},
])
def test_a_request_no_app_can_answer_is_a_400_not_a_500(staff: Client, body: Any) -> None:
    response = staff.post("/django_plotly_dash/app/jobs/_dash-update-component", json.dumps(body),
                          content_type="application/json")
    assert response.status_code == 400 and "reload" in response.json()["error"]


@pytest.mark.parametrize("body", ["{not json", json.dumps({"output": "jobs-goodput.figure"}),
                                  json.dumps({"nothing": "dash would send"}), json.dumps([1, 2, 3]), ""])
def test_bodies_that_are_not_dash_requests_never_give_a_5xx(staff: Client, body: str) -> None:
    response = staff.post("/django_plotly_dash/app/jobs/_dash-update-component", body,
                          content_type="application/json")
    assert response.status_code < 500


def test_crafted_energy_settings_are_refused_naming_the_field(staff: Client) -> None:
    from cluster_ops.dashboards import energy

    values = [None] * len(energy.CONTROLS)
    values[energy.CONTROLS.index("energy-load")] = 0  # was silently replaced by 1.0
    with pytest.raises(Exception) as refused:
        energy.choices_from(values)
    assert "load_factor" in str(refused.value)
    values[energy.CONTROLS.index("energy-load")] = None
    values[energy.CONTROLS.index("energy-cap-a100")] = 0  # was silently replaced by 1.0
    with pytest.raises(Exception, match=r"power_caps_by_type \(a100\)"):
        energy.choices_from(values)
