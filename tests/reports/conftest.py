"""Fixtures of the report tests: the hand-computable week, report files in a temporary MEDIA_ROOT, eager Celery."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from cluster_ops.celery import app as celery_app
from cluster_ops.reports.models import ReportRecipient

from .week import Week, seed_week


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    """Report files go to a fresh directory per test (never VAR_DIR/media)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def week(db: None) -> Week:
    return seed_week()


@pytest.fixture
def made_at(week: Week):  # type: ignore[no-untyped-def]
    """When the week's reports are made: the Monday after, 07:00."""
    return week.period.end + timedelta(hours=7)


@pytest.fixture
def eager_celery() -> Iterator[None]:
    """Tasks run in-process (on the app: a test's settings cannot)."""
    import cluster_ops.tasks  # noqa: F401  (registers reports.*, as a worker's autodiscovery does)

    celery_app.conf.update(task_always_eager=True)
    yield
    celery_app.conf.update(task_always_eager=False)


@pytest.fixture
def recipients(week: Week) -> dict[str, ReportRecipient]:
    return {
        "ops": ReportRecipient.objects.create(tenant=None, email="ops@example.com"),
        "ops-weekly-off": ReportRecipient.objects.create(tenant=None, email="daily-only@example.com", weekly=False),
        "vision": ReportRecipient.objects.create(tenant=week.vision, email="vision-lead@example.com"),
        "vision-inactive": ReportRecipient.objects.create(tenant=week.vision, email="gone@example.com", active=False),
        "language": ReportRecipient.objects.create(tenant=week.language, email="language-lead@example.com"),
    }


def login(username: str) -> Client:
    from django.contrib.auth.models import User

    client = Client()
    client.force_login(User.objects.get(username=username))
    return client
