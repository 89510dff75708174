"""Fixtures shared by the whole suite: people, tenants and inventory made through services."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from scheduler import services
from scheduler.models import Job, Node, Tenant

from . import prerequisites

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def required_prerequisites(request: pytest.FixtureRequest) -> None:
    """``@pytest.mark.needs("browser")``: fail saying what to install, unless opted out (tests/prerequisites.py)."""
    for marker in request.node.iter_markers("needs"):
        for group in marker.args:
            prerequisites.require(group)


@pytest.fixture(autouse=True)
def fresh_throttles() -> None:
    """Throttle counts live in the cache: each test starts with none (ids repeat across tests)."""
    cache.clear()


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def tenant(db: None) -> Tenant:
    return Tenant.objects.create(name="vision", gpu_quota=8, fair_share_weight=1.0)


@pytest.fixture
def other_tenant(db: None) -> Tenant:
    return Tenant.objects.create(name="language", gpu_quota=8, fair_share_weight=2.0)


@pytest.fixture
def node(db: None) -> Node:
    specs = [services.GpuSpec(i, f"GPU-node1-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(4)]
    return services.register_node("node1", specs)


@pytest.fixture
def job(tenant: Tenant) -> Job:
    return services.submit_job(tenant=tenant, name="resnet", workload_profile="cifar10", total_work=1000.0,
                               min_gpus=1, max_gpus=4)


@pytest.fixture
def operator(db: None) -> User:
    return User.objects.create_user("operator", password="pw-operator-1", is_staff=True, is_superuser=True)


@pytest.fixture
def operator_client(operator: User) -> Client:
    client = Client()
    client.force_login(operator)
    return client


@pytest.fixture
def now():
    return timezone.now()
