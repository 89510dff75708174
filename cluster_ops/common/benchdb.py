"""A throwaway database for benchmarks: created beside the configured one, migrated, dropped afterwards.

The benchmark commands (``bench_round``, ``bench_telemetry``) seed thousands of rows; they
must never touch the product's data, and must measure the same engine the product runs on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection


@contextmanager
def throwaway_database(label: str) -> Iterator[str]:
    """Point the default connection at a new, migrated database named after ``label``; drop it on exit.

    Built as the test runner builds its database. SQLite gets a file under ``VAR_DIR``
    (WAL, as in production; not the runner's in-memory default); PostgreSQL a database
    ``<configured name>_<label>`` on the same server, so a test run's ``test_…`` database is
    never clobbered. Yields the database's name.
    """
    test = connection.settings_dict.setdefault("TEST", {})
    saved = test.get("NAME")
    if connection.vendor == "sqlite":
        test["NAME"] = str(settings.VAR_DIR / f"{label}.sqlite3")
    else:
        test["NAME"] = f"{connection.settings_dict['NAME']}_{label}"
    original = connection.settings_dict["NAME"]
    try:
        name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        try:
            yield name
        finally:
            connection.creation.destroy_test_db(original, verbosity=0)
    finally:
        test["NAME"] = saved
