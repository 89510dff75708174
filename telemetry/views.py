"""``/metrics`` for Prometheus: a bearer token, an IP allow-list, or a staff session.

The view is exempt from ``LoginRequiredMiddleware`` (a scraper has no session) and checks
access itself: ``Authorization: Bearer <METRICS_TOKEN>``, or a client address inside
``METRICS_ALLOWED_IPS``, or a logged-in staff user. Otherwise 401 (no or a wrong token;
``WWW-Authenticate: Bearer``) or 403 (logged in, not staff). The address is ``REMOTE_ADDR``:
behind a proxy, allow the proxy's address or use the token (X-Forwarded-For can be forged).
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from .exporter import render


@login_not_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    denied = _denied(request)
    if denied is not None:
        return denied
    return HttpResponse(render(timezone.now()), content_type=CONTENT_TYPE_LATEST)


def _denied(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read the metrics, else the 401 or 403 to answer."""
    token = _bearer_token(request)
    if token is not None and settings.METRICS_TOKEN and hmac.compare_digest(token, settings.METRICS_TOKEN):
        return None
    if _address_allowed(request.META.get("REMOTE_ADDR", "")) or request.user.is_staff:
        return None
    if request.user.is_authenticated:
        return HttpResponse("Staff only.\n", status=403, content_type="text/plain")
    response = HttpResponse("Authentication required.\n", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="metrics"' + (', error="invalid_token"' if token else "")
    return response


def _bearer_token(request: HttpRequest) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _address_allowed(address: str) -> bool:
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(client in ipaddress.ip_network(network) for network in settings.METRICS_ALLOWED_IPS)
