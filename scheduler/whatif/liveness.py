"""A running what-if shows it is alive: its heartbeat (cluster_ops/liveness.py), and its progress as jobs finish.

The heartbeat tells a dead worker's run from a live one's (``runs._claim``, ``runs.recover_runs``); every write is
of the attempt that holds the run, so an attempt taken over cannot write over the next one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.utils import timezone

from cluster_ops.common.liveness import Heartbeat
from scheduler.models import WhatIfRun, WhatIfStatus

PROGRESS_STEP = 0.05  # write progress when it moved this much ...
PROGRESS_INTERVAL_S = 1.0  # ... or when it moved at all and this long has passed since the last write


def run_heartbeat(run_id: int, attempt: int) -> Heartbeat:
    """The heartbeat of ``attempt`` at run ``run_id`` (cluster_ops/liveness.py)."""
    return Heartbeat(lambda: WhatIfRun.objects.filter(pk=run_id, status=WhatIfStatus.RUNNING, attempts=attempt)
                     .update(heartbeat_at=timezone.now()), f"what-if run {run_id}")


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
