"""Who is asking, as the lock-out and the throttles count it."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str | None:
    """The client's address: behind a trusted proxy (``BEHIND_PROXY``), the last ``X-Forwarded-For`` entry — the
    address the proxy itself saw, which a client cannot forge — else the connection's own address."""
    if settings.BEHIND_PROXY:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if forwarded:
            return forwarded[-1]
    return request.META.get("REMOTE_ADDR")
