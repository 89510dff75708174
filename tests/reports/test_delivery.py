"""E-mail: the right recipients get the right attachments; failures are retried with Celery and recorded."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.core import mail

from cluster_ops.reports import deliver, services, tasks
from cluster_ops.reports.models import DeliveryStatus, Report, ReportDelivery, ReportRecipient
from cluster_ops.reports.tasks import DELIVERY_RETRIES

from .flaky_backend import FlakyBackend
from .week import Week

OnCommit = Callable[..., Any]


def sent_to(address: str) -> mail.EmailMessage:
    [message] = [m for m in mail.outbox if m.to == [address]]
    return message


@pytest.mark.usefixtures("eager_celery")
def test_each_report_goes_to_its_recipients_with_its_pdf_and_csv(
        week: Week, made_at: datetime, recipients: dict[str, ReportRecipient],
        django_capture_on_commit_callbacks: OnCommit) -> None:
    cluster = services.make_report(week.period, None, now=made_at)
    vision = services.make_report(week.period, week.vision, now=made_at)
    with django_capture_on_commit_callbacks(execute=True):
        tasks.send_report(cluster)
        tasks.send_report(vision)
    # Weekly reports: not to the daily-only address, not to the inactive one; language had no report made.
    assert sorted(m.to[0] for m in mail.outbox) == ["ops@example.com", "vision-lead@example.com"]
    ops, lead = sent_to("ops@example.com"), sent_to("vision-lead@example.com")
    assert ops.subject == f"Cluster Ops weekly report · whole cluster · {week.period.label}"
    assert lead.subject == f"Cluster Ops weekly report · tenant vision · {week.period.label}"
    stem = f"weekly-{week.T:%Y-%m-%d}-vision"
    assert [(name, kind) for name, _, kind in lead.attachments] == [
        (f"{stem}.pdf", "application/pdf"), (f"{stem}.csv", "text/csv"), (f"{stem}-accounting.csv", "text/csv")]
    assert lead.attachments[0][1][:5] == b"%PDF-"
    html = lead.alternatives[0][0]
    assert "Summary" in html and "GPU-hours allocated" in html and "/reports/" in html
    for other in ("research", "language", "dave", "bob", "336.0"):
        assert other not in html and other not in lead.body and other not in lead.attachments[1][1]
    assert "research" in ops.attachments[1][1] and "Cap GPU power at 80%" in ops.body
    rows = ReportDelivery.objects.order_by("email")
    assert [(d.email, d.status, d.attempts) for d in rows] == [("ops@example.com", "sent", 1),
                                                               ("vision-lead@example.com", "sent", 1)]
    assert all(d.sent_at for d in rows)


def test_a_delivery_is_claimed_once_and_a_failure_recorded(week: Week, made_at: datetime,
                                                           recipients: dict[str, ReportRecipient],
                                                           settings: Any) -> None:
    settings.EMAIL_BACKEND = "tests.reports.flaky_backend.FlakyBackend"
    report = services.make_report(week.period, week.vision, now=made_at)
    [delivery_id] = deliver.queue_deliveries(report, made_at)
    FlakyBackend.failures = 1
    with pytest.raises(deliver.DeliveryFailed, match="vision-lead@example.com"):
        deliver.send_delivery(delivery_id, final_attempt=False)
    delivery = ReportDelivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.RETRYING, 1)
    assert delivery.last_error == "SMTPServerDisconnected: Connection unexpectedly closed"
    assert deliver.send_delivery(delivery_id, final_attempt=False) == DeliveryStatus.SENT
    assert deliver.send_delivery(delivery_id, final_attempt=False) is None  # sent once: not again
    assert len(mail.outbox) == 1 and ReportDelivery.objects.get(pk=delivery_id).attempts == 2


@pytest.mark.usefixtures("eager_celery")
@pytest.mark.parametrize("failures, status, attempts", [
    (2, DeliveryStatus.SENT, 3),  # two failures, retried, then sent
    (99, DeliveryStatus.FAILED, 1 + DELIVERY_RETRIES),  # every retry used up: failed, with the error
])
def test_the_task_retries_with_backoff_and_records_the_outcome(
        week: Week, made_at: datetime, recipients: dict[str, ReportRecipient], settings: Any,
        django_capture_on_commit_callbacks: OnCommit, failures: int, status: str, attempts: int) -> None:
    settings.EMAIL_BACKEND = "tests.reports.flaky_backend.FlakyBackend"
    FlakyBackend.failures = failures
    report = services.make_report(week.period, None, now=made_at)
    with django_capture_on_commit_callbacks(execute=True):
        tasks.send_report(report)
    delivery = ReportDelivery.objects.get(report=report)
    assert (delivery.status, delivery.attempts) == (status, attempts)
    assert delivery.last_error == "SMTPServerDisconnected: Connection unexpectedly closed"
    assert len(mail.outbox) == (1 if status == DeliveryStatus.SENT else 0)
    FlakyBackend.failures = 0


def test_the_task_is_configured_to_back_off() -> None:
    from cluster_ops.reports.tasks import deliver_one

    assert deliver_one.autoretry_for == (deliver.DeliveryFailed,)
    assert (deliver_one.retry_backoff, deliver_one.retry_backoff_max, deliver_one.max_retries) == (60, 3600, 5)


def test_making_a_report_again_sends_it_again(week: Week, made_at: datetime,
                                              recipients: dict[str, ReportRecipient]) -> None:
    report = services.make_report(week.period, week.vision, now=made_at)
    [first] = deliver.queue_deliveries(report, made_at)
    deliver.send_delivery(first, final_attempt=True)
    again = services.make_report(week.period, week.vision, now=made_at)
    assert deliver.queue_deliveries(again, made_at) == [first]  # the same row, pending again
    assert ReportDelivery.objects.get(pk=first).status == DeliveryStatus.PENDING
    assert Report.objects.count() == 1
