"""Framing rules: every page refuses to be framed, except the Dash apps our own pages embed."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

DASH_APP_PREFIX = "/django_plotly_dash/"


class DashFramesSameOrigin:
    """Let our pages frame the Dash apps (``SAMEORIGIN``) while ``X_FRAME_OPTIONS`` stays ``DENY``.

    Listed after ``XFrameOptionsMiddleware``, so it sees the response first; that middleware
    leaves a header it finds alone.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path.startswith(DASH_APP_PREFIX):
            response.headers["X-Frame-Options"] = "SAMEORIGIN"
        return response
