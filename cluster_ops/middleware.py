"""The embedded Dash apps: who may frame them, CSRF on their callbacks, and no 500 from a crafted callback."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware

from .common import bounded_json
from .dashboards.common import ACTIONS, Action

DASH_APP_PREFIX = "/django_plotly_dash/"
DASH_CALLBACK_SUFFIX = "/_dash-update-component"


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


class DashCallbacksCsrf(CsrfViewMiddleware):
    """CSRF on the Dash callback endpoint, which django-plotly-dash marks ``csrf_exempt``.

    A callback can start work (the energy what-if launches simulations), so it gets the
    same check as every other POST. Dash's renderer sends the ``_csrf_token`` cookie as the
    ``X-CSRFToken`` header, hence ``CSRF_COOKIE_NAME = "_csrf_token"`` in settings.
    """

    def process_view(self, request: HttpRequest, callback: Callable, callback_args: tuple, callback_kwargs: dict):  # type: ignore[override]
        if request.path.startswith(DASH_APP_PREFIX) and request.path.endswith(DASH_CALLBACK_SUFFIX):
            return super().process_view(request, _checked, callback_args, callback_kwargs)
        return None


def _checked(request: HttpRequest) -> HttpResponse:  # a stand-in view without csrf_exempt
    raise AssertionError("never called")


logger = logging.getLogger(__name__)
CRAFTED_CALLBACK = "The page sent values this view cannot show; reload the page."


class DashCallbacksRefuseCraftedRequests:
    """A callback request the app cannot answer (an unknown output id, a body that is not Dash's, a value no
    control sends) is a 400 with a reason, never a 500: the callback endpoint takes anything a client posts.

    Each callback validates the values it reads and explains an empty view itself; this is the net under them,
    and it logs what it caught so that a real bug is still seen.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, callback: Callable, callback_args: tuple,
                     callback_kwargs: dict) -> HttpResponse | None:
        """After the CSRF check (listed after ``DashCallbacksCsrf``): a body that is not a Dash request is a 400 —
        django-plotly-dash answers one it cannot decode with an empty 200, which a client takes for success."""
        if request.method != "POST" or not _is_callback(request):
            return None
        if not _is_dash_request(request.body):
            return JsonResponse({"error": CRAFTED_CALLBACK}, status=400)
        refused = _refused_action(request)
        return JsonResponse({"error": f"You may not {refused.what}."}, status=403) if refused else None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _is_callback(request):
            return None
        logger.warning("refused a Dash callback on %s: %s: %s", request.path, type(exception).__name__, exception)
        return JsonResponse({"error": CRAFTED_CALLBACK}, status=400)


def _is_callback(request: HttpRequest) -> bool:
    return request.path.startswith(DASH_APP_PREFIX) and request.path.endswith(DASH_CALLBACK_SUFFIX)


def _refused_action(request: HttpRequest) -> Action | None:
    """The declared action (``dashboards.common.action``) this request fires — its input changed, or carrying a
    value such as a click count — that the user may not use."""
    app_name = request.path.removeprefix(DASH_APP_PREFIX).removeprefix("app/").partition("/")[0]
    body = bounded_json.loads(request.body)
    changed = {str(ident) for ident in body.get("changedPropIds") or [] if isinstance(ident, str | int)}
    for given in body.get("inputs") or []:
        if not isinstance(given, dict):
            continue
        trigger = f"{given.get('id')}.{given.get('property')}"
        action = ACTIONS.get((app_name, trigger))
        if action and (trigger in changed or given.get("value")) and not action.allowed(request.user):
            return action
    return None


def _is_dash_request(body: bytes) -> bool:
    """A JSON object, nested no deeper than ``bounded_json`` allows, naming the outputs it asks for, as Dash's
    renderer sends."""
    try:
        decoded = bounded_json.loads(body)
    except ValueError:
        return False
    return isinstance(decoded, dict) and isinstance(decoded.get("output"), str) and not _holds_nul(decoded)


def _holds_nul(value: object) -> bool:
    """Whether a NUL character is in any text of ``value``: no control sends one, and PostgreSQL refuses it in
    a query, so it is refused here as forms and the API refuse it (Django's ProhibitNullCharactersValidator)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False
