"""Fixtures of the Fairness, Jobs and Energy what-if data tests: a cluster with a day of history, and its people."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from cluster_ops.celery import app as celery_app

from .history import History, seed_history


@pytest.fixture
def history(db: None) -> History:
    return seed_history(timezone.now())


@pytest.fixture
def staff(db: None) -> User:
    """An operator who may start what-ifs (``add_whatifrun``, as ``POST /api/whatif/`` asks)."""
    user = User.objects.create_user("ops", password="pw-ops-12345", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="add_whatifrun"))
    return User.objects.get(pk=user.pk)


@pytest.fixture
def vision_user(history: History) -> User:
    user = User.objects.create_user("vera", password="pw-vera-12345")
    history.vision.members.add(user)
    return user


@pytest.fixture
def language_user(history: History) -> User:
    user = User.objects.create_user("lars", password="pw-lars-12345")
    history.language.members.add(user)
    return user


@pytest.fixture
def eager_celery() -> Iterator[None]:
    """The project's Celery app runs tasks in-process (on the app: a test's settings cannot)."""
    import scheduler.tasks  # noqa: F401  (registers the what-if tasks, as a worker's autodiscovery does)

    celery_app.conf.update(task_always_eager=True)
    yield
    celery_app.conf.update(task_always_eager=False)
