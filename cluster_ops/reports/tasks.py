"""The reports' work for the workers: the Celery tasks, and the verbs that queue them.

Ask for a report (``request_report``), send one (``send_report``), make the scheduled ones (beat), repair what a lost
worker or broker left (``recover_reports``); ``services`` makes one in this process.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from celery import Task, shared_task
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cluster_ops.common.dispatch import send_after_commit
from cluster_ops.common.liveness import stopped_beating
from cluster_ops.reports.models import Report, ReportStatus
from scheduler.models import Tenant

from . import deliver, services
from .periods import Period, last_complete

MAKE_TASK = "reports.make"
SCHEDULED_TASK = "reports.make_scheduled"
DELIVER_TASK = "reports.deliver"
RECOVER_TASK = "reports.recover"
LIMITS = {"soft_time_limit": settings.REPORT_TIME_LIMIT_SECONDS,
          "time_limit": settings.REPORT_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS}
DELIVERY_RETRIES = 5  # after the first attempt: 1, 2, 4, 8, 16 minutes later (backoff), then failed


# No results kept (the rows hold them): sending then needs the broker only, and fails at once when it is away.
@shared_task(name=MAKE_TASK, acks_late=True, ignore_result=True, **LIMITS)
def make(report_id: int, send: bool = False) -> bool:
    """Make the queued report ``report_id``; with ``send``, e-mail it to its recipients once ready."""
    made = services.build(report_id)
    report = Report.objects.get(pk=report_id)
    if made and send and report.status == ReportStatus.READY:
        send_report(report)
    return made


@shared_task(name=SCHEDULED_TASK, acks_late=True, soft_time_limit=4 * settings.REPORT_TIME_LIMIT_SECONDS,
             time_limit=4 * settings.REPORT_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS)
def make_scheduled(kind: str) -> int:
    """Beat's daily or weekly reports: the cluster's and every tenant's, sent to their recipients."""
    return len(make_scheduled_reports(kind, timezone.now()))


@shared_task(name=RECOVER_TASK, ignore_result=True)
def recover() -> dict[str, int]:
    """Fail reports whose worker was lost, resend those the broker lost (beat, ``RECOVER_SECONDS``)."""
    return recover_reports(timezone.now())


@shared_task(name=DELIVER_TASK, bind=True, acks_late=True, ignore_result=True, autoretry_for=(deliver.DeliveryFailed,),
             retry_backoff=60, retry_backoff_max=3600, retry_jitter=False, max_retries=DELIVERY_RETRIES)
def deliver_one(self: Task, delivery_id: int) -> str | None:
    """Send one report e-mail; a failure is recorded and retried, the last one marks the delivery failed."""
    return deliver.send_delivery(delivery_id, final_attempt=self.request.retries >= DELIVERY_RETRIES)


def request_report(period: Period, tenant: Tenant | None, user: User | AnonymousUser, *, send: bool) -> Report:
    """Queue the report for a worker (the UI's "make report"); a report being made now is left to finish."""
    report = services.report_row(period, tenant, user)
    queued = Report.objects.filter(pk=report.pk).exclude(status=ReportStatus.RUNNING).update(
        status=ReportStatus.QUEUED, sent_at=timezone.now(), attempts=0)  # asked for anew: its attempts afresh
    if queued:
        send_after_commit(lambda: make.delay(report.pk, send), f"report {report.pk}",
                          unsent=lambda: Report.objects.filter(pk=report.pk).update(sent_at=None))
    report.refresh_from_db()
    return report


def send_report(report: Report) -> list[int]:
    """Queue one e-mail per recipient of the report (``deliver.queue_deliveries``); a worker sends them."""
    ids = deliver.queue_deliveries(report, timezone.now())
    transaction.on_commit(lambda: [deliver_one.delay(pk) for pk in ids])
    return ids


def make_scheduled_reports(kind: str, now: datetime) -> list[Report]:
    """Beat's daily or weekly run: the last complete period's cluster report and one per tenant, each sent to its
    recipients."""
    period = last_complete(kind, now)
    made = []
    for tenant in [None, *Tenant.objects.order_by("name")]:
        report = services.make_report(period, tenant, now=now)
        if report.status == ReportStatus.READY:
            send_report(report)
        made.append(report)
    return made


def recover_reports(now: datetime) -> dict[str, int]:
    """Beat's repair of reports lost outside the database: one whose heartbeat stopped (``WORK_LEASE_SECONDS``), or
    still running past its hard time limit, lost its worker (killed, out of memory): made again while it has attempts
    left (``MAX_ATTEMPTS``), else failed with the reason; one still queued ``RESEND_AFTER_SECONDS`` after it was sent
    is sent again (the broker lost it), and one the broker never took at once."""
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
