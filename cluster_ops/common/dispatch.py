"""Sending work to the workers once the row that describes it is committed, whether or not the broker is there.

Work is kept in the database first (a ``WhatIfRun``, a ``Report``), then sent. A broker that is away (the embedded
Redis restarting, a network cut) must not turn a kept request into a 500: the client would retry and store the work
twice. So a failed send is logged, the row is marked unsent, and the row's recovery (``recover_runs``,
``recover_reports``, on beat every ``RECOVER_SECONDS``) sends it when the broker is back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

# What a publish raises when the broker cannot be reached, after kombu's own short publish retries.
BROKER_AWAY = (OperationalError, RedisError, ConnectionError, TimeoutError)


def send_after_commit(send: Callable[[], object], what: str, unsent: Callable[[], object],
                      then: str = "it is sent again when the broker is back") -> None:
    """Call ``send`` once the current transaction commits (at once outside one); if the broker is away, call
    ``unsent`` (mark the row for the recovery to send) instead of raising, and log what happens ``then``."""

    def guarded() -> None:
        try:
            send()
        except BROKER_AWAY as error:
            logger.warning("%s not sent, the broker is away (%s): %s", what, error, then)
            unsent()

    transaction.on_commit(guarded)
