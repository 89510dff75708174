"""Settings for the test suite: the product's settings with in-process Celery transports.

Celery builds its broker pool and result backend once and never re-reads the URLs, so
they are fixed here; integration tests that need a real Redis build their own Celery
app against it (tests/integration/conftest.py).
"""

from .settings import *  # noqa: F403

CELERY_BROKER_URL = "memory://"
CELERY_RESULT_BACKEND = "cache+memory://"
STORAGES = {
    **STORAGES,  # noqa: F405
    # The manifest needs collectstatic; tests serve from the finders instead.
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast; tests only

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not shared-cache memory: worker threads in integration tests open their own
    # connections, and WAL + IMMEDIATE behave as in production only on a file.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_cluster_ops.sqlite3")}  # noqa: F405

# Worker and beat threads in integration tests must not keep connections open past their
# task: PostgreSQL refuses to drop a test database that still has sessions.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
WHITENOISE_AUTOREFRESH = True  # serve from the finders; no collectstatic before tests
WHITENOISE_USE_FINDERS = True
