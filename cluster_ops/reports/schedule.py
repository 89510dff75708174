"""Beat's entries for the daily and weekly reports: crontab times an operator edits in admin (Periodic tasks).

``sync_report_schedule`` creates the entries with their default times when they are missing and otherwise only
makes sure they run the right task: a time changed in admin, or an entry disabled there, stays as it is.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from .periods import DAILY, WEEKLY
from .tasks import SCHEDULED_TASK

# name: (kind, default crontab) — daily at 06:00, weekly on Monday at 06:30, in TIME_ZONE: after midnight's
# last hour has been rolled up, before people read their mail.
ENTRIES = {
    "reports-daily": (DAILY, {"minute": "0", "hour": "6", "day_of_week": "*"}),
    "reports-weekly": (WEEKLY, {"minute": "30", "hour": "6", "day_of_week": "1"}),
}


def sync_report_schedule() -> None:
    with transaction.atomic():
        for name, (kind, when) in ENTRIES.items():
            crontab, _ = CrontabSchedule.objects.get_or_create(
                **when, day_of_month="*", month_of_year="*", timezone=settings.TIME_ZONE)
            entry, created = PeriodicTask.objects.get_or_create(
                name=name, defaults={"task": SCHEDULED_TASK, "crontab": crontab, "args": json.dumps([kind])})
            if not created and (entry.task, entry.args) != (SCHEDULED_TASK, json.dumps([kind])):
                entry.task, entry.args = SCHEDULED_TASK, json.dumps([kind])
                entry.save(update_fields=["task", "args"])
