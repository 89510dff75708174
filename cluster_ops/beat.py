"""Beat's scheduler: django-celery-beat's, except that one entry beat cannot run never stops the others.

django-celery-beat skips an entry whose schedule raises ``ValueError``, but an interval past ``timedelta``'s range
raises ``OverflowError``, which killed beat at every start — and with it every round. Here such an entry is
refused and logged by name, and the others run. The round's own entry is written from the validated settings
(``scheduler.live.config.sync_round_schedule``), and admin's interval form is bounded (``IntervalScheduleAdmin``).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django_celery_beat.schedulers import DatabaseScheduler

logger = logging.getLogger(__name__)
MAX_INTERVAL_SECONDS = 366 * 86_400  # a periodic task runs at least yearly; crontab and clocked tasks for rarer


class GuardedDatabaseScheduler(DatabaseScheduler):
    def all_as_schedule(self) -> dict[str, Any]:
        schedule = {}
        for model in self.enabled_models():
            try:
                schedule[model.name] = self.Entry(model, app=self.app)
            except (ValueError, OverflowError) as exc:
                logger.error("beat entry %r refused, the others run: %s: %s", model.name, type(exc).__name__, exc)
        return schedule


def runnable_by_beat(every: Any, period: Any) -> bool:
    """Whether an interval of ``every`` ``period`` (django-celery-beat's fields) is one beat can run: a timedelta, as
    beat builds it, of at most ``MAX_INTERVAL_SECONDS``. Anything not yet a number is left to the form's own checks."""
    if not isinstance(every, int) or not isinstance(period, str):
        return True
    try:
        return timedelta(**{period: every}).total_seconds() <= MAX_INTERVAL_SECONDS
    except (OverflowError, TypeError):
        return False
