"""Who is asking, as the lock-out and the throttles count it."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str | None:
    """The client's address: behind N trusted proxies (``BEHIND_PROXY``), the N-th ``X-Forwarded-For`` entry from
    the right — the address the outermost trusted proxy saw, which a client cannot forge — else the connection's
    own address. The same rule as DRF's ``NUM_PROXIES``, so the throttles and the login lock-out count alike."""
    proxies = settings.BEHIND_PROXY
    if proxies:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if forwarded:
            return forwarded[-min(proxies, len(forwarded))]
    return request.META.get("REMOTE_ADDR")
