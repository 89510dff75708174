"""Power caps, an operator's action: validate, record as pending, apply on the node through NVML, read back.

``request_power_cap(gpus or node, watts, actor)`` checks ``watts`` against each GPU's constraints
(``power_min_w``..``power_max_w`` as NVML reported them at discovery), writes one pending ``PowerCap`` per GPU in
one transaction and, after commit, hands them to the node: a ``telemetry.apply_power_caps`` task on the node's
queue ``node.<hostname>``, whose agent sets the limit with NVML and stores what NVML then enforces. GPUs whose
latest sample is simulated (the demo cluster) have no agent: their caps are applied at once, in this process, by
setting the simulated limit. Either way ``Gpu.power_limit_w`` becomes the enforced limit and a POWER_CAP event is
recorded.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from celery import Celery, current_app
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone
from kombu.exceptions import OperationalError

from scheduler.backends.local.executor import RETRY_POLICY, node_queue
from scheduler.jobs.verbs import Actor
from scheduler.models import Gpu, GpuHealth, Node

from . import collector
from .models import GpuSample, PowerCap, PowerCapStatus
from .probe import CallTimedOut, NvmlUnavailable, Probe
from .readings import EventKind, GpuEventReading
from .storage import record_events

logger = logging.getLogger(__name__)

APPLY_TASK = "telemetry.apply_power_caps"
CAP_POWER_PERMISSION = "telemetry.cap_power"  # PowerCap.Meta.permissions: needed in admin and the API alike
NOT_SUPPORTED = "power limits are not supported/permitted on this GPU"
NOT_PERMITTED = "not permitted: the node agent needs root or nvidia-smi -pm persistence"
SIMULATED = "simulated"
PROBE_WAIT_SECONDS = 60  # for a sample under way to finish before a cap is applied

Outcome = tuple[str, float | None, str]  # status, enforced watts, message


# --- asking -----------------------------------------------------------------------------


def request_power_cap(
    target: Node | Sequence[Gpu], watts: int, actor: Actor = None, app: Celery | None = None
) -> list[PowerCap]:
    """Cap each GPU of ``target`` (a node: its physical GPUs that are not lost) at ``watts``.

    ``ValidationError`` on ``watts`` naming every GPU that cannot take it, and nothing written; otherwise the pending
    caps, sent to the nodes once committed (already applied for simulated GPUs).
    """
    gpus = node_gpus([target]) if isinstance(target, Node) else list(target)
    caps = create_power_caps(gpus, watts, actor)
    transaction.on_commit(lambda: dispatch(caps, app or current_app))
    return caps


def node_gpus(nodes: Sequence[Node]) -> list[Gpu]:
    """The GPUs a node-wide cap applies to: physical (MIG instances are capped through their GPU), not lost."""
    gpus = Gpu.objects.filter(node__in=nodes, mig_parent_uuid="").exclude(health=GpuHealth.LOST)
    return list(gpus.select_related("node").order_by("node__hostname", "index"))


def create_power_caps(gpus: Sequence[Gpu], watts: int, actor: Actor = None) -> list[PowerCap]:
    """Validate and write pending caps in one transaction (no dispatch: see ``request_power_cap``)."""
    problems = cap_problems(gpus, watts)
    if problems:
        raise ValidationError({"watts": problems})
    user = actor if actor is not None and actor.is_authenticated else None
    now = timezone.now()
    with transaction.atomic():
        return PowerCap.objects.bulk_create(
            [PowerCap(gpu=gpu, requested_w=watts, requested_by=user, requested_at=now) for gpu in gpus]
        )


def cap_problems(gpus: Sequence[Gpu], watts: int) -> list[str]:
    """Why ``watts`` cannot be applied, one message per GPU that refuses it; empty if all accept it."""
    if isinstance(watts, bool) or not isinstance(watts, int) or watts <= 0:
        return [f"The power limit must be a whole number of watts above 0, not {watts!r}."]
    if not gpus:
        return ["No GPU to cap: a node's lost GPUs and MIG instances are left out."]
    return [problem for gpu in gpus if (problem := _problem(gpu, watts))]


def _problem(gpu: Gpu, watts: int) -> str:
    if gpu.health == GpuHealth.LOST:
        return f"{gpu}: the GPU is lost."
    if gpu.mig_parent_uuid:
        return f"{gpu}: {NOT_SUPPORTED} (a MIG instance: cap its GPU {gpu.mig_parent_uuid})."
    if gpu.power_min_w is None or gpu.power_max_w is None:
        return f"{gpu}: {NOT_SUPPORTED}."
    if not gpu.power_min_w <= watts <= gpu.power_max_w:
        return f"{gpu} ({gpu.model}) accepts {gpu.power_min_w}–{gpu.power_max_w} W; {watts} W is outside that range."
    return ""


def dispatch(caps: Sequence[PowerCap], app: Celery) -> None:
    """Apply simulated GPUs' caps here; send the others to their node's agent (refused if it cannot be reached)."""
    simulated = _simulated_gpu_ids([cap.gpu_id for cap in caps])
    by_node: dict[str, list[int]] = defaultdict(list)
    for cap in caps:
        by_node["" if cap.gpu_id in simulated else cap.gpu.node.hostname].append(cap.pk)
    if "" in by_node:
        apply_power_caps(by_node.pop(""), probe=None)
    for host, ids in sorted(by_node.items()):
        try:
            app.send_task(APPLY_TASK, args=[ids, host], queue=node_queue(host), retry=True, retry_policy=RETRY_POLICY)
        except OperationalError as error:
            logger.warning("cannot send %s to %s: %s", APPLY_TASK, node_queue(host), error)
            _finish(ids, (PowerCapStatus.REFUSED, None, f"the node agent could not be reached: {error}"))


def _simulated_gpu_ids(gpu_ids: Sequence[int]) -> set[int]:
    """GPUs whose latest sample is simulated."""
    latest = GpuSample.objects.filter(gpu=OuterRef("pk")).order_by("-at", "-id").values("simulated")[:1]
    rows = Gpu.objects.filter(pk__in=gpu_ids).annotate(simulated=Subquery(latest)).values_list("pk", "simulated")
    return {pk for pk, simulated in rows if simulated}


# --- applying (on the node) -------------------------------------------------------------


def apply_on_node(cap_ids: Sequence[int], hostname: str) -> int:
    """The node agent's side: apply this node's pending caps through its NVML probe; returns how many finished.

    Without NVML here the caps are simulated. A message for another node (misrouted) changes nothing.
    """
    if hostname != settings.NODE_HOSTNAME:
        logger.error("power caps for %s reached the agent of %s: ignored", hostname, settings.NODE_HOSTNAME)
        return 0
    if not collector.probe_lock.acquire(timeout=PROBE_WAIT_SECONDS):
        raise TimeoutError("the NVML probe stayed busy: power caps left pending")
    try:
        probe = collector.node_probe()
        try:
            probe.start()
        except NvmlUnavailable:
            return apply_power_caps(cap_ids, None, hostname)
        except Exception as error:  # a broken driver: refuse, rather than leave the caps pending for ever
            pending = _pending(cap_ids, hostname).values_list("pk", flat=True)
            return _finish(list(pending), (PowerCapStatus.REFUSED, None, f"NVML failed to start: {error}"))
        return apply_power_caps(cap_ids, probe, hostname)
    finally:
        collector.probe_lock.release()


def apply_power_caps(cap_ids: Sequence[int], probe: Probe | None, hostname: str | None = None) -> int:
    """Apply the pending caps among ``cap_ids`` (of ``hostname``'s GPUs, when given) with ``probe``, or simulate
    them when it is None; a cap already finished (a redelivered task) is left alone. Returns how many finished."""
    return sum(_finish([cap.pk], _apply(cap, probe), cap) for cap in _pending(cap_ids, hostname))


def _pending(cap_ids: Sequence[int], hostname: str | None) -> QuerySet[PowerCap]:
    caps = PowerCap.objects.filter(pk__in=cap_ids, status=PowerCapStatus.PENDING)
    caps = caps.select_related("gpu", "requested_by")
    return caps.filter(gpu__node__hostname=hostname) if hostname is not None else caps


def _apply(cap: PowerCap, probe: Probe | None) -> Outcome:
    """Set the limit and read back what NVML enforces; NVML's refusal, in words, otherwise."""
    if probe is None:
        return PowerCapStatus.APPLIED, float(cap.requested_w), SIMULATED
    nvml = probe.nvml
    try:
        enforced = probe.set_power_limit(cap.gpu.uuid, cap.requested_w)
    except KeyError:
        return PowerCapStatus.REFUSED, None, "NVML does not list this GPU on its node"
    except CallTimedOut as error:
        return PowerCapStatus.REFUSED, None, f"NVML did not answer: {error}"
    except nvml.NVMLError_NoPermission:
        return PowerCapStatus.REFUSED, None, NOT_PERMITTED
    except nvml.NVMLError_NotSupported:
        return PowerCapStatus.REFUSED, None, NOT_SUPPORTED
    except nvml.NVMLError as error:
        return PowerCapStatus.REFUSED, None, f"NVML refused {cap.requested_w} W: {error}"
    if abs(enforced - cap.requested_w) < 0.5:
        return PowerCapStatus.APPLIED, enforced, f"NVML enforces {enforced:g} W"
    return PowerCapStatus.APPLIED, enforced, f"NVML enforces {enforced:g} W: another, lower limit applies"


def _finish(cap_ids: Sequence[int], outcome: Outcome, cap: PowerCap | None = None) -> int:
    """Store the outcome on caps still pending, update the GPU's limit, record a POWER_CAP event."""
    status, enforced, message = outcome
    now = timezone.now()
    finished = PowerCap.objects.filter(pk__in=cap_ids, status=PowerCapStatus.PENDING).update(
        status=status, enforced_w=enforced, message=message, applied_at=now
    )
    caps = [cap] if cap is not None else list(PowerCap.objects.filter(pk__in=cap_ids).select_related(
        "gpu", "requested_by"))
    if finished and enforced is not None:
        Gpu.objects.filter(pk__in=[c.gpu_id for c in caps]).update(power_limit_w=max(round(enforced), 1))
    if finished:
        record_events([_event(c, status, message, now) for c in caps])
    return finished


def _event(cap: PowerCap, status: str, message: str, at: datetime) -> GpuEventReading:
    who = f" by {cap.requested_by}" if cap.requested_by_id else ""
    return GpuEventReading(cap.gpu.uuid, at, EventKind.POWER_CAP,
                           f"power cap {cap.requested_w} W{who}: {status} ({message})")
