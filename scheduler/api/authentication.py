"""API token authentication whose failures are throttled per address (``FailedCredentialsThrottle``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from knox.auth import TokenAuthentication
from rest_framework.authentication import get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from .throttles import FailedCredentialsThrottle

MAX_TOKEN_LENGTH = 200  # far above a real token (69 characters); longer is never one


class ThrottledTokenAuthentication(TokenAuthentication):
    """``Authorization: Token …`` against hashed tokens (django-rest-knox); an address that sent too many wrong
    tokens gets 429 before any is looked up, so tokens cannot be guessed at line rate."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.authenticate_header(request).encode().lower():
            return None  # no token offered: the next authentication (the session) decides
        failures = FailedCredentialsThrottle()
        failures.refuse_if_spent(request)
        try:
            if len(parts) == 2 and (len(parts[1]) > MAX_TOKEN_LENGTH or not parts[1].isascii()):
                raise AuthenticationFailed("Invalid token.")  # knox would fail to decode it (a 500)
            return super().authenticate(request)
        except AuthenticationFailed:
            failures.count_failure(request)
            raise


class ThrottledTokenScheme(OpenApiAuthenticationExtension):
    """The schema's name for it: ``Authorization: Token <token>``."""

    target_class = ThrottledTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Token")
