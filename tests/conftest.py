"""Fixtures shared by the whole suite: people, tenants and inventory made through services."""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from scheduler import inventory
from scheduler.jobs import verbs
from scheduler.models import Job, Node, Tenant

from . import prerequisites

FIXTURES = Path(__file__).parent / "fixtures"
# A test that asks for any of these (or is marked django_db) reads or writes the database in-process.
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_server",
                               "django_db_reset_sequences", "django_db_serialized_rollback"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-only", action="store_true",
        help="run only the tests that can behave differently on another database: those that use it in-process "
             "and the integration tests, whose processes use it (CI's PostgreSQL pass); the rest are deselected, "
             "and pytest's summary counts them",
    )


def pytest_configure(config: pytest.Config) -> None:
    """A suite stopped with SIGTERM (a CI timeout, ``kill``) stops as on Ctrl-C: its fixtures' teardowns run, so
    the labs, Redis and workers it started are stopped rather than left running."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(number: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {number}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--database-only"):
        return
    kept, dropped = [], []
    for item in items:
        (kept if uses_the_database(item) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def uses_the_database(item: pytest.Item) -> bool:
    """True for a test that uses the database, in-process or through the processes it starts."""
    if item.get_closest_marker("django_db") or item.get_closest_marker("integration"):
        return True
    return bool(DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


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
    specs = [inventory.GpuSpec(i, f"GPU-node1-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(4)]
    return inventory.register_node("node1", specs)


@pytest.fixture
def job(tenant: Tenant) -> Job:
    return verbs.submit_job(tenant=tenant, name="resnet", workload_profile="cifar10", total_work=1000.0,
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
