"""A running what-if shows it is alive: a heartbeat from a thread of its own, and its progress as jobs finish.

The heartbeat tells a dead worker's run from a live one's (``runs._claim``, ``runs.recover_runs``); every write is
of the attempt that holds the run, so an attempt taken over cannot write over the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from scheduler.models import WhatIfRun, WhatIfStatus

logger = logging.getLogger(__name__)

PROGRESS_STEP = 0.05  # write progress when it moved this much ...
PROGRESS_INTERVAL_S = 1.0  # ... or when it moved at all and this long has passed since the last write


class Heartbeat:
    """Moves the run's ``heartbeat_at`` every ``WHATIF_HEARTBEAT_SECONDS`` from a thread, while the simulation
    runs: progress alone is written only when jobs finish, which a live run can go minutes without."""

    def __init__(self, run_id: int, attempt: int) -> None:
        self.run_id, self.attempt = run_id, attempt
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name=f"whatif-{run_id}-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()

    def _beat(self) -> None:
        try:
            while not self.stopped.wait(settings.WHATIF_HEARTBEAT_SECONDS):
                try:
                    WhatIfRun.objects.filter(pk=self.run_id, status=WhatIfStatus.RUNNING,
                                             attempts=self.attempt).update(heartbeat_at=timezone.now())
                except DatabaseError:  # a busy database: the next beat tries again, well inside the lease
                    logger.warning("what-if run %s: heartbeat not written", self.run_id, exc_info=True)
        finally:
            connection.close()  # this thread's own connection


class ProgressWriter:
    """The simulator's ``on_progress``: writes the finished fraction, throttled (``PROGRESS_STEP``/``_INTERVAL_S``)."""

    def __init__(self, run_id: int, clock: Callable[[], float] = time.monotonic, attempt: int | None = None) -> None:
        self.run_id, self.clock, self.attempt = run_id, clock, attempt
        self.written, self.written_at = 0.0, clock()

    def __call__(self, finished: int, total: int) -> None:
        fraction = min(1.0, finished / total) if total else 1.0
        moved = fraction - self.written
        if moved <= 0 or (moved < PROGRESS_STEP and self.clock() - self.written_at < PROGRESS_INTERVAL_S):
            return
        mine = {"attempts": self.attempt} if self.attempt is not None else {}
        WhatIfRun.objects.filter(pk=self.run_id, status=WhatIfStatus.RUNNING, **mine).update(
            progress=fraction, heartbeat_at=timezone.now()
        )
        self.written, self.written_at = fraction, self.clock()
