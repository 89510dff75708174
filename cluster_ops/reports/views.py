"""The reports page (list and "make report") and the login-protected downloads; never public media URLs.

Staff see every report; tenant users only their tenants' (``Report.objects.visible_to``); another tenant's report
is a 404, like any object one may not see.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from cluster_ops.reports.models import Report

from . import services, tasks
from .forms import ReportRequestForm, may_make_reports

CONTENT_TYPES = {"html": "text/html; charset=utf-8", "pdf": "application/pdf", "csv": "text/csv; charset=utf-8",
                 "accounting": "text/csv; charset=utf-8"}
# A stored HTML report shown in the browser may show its own inline styles and data: images, nothing else.
HTML_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def report_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and not may_make_reports(request.user):
        raise PermissionDenied("Making reports needs the permission to add reports (as in admin).")
    form = ReportRequestForm(request.user, timezone.now(), data=request.POST or None)
    if request.method == "POST" and form.is_valid() and form.chosen_period is not None:
        report = tasks.request_report(form.chosen_period, form.cleaned_data["tenant"], request.user,
                                         send=bool(form.cleaned_data.get("send")))
        messages.success(request, f"The {report.kind} report {report.period_start:%Y-%m-%d} ({report.scope}) is "
                                  f"{report.get_status_display()}.")
        return redirect("reports:list")
    reports = Report.objects.visible_to(request.user).select_related("tenant").prefetch_related("deliveries")
    page = Paginator(reports, 50).get_page(request.GET.get("page"))
    rows = [(report, services.period_of(report).label) for report in page]  # the days each covers, in TIME_ZONE
    context = {"form": form, "page": page, "rows": rows, "may_make": may_make_reports(request.user)}
    return render(request, "reports/list.html", context, status=400 if form.errors else 200)


@require_GET
def download(request: HttpRequest, pk: int, fmt: str) -> FileResponse:
    if fmt not in CONTENT_TYPES:
        raise Http404("no such format")
    report = get_object_or_404(Report.objects.visible_to(request.user), pk=pk)
    stored = getattr(report, fmt)
    if not stored:
        raise Http404("this report has no such file yet")
    response = FileResponse(stored.open("rb"), as_attachment=fmt != "html", filename=report.file_name(fmt),
                            content_type=CONTENT_TYPES[fmt])
    response["Cache-Control"] = "private, no-store"
    if fmt == "html":
        response["Content-Security-Policy"] = HTML_POLICY
    return response
