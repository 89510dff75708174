"""Celery tasks of telemetry: thin wrappers around ``telemetry.rollups``, ``storage``, ``collector``, ``simulated``
and ``power_caps``."""

import logging
from datetime import timedelta
from typing import Any

from celery import current_app, shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone
from kombu.exceptions import OperationalError

from scheduler.backends.local.executor import node_queue

from . import collector, power_caps, prometheus, rollups, simulated, storage

logger = logging.getLogger(__name__)

ROLL_UP_TASK = "telemetry.roll_up"
PRUNE_TASK = "telemetry.prune"
# A minute is rolled up this long after it ends: by then the batches read during it have been
# stored, so few samples arrive late (each late one costs a second pass over its minute).
ROLL_UP_SETTLE = timedelta(seconds=30)


@shared_task(name=ROLL_UP_TASK, ignore_result=True)
def roll_up() -> dict[str, int]:
    """Roll up the minutes, then the hours, completed ``ROLL_UP_SETTLE`` ago; returns the buckets recomputed."""
    until = timezone.now() - ROLL_UP_SETTLE
    return {"minutes": rollups.roll_up_minutes(until), "hours": rollups.roll_up_hours(until)}


@shared_task(name=PRUNE_TASK, ignore_result=True)
def prune() -> dict[str, int]:
    """Delete samples and rollups past their retention; returns the rows deleted per table."""
    return storage.prune(timezone.now())


# --- collection and power caps (telemetry/collector.py, simulated.py, power_caps.py) ----------------


@shared_task(name=collector.COLLECT_TASK, ignore_result=True)
def collect(hostname: str) -> int:
    """One sample of this node's GPUs (runs on the node agent consuming ``node.<hostname>``); returns samples stored."""
    if hostname != settings.NODE_HOSTNAME:  # a misrouted message must not register this node's GPUs under another
        logger.error("telemetry.collect for %s reached the agent of %s: ignored", hostname, settings.NODE_HOSTNAME)
        return 0
    collected = collector.collect(hostname)
    return collected.samples if collected else 0


@shared_task(name=collector.COLLECT_NODES_TASK, ignore_result=True)
def collect_nodes() -> list[str]:
    """Beat, every ``TELEMETRY_SECONDS``: ask every live node agent to collect; returns the nodes asked."""
    return collector.send_collects(current_app, timezone.now())


@shared_task(name=prometheus.COLLECT_PROMETHEUS_TASK, ignore_result=True,
             soft_time_limit=max(settings.TELEMETRY_SECONDS, 30), time_limit=max(settings.TELEMETRY_SECONDS, 30) + 10)
def collect_prometheus() -> int:
    """Beat, every ``TELEMETRY_SECONDS`` with ``TELEMETRY_SOURCE=prometheus``: one pass over the operator's
    Prometheus; returns the samples stored."""
    return prometheus.collect(timezone.now()).samples


@shared_task(name=simulated.COLLECT_SIMULATED_TASK, ignore_result=True)
def collect_simulated() -> int:
    """Beat, on the demo cluster: simulated samples of every GPU; returns how many were stored."""
    return simulated.collect_simulated(timezone.now())


@shared_task(name=power_caps.APPLY_TASK, acks_late=True, ignore_result=True)
def apply_power_caps(cap_ids: list[int], hostname: str) -> int:
    """On the node agent: apply pending power caps through NVML and store what it enforces."""
    return power_caps.apply_on_node(cap_ids, hostname)


@worker_ready.connect
def collect_when_an_agent_starts(sender: Any, **_: Any) -> None:
    """A worker consuming this node's queue collects once at start: it registers the node and its GPUs, and the
    node's fresh ``last_seen_at`` puts it into beat's fan-out (``collector.send_collects``)."""
    queue = node_queue(settings.NODE_HOSTNAME)
    if queue not in sender.app.amqp.queues.consume_from:
        return
    try:
        sender.app.send_task(collector.COLLECT_TASK, args=[settings.NODE_HOSTNAME], queue=queue)
    except OperationalError as error:
        logger.warning("cannot send %s to %s: %s", collector.COLLECT_TASK, queue, error)
