"""Collection on a node agent: discover the node's GPUs, sample them, store samples and events, track health.

``collect(hostname)`` runs in the node agent (the Celery worker consuming ``node.<hostname>``) every
``TELEMETRY_SECONDS``: beat's ``telemetry.collect_nodes`` sends one ``telemetry.collect`` to the queue of every node
whose agent has collected within ``AGENT_SILENCE_SECONDS``, and an agent collects once when it starts (the
``worker_ready`` hook in ``telemetry/tasks.py``), which registers a new node and brings it into that fan-out.

Each sample: the first (and after NVML saw a different set of devices) registers the node and its GPUs with their
power constraints and MIG parents (``inventory.register_node``); then the readings and events are stored through
``telemetry.storage``. Health follows what NVML says:

* a GPU NVML reports lost, or that is in the inventory of this node but no longer found, is marked ``lost`` (the
  scheduler stops placing work on it) with a LOST event (critical);
* a GPU that this collector marked lost and that answers again is marked ``degraded``, not ``ok``, with a RECOVERED
  event: a GPU that fell off the bus is suspect until an operator checks it and marks it ok in admin. Degraded GPUs
  are schedulable. A GPU an operator marked lost by hand (no LOST event of ours after the last RECOVERED) stays lost.

Without NVML on the node (``NvmlUnavailable``) the node's registered GPUs get simulated samples instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import Celery
from django.conf import settings
from django.utils import timezone
from kombu.exceptions import OperationalError

from scheduler import inventory
from scheduler.backends.local.executor import RETRY_POLICY, node_queue
from scheduler.core.gpu_types import gpu_type_key
from scheduler.core.power import DATASHEET_TDP_W
from scheduler.models import Gpu, GpuHealth, Node

from .models import GpuEvent
from .probe import Device, NvmlUnavailable, Probe
from .readings import EventKind, GpuEventReading
from .simulated import collect_simulated
from .storage import ingest, record_events

logger = logging.getLogger(__name__)

COLLECT_TASK = "telemetry.collect"  # on a node's queue: one sample of that node
COLLECT_NODES_TASK = "telemetry.collect_nodes"  # beat: send COLLECT_TASK to every live node agent
# A node whose agent has not collected for this long is no longer sent collects (its queue would only fill up);
# the agent collects once when it starts again, and is back in the fan-out.
AGENT_SILENCE_SECONDS = 3600

# One probe per worker process, kept initialised between samples; the lock keeps NVML to one caller at a time
# (a threads pool runs tasks concurrently). ``_registered`` is what this process last registered.
probe_lock = threading.Lock()
_probe: Probe | None = None
_registered: tuple[Device, ...] | None = None


@dataclass(frozen=True)
class Collected:
    """What one sample stored, and the health changes it made."""

    samples: int
    events: int
    lost: tuple[str, ...] = ()
    recovered: tuple[str, ...] = ()
    simulated: bool = False


def node_probe() -> Probe:
    """This process's probe (created on first use)."""
    global _probe
    if _probe is None:
        _probe = Probe()
    return _probe


def reset() -> None:
    """Forget this process's probe and registration (tests; a worker never needs it)."""
    global _probe, _registered
    if _probe is not None:
        _probe.close()
    _probe, _registered = None, None


def collect(hostname: str) -> Collected | None:
    """One sample of this node's GPUs; None if another sample is still running in this process."""
    if not probe_lock.acquire(blocking=False):
        return None
    try:
        return _collect(hostname, node_probe())
    finally:
        probe_lock.release()


def _collect(hostname: str, probe: Probe) -> Collected:
    try:
        sample = probe.sample()
    except NvmlUnavailable as why:
        logger.debug("%s: %s; simulated samples instead", hostname, why)
        _seen(hostname)
        return Collected(collect_simulated(timezone.now(), hostname), 0, simulated=True)
    _register(hostname, probe.devices)
    _seen(hostname)
    lost = {**_missing(hostname, probe.devices), **sample.lost}
    health_events, newly_lost, recovered = update_health({r.uuid for r in sample.readings}, lost, sample.at)
    stored = ingest(sample.readings)
    events = record_events([*sample.events, *health_events])
    return Collected(stored, events, newly_lost, recovered)


def _seen(hostname: str) -> None:
    Node.objects.filter(hostname=hostname).update(last_seen_at=timezone.now())


# --- discovery --------------------------------------------------------------------------


