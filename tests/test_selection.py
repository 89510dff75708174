"""``--database-only`` (CI's PostgreSQL pass) keeps every test that can behave differently on another database."""

from __future__ import annotations

import pytest

from .conftest import uses_the_database


@pytest.mark.django_db
def test_a_test_marked_for_the_database_is_kept(request: pytest.FixtureRequest) -> None:
    assert uses_the_database(request.node)


def test_a_test_asking_for_a_database_fixture_is_kept(request: pytest.FixtureRequest, db: None) -> None:
    assert uses_the_database(request.node)


def test_a_test_whose_fixture_asks_for_the_database_is_kept(request: pytest.FixtureRequest, tenant: object) -> None:
    assert uses_the_database(request.node)


@pytest.mark.integration
def test_an_integration_test_is_kept_since_the_processes_it_starts_use_the_database(
    request: pytest.FixtureRequest,
) -> None:
    assert uses_the_database(request.node)


def test_a_test_without_the_database_is_left_to_the_first_pass(request: pytest.FixtureRequest) -> None:
    assert not uses_the_database(request.node)
