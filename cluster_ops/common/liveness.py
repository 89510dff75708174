"""Long work shows it is alive: a heartbeat written from a thread of its own while the work runs.

What-ifs and reports are claimed by a conditional UPDATE and carry ``heartbeat_at``. The heartbeat moves every
``WORK_HEARTBEAT_SECONDS`` whatever the work is doing (a simulation writes progress only when a job finishes, which
can take minutes), so a row whose heartbeat stopped for ``WORK_LEASE_SECONDS`` lost its worker (killed, out of
memory, killed at its hard time limit) and is run again by its recovery — never left "running" for half an hour.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q

logger = logging.getLogger(__name__)


class Heartbeat:
    """``with Heartbeat(beat, "what-if 7"):`` calls ``beat()`` (an UPDATE of the row's ``heartbeat_at``) every
    ``WORK_HEARTBEAT_SECONDS`` from a daemon thread until the block ends."""

    def __init__(self, beat: Callable[[], object], what: str) -> None:
        self.beat, self.what = beat, what
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"{what} heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()

    def _run(self) -> None:
        try:
            while not self.stopped.wait(settings.WORK_HEARTBEAT_SECONDS):
                try:
                    self.beat()
                except DatabaseError:  # a busy database: the next beat tries again, well inside the lease
                    logger.warning("%s: heartbeat not written", self.what, exc_info=True)
        finally:
            connection.close()  # this thread's own connection


def stopped_beating(now: datetime, running: str) -> Q:
    """Rows in status ``running`` whose heartbeat stopped for a lease: their worker is gone."""
    return Q(status=running, heartbeat_at__lt=now - timedelta(seconds=settings.WORK_LEASE_SECONDS))
