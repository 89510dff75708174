"""A cluster manager's nodes → the console's ``Node`` and ``Gpu`` rows, every round (Slurm's, Kubernetes').

A cluster manager knows a GPU by node and index only (neither Slurm nor Kubernetes has its UUID), so its row's
UUID is ``<cluster>-<node>-<index>`` and its model the cluster's name of the type (Slurm's GRES type ``a100``,
Kubernetes' ``nvidia.com/gpu.product``), which ``gpu_type_key`` reads as the type. Memory and power come from
the type's datasheet where known (the telemetry source overwrites nothing here). A node the cluster reports
unusable (down, drained, NotReady, cordoned) has its GPUs marked lost — the round then moves or preempts their
jobs as for any lost GPU — and back to ok when it returns to service; GPUs an operator marked by hand on a usable
node are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from django.db import transaction

from scheduler import inventory
from scheduler.core.gpu_types import gpu_type_key
from scheduler.models import Gpu, GpuHealth, Node

# Datasheet memory (MiB) and board power limit (W) by GPU type; other types get the fallback until telemetry.
DATASHEET = {"a100": (81920, 400), "h100": (81920, 700), "h200": (143771, 700), "v100": (32768, 300),
             "p100": (16384, 300), "t4": (15360, 70), "k80": (12288, 150), "l40s": (46068, 350)}
FALLBACK = (16384, 300)
MAX_GPUS_PER_NODE = 256  # more on one node is not a machine: the node is left out, and the round says so
MAX_NODE_NAME = 255  # Node.hostname's length


class ClusterNode(Protocol):
    """A node as its cluster manager reports it."""

    @property
    def name(self) -> str: ...
    @property
    def gpu_type(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def usable(self) -> bool: ...


@dataclass(frozen=True)
class InventoryChange:
    lost: tuple[str, ...]  # nodes whose GPUs became lost this round, with the cluster's reason
    back: tuple[str, ...]  # nodes whose GPUs came back
    skipped: tuple[str, ...] = ()  # nodes reported with more GPUs or a longer name than the console keeps

    def notes(self) -> list[str]:
        """What the round says of it."""
        return [f"{what}: {'; '.join(names)}" for what, names in (
            ("GPUs lost with their nodes", self.lost), ("nodes back in service", self.back),
            ("nodes left out (too many GPUs or too long a name)", self.skipped)) if names]


def gpu_uuid(cluster: str, node: str, index: int) -> str:
    return f"{cluster}-{node}-{index}"


def sync_inventory(cluster: str, nodes: Sequence[ClusterNode]) -> InventoryChange:
    """Make the rows say what the cluster (``"slurm"``, ``"k8s"``) says: one transaction, idempotent."""
    lost: list[str] = []
    back: list[str] = []
    skipped: list[str] = []
    with transaction.atomic():
        for cluster_node in nodes:
            if cluster_node.gpus <= 0:
                continue  # a node without GPUs schedules nothing of ours
            if cluster_node.gpus > MAX_GPUS_PER_NODE or len(cluster_node.name) > MAX_NODE_NAME:
                skipped.append(cluster_node.name[:MAX_NODE_NAME])
                continue
            node = _upsert(cluster, cluster_node)
            health = GpuHealth.OK if cluster_node.usable else GpuHealth.LOST
            gpus = list(node.gpus.all())
            changing = [gpu for gpu in gpus if gpu.health != health and not (
                health == GpuHealth.OK and gpu.health == GpuHealth.DEGRADED)]
            if changing and inventory.set_gpu_health(changing, health):
                (back if health == GpuHealth.OK else lost).append(
                    f"{cluster_node.name} ({cluster_node.state}"
                    f"{', ' + cluster_node.reason if cluster_node.reason else ''})")
    return InventoryChange(tuple(lost), tuple(back), tuple(skipped))


def _upsert(cluster: str, cluster_node: ClusterNode) -> Node:
    model = cluster_node.gpu_type or "gpu"
    memory_mib, power_w = DATASHEET.get(gpu_type_key(model), FALLBACK)
    node, _ = Node.objects.get_or_create(hostname=cluster_node.name)
    have = {gpu.index: gpu for gpu in node.gpus.all()}
    if len(have) == cluster_node.gpus and all(gpu.model == model for gpu in have.values()):
        return node  # the common case: nothing changed
    inventory.register_node(cluster_node.name, [
        inventory.GpuSpec(index=index, uuid=gpu_uuid(cluster, cluster_node.name, index), model=model,
                          memory_mib=memory_mib, power_limit_w=power_w)
        for index in range(cluster_node.gpus)
    ])
    # GPUs the cluster no longer counts on this node: lost, never deleted (allocations keep their history).
    gone = [gpu for index, gpu in have.items() if index >= cluster_node.gpus]
    inventory.set_gpu_health(gone, GpuHealth.LOST)
    return node


def cluster_gpu_types(cluster: str) -> set[str]:
    """The GPU types of the console's inventory of ``cluster`` (the cluster's names of them)."""
    return set(Gpu.objects.filter(uuid__startswith=f"{cluster}-").values_list("model", flat=True))
