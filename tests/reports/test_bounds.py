"""Issue 13, failure 4: a tenant asked for 0001-01-01..2026-11-30; the worker grew to 4.5 GB and the row stayed
"running", so asking again queued nothing. Periods are bounded now, and lost or overlong reports are repaired."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from cluster_ops.models import Report, ReportStatus
from cluster_ops.reports import periods, services

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
def test_a_report_left_running_by_a_lost_worker_is_failed_and_a_lost_message_resent(settings, monkeypatch) -> None:
    now = timezone.now()
    period = periods.days(periods.CUSTOM, date(2026, 11, 1), date(2026, 11, 2))
    lost = services.report_row(period, None, User.objects.create_user("u"))
    queued = services.report_row(periods.days(periods.CUSTOM, date(2026, 11, 3), date(2026, 11, 3)), None)
    late = now - timedelta(seconds=settings.REPORT_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS + 1)
    Report.objects.filter(pk=lost.pk).update(status=ReportStatus.RUNNING, started_at=late)
    Report.objects.filter(pk=queued.pk).update(sent_at=now - timedelta(seconds=settings.RESEND_AFTER_SECONDS + 1))
    sent: list[int] = []
    monkeypatch.setattr("cluster_ops.reports.tasks.make.delay", lambda pk, *_: sent.append(pk))
    assert services.recover_reports(now) == {"failed": 1, "resent": 1}
    lost.refresh_from_db()
    assert lost.status == ReportStatus.FAILED and "worker was lost" in lost.error
    assert sent == [queued.pk]
    assert services.recover_reports(now) == {"failed": 0, "resent": 0}  # sent again just now
