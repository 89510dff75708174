"""The live snapshot: database rows → the core's ``ClusterSnapshot``, read as one round (or a forecast, or a
preview) sees them.

The inventory's ``NodeIndex`` is built here, once per inventory, and passed to the snapshot explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.backends import GpuPlace
from scheduler.live.refit import job_models

from ..core.fitted_profiles import FITTED_PROFILES
from ..core.goodput import GoodputModel
from ..core.gpu_types import gpu_type_key
from ..core.types import ClusterSnapshot, GpuSlot, JobInfo, NodeIndex, NodeInfo, TenantInfo
from ..models import SCHEDULABLE_STATES, Allocation, Gpu, GpuHealth, Job, Tenant


@dataclass(frozen=True)
class LiveSnapshot:
    """The core's snapshot plus what the round needs to write its answer back."""

    snap: ClusterSnapshot
    gpu_pk: Mapping[str, int]  # GPU UUID → row id
    gpu_place: Mapping[str, GpuPlace]
    pending_reasons: Mapping[str, str] = field(default_factory=dict)  # job id → reason stored now
    rows: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # job id → its row as read (job_fields)


SNAPSHOT_FIELDS = (
    "pk", "tenant__name", "submitted_at", "min_gpus", "max_gpus", "total_work", "progress", "priority",
    "workload_profile", "gpu_type", "attained_gpu_seconds", "restarts", "batch_size", "last_throughput",
    "last_grad_noise_scale", "pending_reason", "fitted_model", "expected_seconds", "predicted_seconds",
    "restart_until", "cluster_priority", "time_limit_seconds",
)


def build_snapshot(now: datetime, job_fields: Sequence[str] = ()) -> LiveSnapshot:
    """Read nodes, tenants and every job a round considers into a ``ClusterSnapshot``.

    ``job_fields``: more of each job's columns that the caller needs, read in the same query and kept in
    ``rows``, so that nothing reads the jobs a second time (a round may commit in between: a forecast that did
    so met jobs that had finished meanwhile).
    """
    inventory = read_inventory()
    nodes, gpu_pk, gpu_place = inventory.nodes, inventory.gpu_pk, inventory.gpu_place
    tenants = tuple(
        TenantInfo(name, quota, weight)
        for name, quota, weight in Tenant.objects.values_list("name", "gpu_quota", "fair_share_weight")
    )
    rows = list(Job.objects.filter(state__in=SCHEDULABLE_STATES).values(*dict.fromkeys((*SNAPSHOT_FIELDS,
                                                                                            *job_fields))))
    placements = _open_placements()
    profiles: dict[str, Mapping[str, GoodputModel]] = dict(FITTED_PROFILES)
    jobs = []
    for row in rows:
        profile = _profile_key(row, profiles)
        jobs.append(JobInfo(
            id=str(row["pk"]), tenant=row["tenant__name"], submit_time=row["submitted_at"].timestamp(),
            min_gpus=row["min_gpus"], max_gpus=row["max_gpus"], total_work=row["total_work"],
            progress=row["progress"], priority=_priority(row), profile=profile, gpu_type=row["gpu_type"] or None,
            placement=placements.get(row["pk"], ()), attained_gpu_seconds=row["attained_gpu_seconds"],
            restarts=row["restarts"], batch_size=row["batch_size"], throughput=row["last_throughput"],
            grad_noise_scale=row["last_grad_noise_scale"],
            # A length for policies without an oracle (qssf): the owner's estimate, else the forecast's prediction.
            expected_seconds=row["expected_seconds"] or row["predicted_seconds"] if profile is None else None,
            restart_until=row["restart_until"].timestamp() if row["restart_until"] else 0.0,
            time_limit=row["time_limit_seconds"],
        ))
    snap = ClusterSnapshot(now.timestamp(), nodes, tuple(jobs), tenants, profiles, inventory.index)
    reasons = {str(row["pk"]): row["pending_reason"] for row in rows}
    return LiveSnapshot(snap, gpu_pk, gpu_place, reasons, {str(row["pk"]): row for row in rows})


