"""Throttles of the API beyond DRF's per-user and per-address ones."""

from __future__ import annotations

from typing import NoReturn

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView


class JobReportThrottle(SimpleRateThrottle):
    """Reports of one job (``job-report`` rate): a job's workers share one budget, whatever their addresses."""

    scope = "job-report"

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": view.kwargs.get("pk")}


class ThrottleAnonymousRefusals:
    """Mixed into views that need a login: an anonymous request is counted by the throttles before it is refused.

    DRF checks permissions before throttles, so a flood of requests without (or with wrong) credentials would get
    401s for ever and never a 429; here the throttles run first for those (only then, so nothing counts twice).
    """

    def permission_denied(self, request: Request, message: str | None = None, code: str | None = None) -> NoReturn:
        if not request.user or not request.user.is_authenticated:
            self.check_throttles(request)  # type: ignore[attr-defined]
        super().permission_denied(request, message, code)  # type: ignore[misc]
        raise AssertionError("permission_denied raises")  # unreachable: DRF's raises
