"""Every door, one permission per action: a staff user who may only view gets 403 from every admin action and from
every page that starts or sends something, as from the API; the permission that admin names lets them through."""

from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from cluster_ops.dashboards import energy
from cluster_ops.reports.models import Report, ReportRecipient
from scheduler.models import Job, Node, WhatIfSweep

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(db: None) -> User:
    """Staff holding every view permission and nothing else."""
    user = User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    return user


@pytest.fixture
def viewer_client(viewer: User) -> Client:
    client = Client()
    client.force_login(viewer)
    return client


def every_action() -> list[tuple[admin.ModelAdmin, str, object]]:
    return [(model_admin, name, function) for model_admin in admin.site._registry.values()
            for function, name, _ in model_admin._get_base_actions()]


def test_every_admin_action_declares_a_permission() -> None:
    actions = every_action()
    assert len(actions) >= 30  # ours (jobs, nodes, GPUs, what-ifs, reports, events) and other apps'
    missing = [f"{model_admin.model._meta.label}.{name}" for model_admin, name, function in actions
               if not getattr(function, "allowed_permissions", None)]
    assert missing == []


ACTIONS = sorted({f"{model_admin.model._meta.label}:{name}" for model_admin, name, _ in every_action()})


@pytest.mark.parametrize("label_and_action", ACTIONS)
def test_a_view_only_staff_user_gets_403_from_every_admin_action(viewer_client: Client, job: Job, node: Node,
                                                                 label_and_action: str) -> None:
    label, action = label_and_action.split(":")
    app_label, model = label.lower().split(".")
    url = reverse(f"admin:{app_label}_{model}_changelist")
    response = viewer_client.post(url, {"action": action, "_selected_action": ["1"], "index": "0"})
    assert response.status_code == 403, (label, action, response.status_code)


def test_the_jobs_actions_change_nothing_for_a_viewer_and_work_with_change_job(
        viewer: User, viewer_client: Client, job: Job) -> None:
    url = reverse("admin:scheduler_job_changelist")
    viewer_client.post(url, {"action": "cancel_jobs", "_selected_action": [job.pk]})
    assert Job.objects.get(pk=job.pk).state == "pending"
    viewer.user_permissions.add(Permission.objects.get(codename="change_job"))
    client = Client()
    client.force_login(User.objects.get(pk=viewer.pk))
    assert client.post(url, {"action": "cancel_jobs", "_selected_action": [job.pk]}).status_code == 302
    assert Job.objects.get(pk=job.pk).state == "cancelled"


def test_cordon_needs_change_node(viewer_client: Client, node: Node) -> None:
    url = reverse("admin:scheduler_node_changelist")
    assert viewer_client.post(url, {"action": "cordon", "_selected_action": [node.pk]}).status_code == 403
    assert Node.objects.get(pk=node.pk).schedulable


# --- the Energy page's "Run what-if" (failure 5) ----------------------------------------------------------------


def test_the_energy_page_starts_what_ifs_only_with_the_apis_permission(viewer: User, operator: User) -> None:
    defaults = [*energy_values()]
    _, shown, message = energy.run_or_list(1, 0, *defaults, user=viewer)
    assert shown is None and "permission" in str(message) and not WhatIfSweep.objects.exists()
    assert energy.init(1, user=viewer)[3] is True  # the button is disabled for them
    assert energy.may_start_whatifs(operator)  # a superuser holds every permission


def test_a_view_only_user_firing_the_run_button_gets_a_403_and_its_page_still_loads(viewer_client: Client,
                                                                                       operator: User) -> None:
    from tests.web.test_doors_fuzz import CALLBACKS, request_body

    name, spec = next((n, s) for n, s in CALLBACKS.items() if "energy-run" in str(s["inputs"]))
    url = "/django_plotly_dash/app/energy/_dash-update-component"
    clicked = request_body(spec, [1, 1, *energy_values()])
    response = viewer_client.post(url, json.dumps(clicked), content_type="application/json")
    assert response.status_code == 403 and response.json() == {"error": "You may not start what-ifs."}
    assert not WhatIfSweep.objects.exists()
    loading = {**request_body(spec, [None, 1, *energy_values()]), "changedPropIds": ["energy-init.data"]}
    assert viewer_client.post(url, json.dumps(loading), content_type="application/json").status_code == 200  # load
    permitted = Client()
    permitted.force_login(operator)
    assert permitted.post(url, json.dumps(clicked), content_type="application/json").status_code == 200, name


def test_every_declared_action_is_a_real_control_of_its_page() -> None:
    from cluster_ops.dashboards.common import ACTIONS
    from tests.web.test_doors_fuzz import CALLBACKS

    inputs = {(name.split("#")[0], f"{i.component_id}.{i.component_property}")
              for name, spec in CALLBACKS.items() for i in spec["inputs"]}
    assert ACTIONS and set(ACTIONS) <= inputs


def energy_values(**changed: object) -> list[object]:
    from scheduler.whatif.history import HISTORY, LIVE_CLUSTER

    values = {"source": HISTORY, "days": 7, "cluster": LIVE_CLUSTER, "max_jobs": None, "policy": "fifo",
              "down": [], "spares": 1, "min_off": 10, "load": 1.0, "pue": 1.58, "grid": 475, "price": 0.1}
    values |= changed
    return [*values.values(), *[0.8] * len(energy.CAP_TYPES)]


# --- reports (failure 6) ----------------------------------------------------------------------------------------


def test_staff_without_the_permission_neither_make_nor_send_reports(viewer_client: Client) -> None:
    page = viewer_client.get("/reports/").content.decode()
    assert 'id="make-report-refused"' in page and 'id="make-report"' not in page
    response = viewer_client.post("/reports/", {"period": "daily", "send": "on"})
    assert response.status_code == 403 and not Report.objects.exists()


def test_sending_needs_its_own_permission_and_recipients(viewer: User) -> None:
    viewer.user_permissions.add(Permission.objects.get(codename="add_report"))
    client = Client()
    client.force_login(User.objects.get(pk=viewer.pk))
    assert 'name="send"' not in client.get("/reports/").content.decode()
    viewer.user_permissions.add(Permission.objects.get(codename="send_report"))
    client.force_login(User.objects.get(pk=viewer.pk))
    refused = client.post("/reports/", {"period": "daily", "send": "on"})
    assert refused.status_code == 400 and "Nobody receives" in refused.content.decode()
    ReportRecipient.objects.create(email="ops@example.org")
    assert client.post("/reports/", {"period": "daily", "send": "on"}).status_code == 302
    assert Report.objects.count() == 1
