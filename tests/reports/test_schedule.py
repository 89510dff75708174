"""Beat's daily and weekly entries (times editable in admin) and the scheduled run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core import mail
from django_celery_beat.models import PeriodicTask

from cluster_ops.reports import periods
from cluster_ops.reports.models import Report, ReportRecipient
from cluster_ops.reports.tasks import make_scheduled
from cluster_ops.services import sync_periodic_tasks

from .week import Week


def test_sync_creates_daily_and_weekly_entries_and_keeps_admin_edits(db: None) -> None:
    sync_periodic_tasks()
    daily, weekly = PeriodicTask.objects.get(name="reports-daily"), PeriodicTask.objects.get(name="reports-weekly")
    assert (daily.task, daily.args, weekly.args) == ("reports.make_scheduled", '["daily"]', '["weekly"]')
    assert (daily.crontab.hour, daily.crontab.minute, daily.crontab.day_of_week) == ("6", "0", "*")
    assert (weekly.crontab.hour, weekly.crontab.minute, weekly.crontab.day_of_week) == ("6", "30", "1")
    crontab = weekly.crontab
    crontab.hour, crontab.pk = "8", None  # an operator moves the weekly report to 08:30 …
    crontab.save()
    PeriodicTask.objects.filter(pk=weekly.pk).update(crontab=crontab, enabled=False)  # … or switches it off
    sync_periodic_tasks()
    weekly.refresh_from_db()
    assert (weekly.crontab.hour, weekly.enabled) == ("8", False)
    assert PeriodicTask.objects.filter(name__startswith="reports-").count() == 2


@pytest.mark.usefixtures("eager_celery")
def test_the_weekly_run_makes_every_report_and_mails_the_recipients(
        week: Week, recipients: dict[str, ReportRecipient],
        django_capture_on_commit_callbacks: Callable[..., Any]) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        assert make_scheduled.delay(periods.WEEKLY).get() == 4  # the cluster and three tenants
    made = Report.objects.filter(kind="weekly", period_start=week.period.start)
    assert sorted(r.scope for r in made) == ["language", "research", "vision", "whole cluster"]
    assert all(r.status == "ready" for r in made)
    assert sorted(m.to[0] for m in mail.outbox) == ["language-lead@example.com", "ops@example.com",
                                                    "vision-lead@example.com"]
    with django_capture_on_commit_callbacks(execute=True):
        make_scheduled.delay(periods.WEEKLY)  # beat ran twice: still one report per scope
    assert made.count() == 4


def test_last_complete_periods(settings: Any) -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 11, 25, 6, 0, tzinfo=UTC)  # a Wednesday
    assert periods.last_complete("daily", now).label == "2026-11-24"
    week = periods.last_complete("weekly", now)
    assert (week.label, week.hours, week.previous.label) == ("2026-11-16 – 2026-11-22", 168, "2026-11-09 – 2026-11-15")
    assert periods.parse("2026-11-01..2026-11-03", now).hours == 72
    with pytest.raises(ValueError, match="in the future"):
        periods.parse("2026-11-20..2026-11-26", now)
