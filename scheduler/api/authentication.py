"""API token authentication whose failures are throttled per address (``FailedCredentialsThrottle``)."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from .throttles import FailedCredentialsThrottle


class ThrottledTokenAuthentication(TokenAuthentication):
    """DRF's ``Authorization: Token …``; an address that sent too many wrong tokens gets 429 before any is looked
    up, so tokens cannot be guessed at line rate."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None  # no token offered: the next authentication (the session) decides
        failures = FailedCredentialsThrottle()
        failures.refuse_if_spent(request)
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            failures.count_failure(request)
            raise
