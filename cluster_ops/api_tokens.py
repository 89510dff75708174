"""API tokens: stored as SHA-512 digests (django-rest-knox), shown in full once, when made; afterwards only their
first characters identify them, in admin and in the audit of who used which."""

from __future__ import annotations

from django.contrib.auth.models import User
from knox.models import AuthToken

TOKEN_PREFIX = "cops_"  # so a leaked token is recognisable (secret scanners, logs)


def issue_token(user: User) -> str:
    """A new API token of ``user`` that does not expire; the only time its text exists outside the client."""
    _, token = AuthToken.objects.create(user=user, expiry=None, prefix=TOKEN_PREFIX)
    return str(token)