def _priority(row: Mapping[str, Any]) -> int:
    """The console's priority of its own jobs; the cluster manager's of a job it scheduled (an observer's)."""
    return row["cluster_priority"] if row["cluster_priority"] is not None else row["priority"]


def _profile_key(row: Mapping, profiles: dict[str, Mapping[str, GoodputModel]]) -> str | None:
    """A job's own refitted model when it has one, else its named profile, else None (a rigid job).

    The refit replaces the model of the GPU type the job ran on only: on the other types the job keeps its
    profile's models (speed is priced on the type it would hold).
    """
    if row["fitted_model"]:
        key = f"job:{row['pk']}"
        profiles[key] = {**profiles.get(row["workload_profile"], {}), **job_models(row["fitted_model"])}
        return key
    return row["workload_profile"] if row["workload_profile"] in profiles else None


@dataclass(frozen=True)
class Inventory:
    """The GPUs a job can be given, as the core's nodes with their index, and how to find each GPU's row."""

    nodes: tuple[NodeInfo, ...]
    index: NodeIndex
    gpu_pk: Mapping[str, int]  # GPU UUID → row id
    gpu_place: Mapping[str, GpuPlace]


# The last inventory read, under the rows it was built from: the same rows next round give the same nodes and
# index (keyed by value, so a changed inventory can never be served a stale index).
_LAST_INVENTORY: dict[tuple, Inventory] = {}


def read_inventory() -> Inventory:
    gpus = _whole_gpus(
        Gpu.objects.order_by("node__hostname", "index").values_list(
            "pk", "uuid", "index", "model", "health", "node__hostname", "node__schedulable", "mig_parent_uuid"
        )
    )
    key = tuple(gpus)
    inventory = _LAST_INVENTORY.get(key)
    if inventory is None:
        inventory = _inventory(gpus)
        _LAST_INVENTORY.clear()
        _LAST_INVENTORY[key] = inventory
    return inventory


def _inventory(gpus: list[tuple]) -> Inventory:
    by_node: dict[str, list[tuple]] = {}
    for gpu in gpus:
        by_node.setdefault(gpu[5], []).append(gpu)
    nodes = tuple(_node_info(hostname, members) for hostname, members in by_node.items())
    gpu_pk = {uuid_: pk for pk, uuid_, *_ in gpus}
    gpu_place = {uuid_: GpuPlace(host, index, uuid_) for _, uuid_, index, _, _, host, _ in gpus}
    return Inventory(nodes, NodeIndex.of(nodes), gpu_pk, gpu_place)


def _whole_gpus(rows: Iterable[tuple]) -> list[tuple]:
    """The GPUs a job can be given whole, without their MIG column: not MIG instances, and not GPUs split into
    them.

    A MIG-enabled GPU runs work only inside its instances, and an instance is a fraction of a GPU that the
    goodput models do not describe; offering either would also let two jobs share one physical GPU. Both stay in
    the inventory and in telemetry.
    """
    rows = list(rows)
    split = {parent for *_, parent in rows if parent}
    return [row[:-1] for row in rows if not row[-1] and row[1] not in split]


def _node_info(hostname: str, gpus: list[tuple]) -> NodeInfo:
    types = [gpu_type_key(model) for _, _, _, model, *_ in gpus]
    node_type = max(sorted(set(types)), key=types.count)  # one type per node; a mixed node counts as its majority
    slots = tuple(GpuSlot(uuid_, healthy=health != GpuHealth.LOST) for _, uuid_, _, _, health, _, _ in gpus)
    return NodeInfo(hostname, node_type, slots, schedulable=gpus[0][6])


def _open_placements() -> dict[int, tuple[str, ...]]:
    held: dict[int, list[str]] = {}
    rows = Allocation.objects.filter(ended_at__isnull=True).order_by("gpu__node__hostname", "gpu__index")
    for job_id, gpu_uuid in rows.values_list("job_id", "gpu__uuid"):
        held.setdefault(job_id, []).append(gpu_uuid)
    return {job_id: tuple(gpus) for job_id, gpus in held.items()}
