"""Making a report, in this process: its row, its content, its files (``tasks`` queues the work for a worker).

A report is one row per (kind, period, tenant): making it again writes new files over the old ones and keeps the
row, so a period is never reported twice. The row is claimed with a conditional update (queued → running) before
the work, so a redelivered task does not make it twice at once.
"""

from __future__ import annotations

import logging
from datetime import date, datetime

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.files.base import ContentFile
from django.db.models import F
from django.utils import timezone

from cluster_ops.common.liveness import Heartbeat
from cluster_ops.reports.models import Report, ReportStatus
from scheduler.models import Tenant
from telemetry.ledger import first_data_at

from . import render
from .charts import Chart, draw_charts
from .content import EMPTY_NOTE, ReportContent, build_content
from .periods import Period

logger = logging.getLogger(__name__)


def report_row(period: Period, tenant: Tenant | None, user: User | AnonymousUser | None = None) -> Report:
    """The report's row for (kind, period, tenant), created queued if there is none."""
    report, _ = Report.objects.get_or_create(
        kind=period.kind, period_start=period.start, period_end=period.end, tenant=tenant,
        defaults={"status": ReportStatus.QUEUED, "requested_by": user if isinstance(user, User) else None},
    )
    return report


def period_of(report: Report) -> Period:
    return Period(report.kind, report.period_start, report.period_end)


def make_report(period: Period, tenant: Tenant | None, *, user: User | AnonymousUser | None = None,
                now: datetime | None = None) -> Report:
    """Make (or make again) the report now, in this process; returns its row, ready or failed."""
    report = report_row(period, tenant, user)
    Report.objects.filter(pk=report.pk).update(status=ReportStatus.QUEUED, attempts=0)
    build(report.pk, now)
    report.refresh_from_db()
    return report


def build(report_id: int, now: datetime | None = None) -> bool:
    """Make the queued report ``report_id``: content, charts, HTML, PDF, CSV; False if it was not queued.

    A failure is recorded on the row (status failed, the error) and the files of an earlier run are kept.
    """
    started = timezone.now()
    claimed = Report.objects.filter(pk=report_id, status=ReportStatus.QUEUED).update(
        status=ReportStatus.RUNNING, started_at=started, heartbeat_at=started, attempts=F("attempts") + 1)
    if not claimed:
        return False
    report = Report.objects.select_related("tenant").get(pk=report_id)
    now = now or timezone.now()
    try:
        with Heartbeat(lambda: Report.objects.filter(pk=report_id, status=ReportStatus.RUNNING).update(
                heartbeat_at=timezone.now()), f"report {report_id}"):
            files, content, charts = _made(report, now)
    except SoftTimeLimitExceeded:
        limit = settings.REPORT_TIME_LIMIT_SECONDS
        error = f"Stopped: ran past its time limit of {limit} s (REPORT_TIME_LIMIT_SECONDS)."
        Report.objects.filter(pk=report_id).update(status=ReportStatus.FAILED, error=error)
        return True
    except Exception as error:
        logger.exception("report %s failed", report_id)
        Report.objects.filter(pk=report_id).update(status=ReportStatus.FAILED, error=f"{type(error).__name__}: "
                                                   f"{error}")
        return True
    notes = ([EMPTY_NOTE] if content.empty else []) + content.notes + [
        f"{chart.title}: the chart could not be drawn ({chart.error})" for chart in charts.values() if chart.error]
    _replace_files(report, files)
    report.status, report.error, report.made_at = ReportStatus.READY, "", now
    report.summary, report.notes = render.summary(content, notes), notes
    report.save(update_fields=["status", "error", "made_at", "summary", "notes", "html", "pdf", "csv", "accounting"])
    return True


def _made(report: Report, now: datetime) -> tuple[dict[str, bytes], ReportContent, dict[str, Chart]]:
    """The report's files, and the content and charts they were made of."""
    content = build_content(period_of(report), report.tenant, now)
    charts = draw_charts(content)
    html = render.render_html(content, charts)
    files = {"html": html.encode(), "pdf": render.render_pdf(html), "csv": render.render_csv(content).encode(),
             "accounting": render.render_accounting(content).encode()}
    return files, content, charts


def _replace_files(report: Report, files: dict[str, bytes]) -> None:
    """Write the new files under the report's names, deleting the old ones first (no ``_abc123`` suffixes)."""
    for field, data in files.items():
        stored = getattr(report, field)
        if stored:
            stored.delete(save=False)
        stored.save(report.file_name(field), ContentFile(data), save=False)


def first_data_day() -> date | None:
    """The first day the cluster has anything to report (``telemetry.ledger.first_data_at``); None if none yet."""
    first = first_data_at()
    return timezone.localtime(first).date() if first is not None else None
