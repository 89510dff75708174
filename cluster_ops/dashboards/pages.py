"""The page registry and the one Django view that serves every dashboard page.

A page's Dash app lives in ``cluster_ops/dashboards/<app_name>.py`` (package docstring:
how to add one). The view renders ``templates/dashboards/page.html``, which embeds the app.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from scheduler.models import Tenant


@dataclass(frozen=True)
class Page:
    slug: str  # the URL: /dash/<slug>/
    title: str  # in the navigation bar and the page heading
    app_name: str  # the DjangoDash's name, and its module under cluster_ops/dashboards/
    description: str  # one line under the heading


PAGES: list[Page] = [
    Page("overview", "Overview", "overview",
         "Nodes and GPUs, what is allocated and what is busy, the queue, alerts and the last scheduling round."),
    Page("utilisation", "Utilisation", "utilisation",
         "Allocated vs used GPUs over time, per-GPU utilisation, and GPU-hours held while idle."),
    Page("fairness", "Fairness", "fairness",
         "Tenants' GPUs against quota and fair share, borrowing, Jain's index, finish-time fairness, and why a job "
         "waits."),
    Page("jobs", "Jobs", "jobs",
         "Completion and queueing times, the timeline of allocations and why they changed, goodput vs GPUs."),
    Page("energy", "Energy what-if", "energy",
         "Replay recent history under power caps, idle-node power-down or another policy: energy, CO₂ and cost "
         "against job completion times."),
]


def get_page(slug: str) -> Page:
    for page in PAGES:
        if page.slug == slug:
            return page
    raise Http404(f"no dashboard {slug!r}")


def load_apps() -> None:
    """Import every page's module, which registers its DjangoDash app (called from urls.py at start-up)."""
    for page in PAGES:
        importlib.import_module(f"{__package__}.{page.app_name}")


def scope_text(user: User | AnonymousUser) -> str:
    """Whose data the user sees: staff see every tenant, others their own."""
    names = ", ".join(Tenant.objects.visible_to(user).values_list("name", flat=True))
    if user.is_staff:
        return f"operator view: every tenant ({names})" if names else "operator view: every tenant"
    return f"tenants: {names}" if names else "You belong to no tenant yet: ask an operator to add you."


def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    page = get_page(slug)
    return render(request, "dashboards/page.html", {"page": page, "scope": scope_text(request.user)})


def navigation(request: HttpRequest) -> dict[str, object]:
    """Context processor: the pages for the navigation bar of every template."""
    return {"dashboard_pages": PAGES}
