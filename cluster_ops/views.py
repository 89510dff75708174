"""The landing page is the Overview dashboard (``cluster_ops/dashboards/``); ``/favicon.ico`` points at our icon."""

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.templatetags.static import static

from .dashboards.pages import dashboard


def home(request: HttpRequest) -> HttpResponse:
    return dashboard(request, "overview")


@login_not_required  # the login page's tab shows it too
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on pages that name no icon (the admin's, the Dash apps')."""
    return HttpResponsePermanentRedirect(static("cluster_ops/favicon.svg"))
