"""Celery tasks of the project shell."""

import socket

from celery import Task, shared_task
from django.utils import timezone

from . import services
from .reports import tasks as report_tasks  # noqa: F401  (registers reports.* with the worker)


@shared_task(name=services.HEARTBEAT_TASK, bind=True)
def heartbeat(self: Task) -> dict[str, object]:
    """Prove that beat schedules and a worker runs: records and logs one beat."""
    worker = self.request.hostname or socket.gethostname()
    beat = services.record_heartbeat(worker, timezone.now())
    return {"worker": beat.worker, "beats": beat.beats}
