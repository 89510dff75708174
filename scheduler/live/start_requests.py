"""A submission, or a cancel that frees GPUs, asks for a start between rounds: a job submitted while GPUs sit idle, or
waiting when an operator cancels a running one, starts within a second or so, not at the next round
(``live.round.start_between_rounds``, ``core/admission.py``).

``request_start(reason)`` sends ``scheduler.start_between_rounds`` to the rounds queue ``DEBOUNCE_SECONDS`` after the
submission commits. Debounced like the forecast's request (``forecast_requests``): each process sends at most one per
window, and the task reads the queue when it runs, so a burst of submissions makes one. Nothing depends on it: a
request the broker refused, or one that finds a round running, leaves the job to the next round.
"""

from __future__ import annotations

from celery import current_app
from django.core.cache import cache

from cluster_ops.common.dispatch import send_after_commit

START_TASK = "scheduler.start_between_rounds"
DEBOUNCE_SECONDS = 1
REQUESTED_KEY = "cluster-ops:start-requested"


def request_start(reason: str) -> None:
    """Ask for a start between rounds ``DEBOUNCE_SECONDS`` after the current transaction commits."""
    if not cache.add(REQUESTED_KEY, reason, timeout=DEBOUNCE_SECONDS):
        return  # one already on its way from this process: it reads the queue after this submission
    send_after_commit(lambda: current_app.send_task(START_TASK, countdown=DEBOUNCE_SECONDS, ignore_result=True),
                      f"start after {reason}", unsent=lambda: cache.delete(REQUESTED_KEY),
                      then="the next round starts the job")
