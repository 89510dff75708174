"""A real Celery worker on a real Redis runs the heartbeat; beat schedules it from the database."""

from __future__ import annotations

import threading

import pytest
from celery import Celery
from celery.beat import Service
from celery.contrib.testing.worker import start_worker
from django.db import connections
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from cluster_ops.models import Heartbeat
from cluster_ops.services import HEARTBEAT_TASK

from .conftest import wait_until
from .processes import ALL_QUEUES

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_worker_runs_the_heartbeat_sent_through_redis(redis_celery_app: Celery) -> None:
    with start_worker(redis_celery_app, pool="solo", perform_ping_check=False, queues=ALL_QUEUES.split(",")):
        first = redis_celery_app.send_task(HEARTBEAT_TASK).get(timeout=30)
        second = redis_celery_app.send_task(HEARTBEAT_TASK).get(timeout=30)
    assert (first["beats"], second["beats"]) == (1, 2)
    beat = Heartbeat.objects.get()
    assert (beat.worker, beat.beats) == (first["worker"], 2)


def test_beat_schedules_the_heartbeat_from_the_database(redis_celery_app: Celery) -> None:
    every_second = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(name="heartbeat", task=HEARTBEAT_TASK, interval=every_second)
    beat = Service(redis_celery_app, max_interval=0.5,
                   scheduler_cls="django_celery_beat.schedulers:DatabaseScheduler")
    beat_thread = threading.Thread(target=run_closing_connections, args=(beat.start,), daemon=True)
    with start_worker(redis_celery_app, pool="solo", perform_ping_check=False, queues=ALL_QUEUES.split(",")):
        beat_thread.start()
        try:
            assert wait_until(lambda: Heartbeat.objects.filter(beats__gte=2).exists(), seconds=30)
        finally:
            beat.stop()
            beat_thread.join(timeout=10)


def run_closing_connections(target) -> None:  # type: ignore[no-untyped-def]
    """Run ``target`` in this thread, then close the database connections it opened here."""
    try:
        target()
    finally:
        connections.close_all()
