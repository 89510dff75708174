"""Throttles of the API beyond DRF's per-user and per-address ones."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NoReturn

from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

if TYPE_CHECKING:  # the API settings import these modules while rest_framework.views loads
    from rest_framework.views import APIView


# A job's report token travels in this header: it keys the report throttle and HasJobToken checks it.
JOB_TOKEN_HEADER = "X-Job-Token"


class JobReportThrottle(SimpleRateThrottle):
    """Reports of one job with one token (``job-report`` rate): a job's workers share one budget, whatever their
    addresses. Checked only after the token (``HasJobToken.has_permission``), and keyed by the token too, so that
    requests with a wrong token can never spend the real workers' budget."""

    scope = "job-report"

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        token = hashlib.sha256(request.headers.get(JOB_TOKEN_HEADER, "").encode()).hexdigest()[:16]
        return self.cache_format % {"scope": self.scope, "ident": f"{view.kwargs.get('pk')}:{token}"}


class FailedCredentialsThrottle(SimpleRateThrottle):
    """Wrong credentials from one address (``failed-credentials`` rate): an API token, a job's report token.

    Counted apart from the requests' own throttles, which DRF checks only after authentication: without this, a
    client guessing tokens got 401 after 401 at line rate. Past the budget the address gets 429 with Retry-After,
    right credentials or not, until the window moves on.
    """

    scope = "failed-credentials"
    num_requests: int  # set from the rate by SimpleRateThrottle.__init__
    duration: int

    def get_cache_key(self, request: Request, view: APIView | None) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def refuse_if_spent(self, request: Request) -> None:
        """429 if this address has used up its failures."""
        self.key = self.get_cache_key(request, None)
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        if len(self.history) >= self.num_requests:
            raise Throttled(self.wait())

    def count_failure(self, request: Request) -> None:
        self.refuse_if_spent(request)  # loads the history (and refuses a failure past the budget as well)
        self.throttle_success()


class WhatIfStartThrottle(SimpleRateThrottle):
    """What-if sweeps one user starts (``whatif-start`` rate), counted when one is started: each is two or more
    simulations on the background workers, so a button pressed again and again must not fill their queue."""

    scope = "whatif-start"
    num_requests: int  # set from the rate by SimpleRateThrottle.__init__
    duration: int

    def get_cache_key(self, request: Any, view: APIView | None) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}

    def refused(self, user: Any) -> str | None:
        """Why ``user`` may not start another sweep now, or None (and then this start is counted)."""
        if self.allow_request(SimpleNamespace(user=user), None):  # type: ignore[arg-type]
            return None
        wait = self.wait() or 0
        return f"You started {self.num_requests} what-ifs within {self.duration} s; try again in {wait:.0f} s."


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
