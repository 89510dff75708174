"""Slurm's nodes → the console's ``Node`` and ``Gpu`` rows, every round.

A Slurm GPU is known by node and GRES index only (Slurm has no UUIDs), so its row's UUID is
``slurm-<node>-<index>`` and its model the GRES type (``a100``), which ``gpu_type_key`` reads as the type.
Memory and power come from the type's datasheet where known (the telemetry source overwrites nothing here).
A node Slurm reports down, drained or draining has its GPUs marked lost — the round then moves or preempts
their jobs as for any lost GPU — and back to ok when Slurm returns it to service; GPUs an operator marked by
hand on a usable node are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from scheduler import inventory
from scheduler.backends.slurm.client import SlurmNode
from scheduler.core.gpu_types import gpu_type_key
from scheduler.models import Gpu, GpuHealth, Node

# Datasheet memory (MiB) and board power limit (W) by GPU type; other types get the fallback until telemetry.
DATASHEET = {"a100": (81920, 400), "h100": (81920, 700), "h200": (143771, 700), "v100": (32768, 300),
             "p100": (16384, 300), "t4": (15360, 70), "k80": (12288, 150), "l40s": (46068, 350)}
FALLBACK = (16384, 300)
MAX_GPUS_PER_NODE = 256  # more on one node is not a machine: the node is left out, and the round says so
MAX_NODE_NAME = 255  # Node.hostname's length


@dataclass(frozen=True)
class InventoryChange:
    lost: tuple[str, ...]  # nodes whose GPUs became lost this round, with Slurm's reason
    back: tuple[str, ...]  # nodes whose GPUs came back
    skipped: tuple[str, ...] = ()  # nodes Slurm reports with more GPUs or a longer name than the console keeps


def gpu_uuid(node: str, index: int) -> str:
    return f"slurm-{node}-{index}"


def sync_inventory(nodes: Sequence[SlurmNode]) -> InventoryChange:
    """Make the rows say what Slurm says: one transaction, idempotent."""
    lost: list[str] = []
    back: list[str] = []
    skipped: list[str] = []
    with transaction.atomic():
        for slurm_node in nodes:
            if slurm_node.gpus <= 0:
                continue  # a node without GPUs schedules nothing of ours
            if slurm_node.gpus > MAX_GPUS_PER_NODE or len(slurm_node.name) > MAX_NODE_NAME:
                skipped.append(slurm_node.name[:MAX_NODE_NAME])
                continue
            node = _upsert(slurm_node)
            health = GpuHealth.OK if slurm_node.usable else GpuHealth.LOST
            gpus = list(node.gpus.all())
            changing = [gpu for gpu in gpus if gpu.health != health and not (
                health == GpuHealth.OK and gpu.health == GpuHealth.DEGRADED)]
            if changing and inventory.set_gpu_health(changing, health):
                (back if health == GpuHealth.OK else lost).append(
                    f"{slurm_node.name} ({slurm_node.state}{', ' + slurm_node.reason if slurm_node.reason else ''})")
    return InventoryChange(tuple(lost), tuple(back), tuple(skipped))


def _upsert(slurm_node: SlurmNode) -> Node:
    model = slurm_node.gpu_type or "gpu"
    memory_mib, power_w = DATASHEET.get(gpu_type_key(model), FALLBACK)
    node, _ = Node.objects.get_or_create(hostname=slurm_node.name)
    have = {gpu.index: gpu for gpu in node.gpus.all()}
    if len(have) == slurm_node.gpus and all(gpu.model == model for gpu in have.values()):
        return node  # the common case: nothing changed
    inventory.register_node(slurm_node.name, [
        inventory.GpuSpec(index=index, uuid=gpu_uuid(slurm_node.name, index), model=model, memory_mib=memory_mib,
                         power_limit_w=power_w)
        for index in range(slurm_node.gpus)
    ])
    # GPUs Slurm no longer counts on this node: lost, never deleted (allocations keep their history).
    gone = [gpu for index, gpu in have.items() if index >= slurm_node.gpus]
    inventory.set_gpu_health(gone, GpuHealth.LOST)
    return node


def slurm_gpu_types() -> set[str]:
    """The GPU types of the console's Slurm inventory (GRES type names)."""
    return set(Gpu.objects.filter(uuid__startswith="slurm-").values_list("model", flat=True))
