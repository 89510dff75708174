"""Errors as API clients see them: every validation error keyed by the field it is about."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler

BODY = "body"  # the field a 400 names when the request body as a whole is not JSON


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus Django's ``ValidationError`` (raised by the services) as a 400, and a body that is not
    JSON (NaN, Infinity, a syntax error) as a 400 naming ``body``: every 400 names what is wrong."""
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(detail=field_errors(exc))
    elif isinstance(exc, exceptions.ParseError):
        exc = exceptions.ValidationError(detail={BODY: [str(exc.detail)]})
    return exception_handler(exc, context)


def field_errors(error: DjangoValidationError) -> dict[str, list[str]]:
    """``{"field": ["message", …]}``; errors about no single field go under ``non_field_errors``."""
    if not hasattr(error, "error_dict"):
        return {api_settings.NON_FIELD_ERRORS_KEY: list(error.messages)}
    return {
        api_settings.NON_FIELD_ERRORS_KEY if field == NON_FIELD_ERRORS else field: messages
        for field, messages in error.message_dict.items()
    }
