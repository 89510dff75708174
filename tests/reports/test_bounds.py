"""A tenant asked for 0001-01-01..2026-11-30; the worker grew to 4.5 GB and the row stayed
"running", so asking again queued nothing. Periods are bounded now, and lost or overlong reports are repaired."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from cluster_ops.reports import periods, services, tasks
from cluster_ops.reports.models import Report, ReportStatus

from .week import Week


def test_a_period_longer_than_a_year_is_refused() -> None:
    now = timezone.now()
    with pytest.raises(ValueError, match="at most 366 days"):
        periods.parse("0001-01-01..2026-11-30", now)
    assert periods.parse("2025-12-01..2026-11-30", now).hours == 365 * 24


def test_a_period_before_the_clusters_first_data_is_refused(week: Week) -> None:
    first = services.first_data_day()
    assert first is not None
    with pytest.raises(ValueError, match="before the cluster's first data"):
        periods.custom(first - timedelta(days=1), first, timezone.now(), first)


def test_the_reports_page_refuses_the_unbounded_period_and_queues_nothing(week: Week) -> None:
    alice = Client()
    alice.force_login(week.users["alice"])
    data = {"period": "custom", "first_day": "0001-01-01", "last_day": f"{date.today() - timedelta(days=1)}",
            "tenant": week.vision.pk}
    response = alice.post("/reports/", data)
    assert response.status_code == 400 and "at most 366 days" in response.content.decode()
    assert not Report.objects.exists()


@pytest.mark.django_db
def test_a_report_whose_worker_was_lost_is_made_again_then_failed_and_a_lost_message_resent(settings,
                                                                                            monkeypatch) -> None:
    """A report left running by a killed worker stayed so until its hard limit (10.5 min), then failed: now its
    heartbeat tells, and it is made again while it has attempts left."""
    now = timezone.now()
    period = periods.days(periods.CUSTOM, date(2026, 11, 1), date(2026, 11, 2))
    lost = services.report_row(period, None, User.objects.create_user("u"))
    queued = services.report_row(periods.days(periods.CUSTOM, date(2026, 11, 3), date(2026, 11, 3)), None)
    alive = services.report_row(periods.days(periods.CUSTOM, date(2026, 11, 4), date(2026, 11, 4)), None)
    stopped = now - timedelta(seconds=settings.WORK_LEASE_SECONDS + 1)
    Report.objects.filter(pk=lost.pk).update(status=ReportStatus.RUNNING, started_at=stopped, heartbeat_at=stopped,
                                             attempts=1, sent_at=stopped)
    Report.objects.filter(pk=alive.pk).update(status=ReportStatus.RUNNING, started_at=stopped, heartbeat_at=now,
                                              attempts=1, sent_at=stopped)
    Report.objects.filter(pk=queued.pk).update(sent_at=now - timedelta(seconds=settings.RESEND_AFTER_SECONDS + 1))
    sent: list[int] = []
    monkeypatch.setattr("cluster_ops.reports.tasks.make.delay", lambda pk, *_: sent.append(pk))
    assert tasks.recover_reports(now) == {"failed": 0, "requeued": 1, "resent": 2}
    assert sorted(sent) == sorted([lost.pk, queued.pk]) and Report.objects.get(pk=alive.pk).status == "running"
    assert tasks.recover_reports(now) == {"failed": 0, "requeued": 0, "resent": 0}  # sent again just now
    Report.objects.filter(pk=lost.pk).update(status=ReportStatus.RUNNING, heartbeat_at=stopped,
                                             attempts=settings.MAX_ATTEMPTS)
    assert tasks.recover_reports(now)["failed"] == 1
    lost.refresh_from_db()
    assert lost.status == ReportStatus.FAILED and "worker was lost" in lost.error
