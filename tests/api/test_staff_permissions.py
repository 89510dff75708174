"""A staff user with no model permissions got 403 in admin but 200 from ``PATCH /api/jobs/45/``
and 202 from ``POST /api/gpus/1/power-cap/``. The API now asks for the permissions admin asks for."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from knox.models import AuthToken
from rest_framework.test import APIClient

from scheduler.models import Job, Node

from .conftest import new_job, token_client


@pytest.fixture
def bare_staff(db: None) -> User:
    return User.objects.create_user("staffer", password="pw-staffer-123", is_staff=True)


def grant(user: User, *codenames: str) -> APIClient:
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    AuthToken.objects.filter(user=user).delete()
    return token_client(User.objects.get(pk=user.pk))  # a fresh object: permissions are cached per instance


def test_staff_without_permissions_are_refused_every_change(bare_staff: User, job: Job, node: Node,
                                                            tenant: object) -> None:
    api, gpu = token_client(bare_staff), node.gpus.first()
    assert api.get(f"/api/jobs/{job.pk}/").status_code == 200  # reading stays open to staff
    assert api.patch(f"/api/jobs/{job.pk}/", {"priority": 5}, format="json").status_code == 403
    assert api.post(f"/api/jobs/{job.pk}/cancel/", {}, format="json").status_code == 403
    assert api.post("/api/jobs/", new_job(), format="json").status_code == 403
    assert api.post(f"/api/gpus/{gpu.pk}/power-cap/", {"watts": 300}, format="json").status_code == 403
    assert Job.objects.get(pk=job.pk).priority == 0 and Job.objects.count() == 1


def test_each_change_needs_its_own_permission(bare_staff: User, job: Job, node: Node) -> None:
    api = grant(bare_staff, "change_job")
    assert api.patch(f"/api/jobs/{job.pk}/", {"priority": 5}, format="json").status_code == 200
    assert api.post("/api/jobs/", new_job(), format="json").status_code == 403  # add_job is another permission
    gpu = node.gpus.first()
    assert api.post(f"/api/gpus/{gpu.pk}/power-cap/", {"watts": 300}, format="json").status_code == 403
    changer = grant(bare_staff, "change_gpu")  # changing GPUs is not capping their power
    assert changer.post(f"/api/gpus/{gpu.pk}/power-cap/", {"watts": 300}, format="json").status_code == 403
    capper = grant(bare_staff, "cap_power")
    allowed = capper.post(f"/api/gpus/{gpu.pk}/power-cap/", {"watts": 300}, format="json")
    assert allowed.status_code != 403, allowed.json()  # past the permission (the fixture's GPU may refuse the watts)


def test_the_cap_power_action_in_admin_needs_the_permission_too(bare_staff: User, node: Node) -> None:
    from django.test import Client

    bare_staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_gpu", "change_gpu"]))
    client = Client()
    client.force_login(bare_staff)
    assert "Cap power" not in client.get("/admin/scheduler/gpu/").content.decode()
    bare_staff.user_permissions.add(Permission.objects.get(codename="cap_power"))
    assert "Cap power" in client.get("/admin/scheduler/gpu/").content.decode()
