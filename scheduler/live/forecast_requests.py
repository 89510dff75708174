"""A forecast when the queue changes: a submission, a cancel, a finish, a start, a settings change.

``request_forecast(reason)`` sends ``scheduler.forecast_soon`` to the reports queue ``DEBOUNCE_SECONDS`` from now
(after the change commits), so a waiting job has an estimate within seconds rather than at the next beat. Debounced:
each process sends at most one request per ``DEBOUNCE_SECONDS`` (its local cache), and the task reads the queue
when it runs, after the window, so a burst of submissions makes one forecast; a forecast whose digest did not
change since the last is a no-op (``forecasts.refresh``). When forecasts assume arrivals, the quick point forecast
is followed at once by one with arrival samples (``follow_with_arrivals``): the estimate comes in seconds and says
what it assumed, and the arrivals' one replaces it seconds later. A request that finds another forecast being made waits
for it and tries again (``ForecastBusy``), so a change made while a forecast ran is never dropped; one the broker
refused is left to the beat (every round interval), which forecasts any change it finds.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.core.cache import cache

from cluster_ops.common.dispatch import BROKER_AWAY, send_after_commit

logger = logging.getLogger(__name__)

FORECAST_TASK = "scheduler.forecast"  # the forecast with arrival samples (``forecasts.forecast``)
FORECAST_SOON_TASK = "scheduler.forecast_soon"
DEBOUNCE_SECONDS = 2
REQUESTED_KEY = "cluster-ops:forecast-requested"


def follow_with_arrivals() -> None:
    """After a quick point forecast, the forecast with arrival samples (``scheduler.forecast``), at once."""
    try:
        current_app.send_task(FORECAST_TASK, ignore_result=True)
    except BROKER_AWAY as error:
        logger.warning("the forecast with arrivals is left to the beat: %s", error)


def request_forecast(reason: str) -> None:
    """Ask for a forecast ``DEBOUNCE_SECONDS`` after the current transaction commits (module docstring)."""
    if not cache.add(REQUESTED_KEY, reason, timeout=DEBOUNCE_SECONDS):
        return  # one already on its way from this process: it reads the queue after this change
    send_after_commit(lambda: current_app.send_task(FORECAST_SOON_TASK, countdown=DEBOUNCE_SECONDS,
                                                    ignore_result=True),
                      f"forecast after {reason}", unsent=lambda: cache.delete(REQUESTED_KEY),
                      then="the beat's next forecast covers the change")
