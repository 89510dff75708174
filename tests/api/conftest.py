"""People and jobs for the API tests: a member of each tenant, staff, and one job per tenant."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from cluster_ops.api_tokens import issue_token
from scheduler.jobs import verbs
from scheduler.models import Job, Tenant


@pytest.fixture
def member(tenant: Tenant) -> User:
    """A user of tenant ``vision`` (the ``tenant`` fixture), which owns ``job``."""
    user = User.objects.create_user("alice", password="pw-alice-123")
    tenant.members.add(user)
    return user


@pytest.fixture
def outsider(other_tenant: Tenant) -> User:
    """A user of tenant ``language`` only."""
    user = User.objects.create_user("bob", password="pw-bob-12345")
    other_tenant.members.add(user)
    return user


@pytest.fixture
def other_job(other_tenant: Tenant) -> Job:
    return verbs.submit_job(tenant=other_tenant, name="bert-large", workload_profile="bert", total_work=500.0)


def token_client(user: User | None, enforce_csrf_checks: bool = False) -> APIClient:
    """An API client authenticated by ``user``'s token (anonymous for None)."""
    client = APIClient(enforce_csrf_checks=enforce_csrf_checks)
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(user)}")
    return client


@pytest.fixture
def member_api(member: User) -> APIClient:
    return token_client(member)


@pytest.fixture
def outsider_api(outsider: User) -> APIClient:
    return token_client(outsider)


@pytest.fixture
def staff_api(operator: User) -> APIClient:
    return token_client(operator)


def new_job(**fields: object) -> dict[str, object]:
    """A valid submission for tenant ``vision``, with ``fields`` changed."""
    return {"tenant": "vision", "name": "resnet50", "workload_profile": "cifar10", "total_work": 100.0, **fields}
