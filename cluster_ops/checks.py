"""System checks that name a misconfiguration (run by check, migrate and the worker)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

REDIS_SCHEMES = {"redis", "rediss", "redis+socket", "unix"}


@register(Tags.compatibility)
def check_environment(app_configs: object = None, **_: object) -> list[CheckMessage]:
    messages: list[CheckMessage] = [
        Error(problem, hint="Fix the environment variable and restart.", id="cluster_ops.E001")
        for problem in settings.CONFIGURATION_ERRORS
    ]
    messages += _check_redis_url(settings.REDIS_URL)
    messages += _check_traces_dir()
    return messages


def _check_redis_url(url: str) -> list[CheckMessage]:
    scheme = urlsplit(url).scheme
    if scheme in REDIS_SCHEMES:
        return []
    return [
        Error(
            f"REDIS_URL={url!r} is not a Redis URL (scheme {scheme or 'missing'!r}).",
            hint="Use redis://host:port/db, rediss://… for TLS or redis+socket:///path.sock.",
            id="cluster_ops.E002",
        )
    ]


def _check_traces_dir() -> list[CheckMessage]:
    if settings.TRACES_DIR.is_dir():
        return []
    return [
        Warning(
            f"TRACES_DIR={str(settings.TRACES_DIR)!r} is not a directory: "
            "the demo cluster uses the calibrated workload generator instead of a real trace.",
            id="cluster_ops.W001",
        )
    ]
