"""The GPU inventory's verbs: nodes and their GPUs as the nodes (or the cluster manager) report them, their health,
cordons, and what the inventory could ever give a job. Each verb validates first and writes in one transaction, so
bad input raises ``ValidationError`` naming the field and leaves nothing half-written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from .core.gpu_types import gpu_type_key
from .models import Gpu, GpuHealth, Node


@dataclass(frozen=True)
class GpuSpec:
    """A GPU as a node reports it, before it is a row."""

    index: int
    uuid: str
    model: str
    memory_mib: int
    power_limit_w: int
    # What NVML says of power limits (None: not known or not supported), and a MIG instance's GPU.
    power_min_w: int | None = None
    power_max_w: int | None = None
    power_default_w: int | None = None
    mig_parent_uuid: str = ""


def inventory_capacity() -> Counter[str]:
    """Physical GPUs by type (``gpu_type_key``) in the inventory, whatever their health or MIG mode: what a job
    could ever get (a lost GPU may come back, a MIG-split one be made whole). MIG instances are not counted."""
    models = Gpu.objects.filter(mig_parent_uuid="").values_list("model", flat=True)
    return Counter(gpu_type_key(model) for model in models)


def check_fits_inventory(gpu_type: str, min_gpus: int, max_gpus: int | None = None) -> None:
    """``ValidationError`` naming the field when a job could never run here, or never grow as asked: a GPU type
    the inventory does not have, or more GPUs of one type than exist (a job never spans types). An empty inventory
    (nodes not registered yet) refuses nothing: the job waits for them, and says why."""
    capacity = inventory_capacity()
    if not capacity:
        return
    has = ", ".join(f"{kind}: {count}" for kind, count in sorted(capacity.items()))
    if gpu_type and gpu_type not in capacity:
        raise ValidationError({"gpu_type": f"No {gpu_type} GPUs in the inventory; it has {has}."})
    most = capacity[gpu_type] if gpu_type else max(capacity.values())
    where = f"{gpu_type} GPUs" if gpu_type else "GPUs of one type"
    if min_gpus > most:
        raise ValidationError({"min_gpus": f"Needs at least {min_gpus} {where}; the inventory has {has}."})
    # An upper bound may reach past one type (the policy caps it there), never past the cluster or the chosen type.
    size = capacity[gpu_type] if gpu_type else sum(capacity.values())
    if max_gpus is not None and max_gpus > size:
        what = f"{gpu_type} GPUs" if gpu_type else "GPUs"
        raise ValidationError({"max_gpus": f"Ensure this value is less than or equal to {size}: the cluster has "
                                           f"{size} {what} ({has})."})


def register_node(hostname: str, gpus: Sequence[GpuSpec]) -> Node:
    """Create or update a node and its GPUs as the node reports them (idempotent).

    GPUs are matched by UUID; a GPU that moved index keeps its history.
    """
    _check_gpu_specs(gpus)
    Node(hostname=hostname).full_clean(validate_unique=False)
    with transaction.atomic():  # a GPU that fails validation rolls back the whole node
        node, _ = Node.objects.get_or_create(hostname=hostname)
        for spec in gpus:
            _upsert_gpu(node, spec)
    return node


def set_gpu_health(gpus: Sequence[Gpu], health: str) -> int:
    """Mark GPUs ok, degraded or lost; returns how many changed. Lost GPUs get no new work."""
    if health not in GpuHealth.values:
        raise ValidationError({"health": f"Unknown GPU health {health!r}; expected one of {GpuHealth.values}."})
    changing = Gpu.objects.filter(pk__in=[gpu.pk for gpu in gpus]).exclude(health=health)
    return changing.update(health=health, health_changed_at=timezone.now())


def set_node_schedulable(nodes: Sequence[Node], schedulable: bool) -> int:
    """Cordon (False) or uncordon (True) nodes; running jobs stay where they are."""
    changing = Node.objects.filter(pk__in=[node.pk for node in nodes]).exclude(schedulable=schedulable)
    return changing.update(schedulable=schedulable)


def _check_gpu_specs(gpus: Sequence[GpuSpec]) -> None:
    for field in ("index", "uuid"):
        counts = Counter(getattr(spec, field) for spec in gpus)
        repeated = sorted(str(value) for value, count in counts.items() if count > 1)
        if repeated:
            raise ValidationError({field: f"GPU {field} given more than once: {', '.join(repeated)}."})


def _upsert_gpu(node: Node, spec: GpuSpec) -> Gpu:
    gpu = Gpu.objects.filter(uuid=spec.uuid).first() or Gpu(uuid=spec.uuid)
    gpu.node, gpu.index, gpu.model = node, spec.index, spec.model
    gpu.memory_mib, gpu.power_limit_w = spec.memory_mib, spec.power_limit_w
    gpu.power_min_w, gpu.power_max_w = spec.power_min_w, spec.power_max_w
    gpu.power_default_w, gpu.mig_parent_uuid = spec.power_default_w, spec.mig_parent_uuid
    gpu.full_clean()
    gpu.save()
    return gpu
