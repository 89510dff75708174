"""E-mailing reports through Django's e-mail backend (``EMAIL_*`` settings): one ``ReportDelivery`` per recipient.

**Who** receives a report: the active recipients of its tenant — for a cluster-wide report, the recipients without
a tenant — who take its kind (daily, weekly; custom reports go to every active one).
**What**: the HTML body (and a plain-text one) from the report's stored summary, with the PDF and the CSV attached.
**How**: a delivery is claimed by one conditional update (pending or retrying → sending) that counts the attempt;
then sent → ``sent`` (the last error, if any, kept), or failed → ``retrying`` with its error kept and
``DeliveryFailed`` raised, so the Celery task retries it with backoff; the last attempt's failure is ``failed``.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db.models import F, QuerySet
from django.urls import reverse
from django.utils import timezone

from cluster_ops.reports.models import DeliveryStatus, Report, ReportDelivery, ReportKind, ReportRecipient

from . import render

SENDABLE = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING)


class DeliveryFailed(Exception):
    """Sending one report e-mail failed; the task retries it."""


def recipients_for(report: Report) -> QuerySet[ReportRecipient]:
    recipients = ReportRecipient.objects.filter(active=True)
    recipients = recipients.filter(tenant=report.tenant) if report.tenant else recipients.filter(tenant__isnull=True)
    if report.kind == ReportKind.DAILY:
        recipients = recipients.filter(daily=True)
    elif report.kind == ReportKind.WEEKLY:
        recipients = recipients.filter(weekly=True)
    return recipients.order_by("email")


def queue_deliveries(report: Report, now: datetime) -> list[int]:
    """A pending delivery per recipient (a report made again is sent again); returns their ids."""
    ids = []
    for recipient in recipients_for(report):
        delivery, _ = ReportDelivery.objects.update_or_create(
            report=report, recipient=recipient,
            defaults={"email": recipient.email, "status": DeliveryStatus.PENDING, "attempts": 0, "last_error": "",
                      "queued_at": now, "sent_at": None},
        )
        ids.append(delivery.pk)
    return ids


def send_delivery(delivery_id: int, *, final_attempt: bool, now: datetime | None = None) -> str | None:
    """Send one delivery; returns its new status, or None if it was not waiting to be sent."""
    claimed = ReportDelivery.objects.filter(pk=delivery_id, status__in=SENDABLE).update(
        status=DeliveryStatus.SENDING, attempts=F("attempts") + 1)
    if not claimed:
        return None
    delivery = ReportDelivery.objects.select_related("report__tenant").get(pk=delivery_id)
    try:
        message(delivery.report, delivery.email).send(fail_silently=False)
    except Exception as error:
        status = DeliveryStatus.FAILED if final_attempt else DeliveryStatus.RETRYING
        ReportDelivery.objects.filter(pk=delivery_id).update(status=status,
                                                             last_error=f"{type(error).__name__}: {error}")
        raise DeliveryFailed(f"report e-mail to {delivery.email} failed: {error}") from error
    # The last error stays: with ``attempts`` it records what the retries overcame.
    ReportDelivery.objects.filter(pk=delivery_id).update(status=DeliveryStatus.SENT, sent_at=now or timezone.now())
    return DeliveryStatus.SENT


def message(report: Report, to: str) -> EmailMultiAlternatives:
    """The report's e-mail to ``to``: HTML and text bodies, the PDF, the CSV and the accounting CSV attached."""
    attachments = [(report.file_name(field), getattr(report, field), mimetype)
                   for field, mimetype in (("pdf", "application/pdf"), ("csv", "text/csv"), ("accounting", "text/csv"))
                   if getattr(report, field)]
    subject, text, html = render.render_email(report.summary or {"title": str(report)},
                                              [name for name, _, _ in attachments],
                                              settings.PUBLIC_URL + reverse("reports:list"))
    email = EmailMultiAlternatives(subject, text, settings.DEFAULT_FROM_EMAIL, [to])
    email.attach_alternative(html, "text/html")
    for name, stored, mimetype in attachments:
        with stored.open("rb") as handle:
            email.attach(name, handle.read(), mimetype)
    return email

