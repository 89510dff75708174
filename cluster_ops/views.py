"""The landing page is the Overview dashboard (``cluster_ops/dashboards/``)."""

from django.http import HttpRequest, HttpResponse

from .dashboards.pages import dashboard


def home(request: HttpRequest) -> HttpResponse:
    return dashboard(request, "overview")
