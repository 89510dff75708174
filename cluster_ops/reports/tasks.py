"""Celery tasks of reports: make one, make the scheduled ones (beat), send one e-mail (retried with backoff)."""

from __future__ import annotations

from celery import Task, shared_task
from django.conf import settings
from django.utils import timezone

from cluster_ops.models import Report, ReportStatus

from . import deliver, services

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
        services.send_report(report)
    return made


@shared_task(name=SCHEDULED_TASK, acks_late=True, soft_time_limit=4 * settings.REPORT_TIME_LIMIT_SECONDS,
             time_limit=4 * settings.REPORT_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS)
def make_scheduled(kind: str) -> int:
    """Beat's daily or weekly reports: the cluster's and every tenant's, sent to their recipients."""
    return len(services.make_scheduled(kind, timezone.now()))


@shared_task(name=RECOVER_TASK, ignore_result=True)
def recover() -> dict[str, int]:
    """Fail reports whose worker was lost, resend those the broker lost (beat, ``RECOVER_SECONDS``)."""
    return services.recover_reports(timezone.now())


@shared_task(name=DELIVER_TASK, bind=True, acks_late=True, ignore_result=True, autoretry_for=(deliver.DeliveryFailed,),
             retry_backoff=60, retry_backoff_max=3600, retry_jitter=False, max_retries=DELIVERY_RETRIES)
def deliver_one(self: Task, delivery_id: int) -> str | None:
    """Send one report e-mail; a failure is recorded and retried, the last one marks the delivery failed."""
    return deliver.send_delivery(delivery_id, final_attempt=self.request.retries >= DELIVERY_RETRIES)