def _register(hostname: str, devices: tuple[Device, ...]) -> None:
    """Register the node and its devices when they differ from what this process registered last."""
    global _registered
    if devices == _registered:
        return
    inventory.register_node(hostname, [gpu_spec(device) for device in devices])
    _registered = devices


def gpu_spec(device: Device) -> inventory.GpuSpec:
    """A discovered device as the inventory stores it.

    A GPU that reports no power limit gets its type's datasheet TDP, else 1 W, so that the row stays valid; its
    constraints stay empty, so power caps on it are refused.
    """
    limit = device.power_limit_w or device.power_default_w or DATASHEET_TDP_W.get(gpu_type_key(device.name), 1)
    return inventory.GpuSpec(
        index=device.index, uuid=device.uuid, model=device.name, memory_mib=max(device.memory_mib, 1),
        power_limit_w=max(round(limit), 1), power_min_w=_whole(device.power_min_w),
        power_max_w=_whole(device.power_max_w), power_default_w=_whole(device.power_default_w),
        mig_parent_uuid=device.mig_parent_uuid,
    )


def _whole(watts: float | None) -> int | None:
    return None if watts is None else round(watts)


def _missing(hostname: str, devices: Sequence[Device]) -> dict[str, str]:
    """GPUs the inventory has on this node that NVML no longer lists (they vanished while no one looked)."""
    found = {device.uuid for device in devices}
    registered = Gpu.objects.filter(node__hostname=hostname).values_list("uuid", flat=True)
    return {uuid: "not found by NVML on its node" for uuid in registered if uuid not in found}


# --- health -----------------------------------------------------------------------------


def update_health(
    answered: set[str], lost: Mapping[str, str], at: datetime
) -> tuple[list[GpuEventReading], tuple[str, ...], tuple[str, ...]]:
    """Mark newly lost GPUs lost and GPUs we marked lost that answer again degraded (see the module docstring).

    Returns the LOST / RECOVERED events to record and the UUIDs newly lost and recovered.
    """
    gpus = list(Gpu.objects.filter(uuid__in=set(lost) | answered).exclude(health=GpuHealth.OK, uuid__in=answered))
    newly_lost = [gpu for gpu in gpus if gpu.uuid in lost and gpu.health != GpuHealth.LOST]
    back = [gpu for gpu in gpus if gpu.uuid in answered and gpu.health == GpuHealth.LOST and _lost_by_us(gpu)]
    inventory.set_gpu_health(newly_lost, GpuHealth.LOST)
    inventory.set_gpu_health(back, GpuHealth.DEGRADED)
    events = [GpuEventReading(gpu.uuid, at, EventKind.LOST, f"GPU lost: {lost[gpu.uuid]}") for gpu in newly_lost]
    events += [GpuEventReading(gpu.uuid, at, EventKind.RECOVERED,
                               "GPU answers NVML again: marked degraded until an operator marks it ok")
               for gpu in back]
    return events, tuple(gpu.uuid for gpu in newly_lost), tuple(gpu.uuid for gpu in back)


def _lost_by_us(gpu: Gpu) -> bool:
    """Whether the collector marked it lost: its latest LOST/RECOVERED event is a LOST one."""
    last = GpuEvent.objects.filter(gpu=gpu, kind__in=[EventKind.LOST, EventKind.RECOVERED]).first()
    return last is not None and last.kind == EventKind.LOST


# --- the fan-out beat sends -------------------------------------------------------------


def send_collects(app: Celery, now: datetime) -> list[str]:
    """Send ``telemetry.collect`` to the queue of every node whose agent collected lately; returns their hostnames.

    Each message expires after ``TELEMETRY_SECONDS``: a busy or restarting agent skips stale samples instead of
    working through a backlog.
    """
    since = now - timedelta(seconds=AGENT_SILENCE_SECONDS)
    hosts = list(Node.objects.filter(last_seen_at__gte=since).order_by("hostname").values_list("hostname", flat=True))
    sent = []
    for host in hosts:
        try:
            app.send_task(COLLECT_TASK, args=[host], queue=node_queue(host), expires=settings.TELEMETRY_SECONDS,
                          retry=True, retry_policy=RETRY_POLICY)
        except OperationalError as error:
            logger.warning("cannot send %s to %s: %s", COLLECT_TASK, node_queue(host), error)
            continue
        sent.append(host)
    return sent
