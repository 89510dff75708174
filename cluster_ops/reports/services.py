"""Verbs of reports: make one (again), ask for one, make the scheduled ones, send one.

A report is one row per (kind, period, tenant): making it again writes new files over the old ones and keeps the
row, so a period is never reported twice. The row is claimed with a conditional update (queued → running) before
the work, so a redelivered task does not make it twice at once.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from cluster_ops.dispatch import send_after_commit
from cluster_ops.liveness import Heartbeat, stopped_beating
from cluster_ops.models import Report, ReportStatus
from scheduler.models import Tenant
from telemetry.ledger import first_data_at

from . import deliver, render
from .charts import Chart, draw_charts
from .content import EMPTY_NOTE, ReportContent, build_content
from .periods import Period, last_complete

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


def request_report(period: Period, tenant: Tenant | None, user: User | AnonymousUser, *, send: bool) -> Report:
    """Queue the report for a worker (the UI's "make report"); a report being made now is left to finish."""
    from .tasks import make  # the task module imports this one

    report = report_row(period, tenant, user)
    queued = Report.objects.filter(pk=report.pk).exclude(status=ReportStatus.RUNNING).update(
        status=ReportStatus.QUEUED, sent_at=timezone.now(), attempts=0)  # asked for anew: its attempts afresh
    if queued:
        send_after_commit(lambda: make.delay(report.pk, send), f"report {report.pk}",
                          unsent=lambda: Report.objects.filter(pk=report.pk).update(sent_at=None))
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


def recover_reports(now: datetime) -> dict[str, int]:
    """Beat's repair of reports lost outside the database: one whose heartbeat stopped (``WORK_LEASE_SECONDS``), or
    still running past its hard time limit, lost its worker (killed, out of memory): made again while it has attempts
    left (``MAX_ATTEMPTS``), else failed with the reason; one still queued ``RESEND_AFTER_SECONDS`` after it was sent
    is sent again (the broker lost it), and one the broker never took at once."""
    from .tasks import make  # the task module imports this one

    lost = now - timedelta(seconds=settings.REPORT_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS)
    running = Report.objects.filter(stopped_beating(now, ReportStatus.RUNNING) | Q(started_at__lt=lost),
                                    status=ReportStatus.RUNNING)
    failed = running.filter(attempts__gte=settings.MAX_ATTEMPTS).update(
        status=ReportStatus.FAILED, error="Stopped: its worker was lost or it ran past its time limit "
                                         f"{settings.MAX_ATTEMPTS} times; ask again.")
    requeued = running.update(status=ReportStatus.QUEUED, sent_at=None)
    stale = now - timedelta(seconds=settings.RESEND_AFTER_SECONDS)
    unsent = Q(sent_at__lt=stale) | Q(sent_at__isnull=True)  # lost by the broker, or never reached it
    resend = list(Report.objects.filter(unsent, status=ReportStatus.QUEUED).values_list("pk", flat=True)[:100])
    Report.objects.filter(pk__in=resend).update(sent_at=now)
    for pk in resend:
        make.delay(pk)
    return {"failed": failed, "requeued": requeued, "resent": len(resend)}


def make_scheduled(kind: str, now: datetime) -> list[Report]:
    """Beat's daily or weekly run: the last complete period's cluster report and one per tenant, each sent to its
    recipients."""
    period = last_complete(kind, now)
    made = []
    for tenant in [None, *Tenant.objects.order_by("name")]:
        report = make_report(period, tenant, now=now)
        if report.status == ReportStatus.READY:
            send_report(report)
        made.append(report)
    return made


def send_report(report: Report) -> list[int]:
    """Queue one e-mail per recipient of the report (``deliver.queue_deliveries``); a worker sends them."""
    from .tasks import deliver_one  # the task module imports this one

    ids = deliver.queue_deliveries(report, timezone.now())
    transaction.on_commit(lambda: [deliver_one.delay(pk) for pk in ids])
    return ids
