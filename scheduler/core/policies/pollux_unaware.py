"""Pollux as Sia ran it: blind to GPU types.

Sia (SOSP'23 §4.3) compares against Pollux run on a heterogeneous cluster without knowing its types
(``multi_simulator_unaware.py``, ``cluster_unaware.py``; ``TRACES_DIR/sia/REFERENCE-SETUP.md`` §4): one
model per job over all types together, its GPUs counted as one pool, and an allocation that lands on several types
cut to the type holding most of it, the rest left idle. This product's own ``pollux`` is type-aware (it prices a
job on the type it holds or would hold, and placement puts new jobs on the fastest type with room); this is the
other one, so that ``validate_sia`` can print every column of Sia's Table 3. Our own code.

How it is blind:
- Pollux (policies/pollux.py) solves a snapshot in which every node is of one type and every profile has one model:
  its model on the cluster's most numerous type (where a type-blind operator's measurements would mostly come
  from; Sia's fits one model over observations from every type, which are mostly of that type too).
- Each job's count then goes on one real type, chosen without regard to speed: the type it holds if the count
  still fits there, else the type with the most GPUs left (Pollux's packing fills whatever is free). A count larger
  than that type has left is cut to what is left, as Sia's cut drops the GPUs on other types; below ``min_gpus``
  the job waits this round.
- Its batch is chosen on the type it lands on (Pollux re-tunes batch to the GPUs it runs on).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ..policy import register
from ..speed import estimated_model, held_type
from ..types import ClusterSnapshot, JobInfo, NodeInfo, PolicyResult, PolicyState
from ._ordering import arrival_key
from .pollux import PolluxPolicy, batch_sizes

BLIND_TYPE = "any"


@register
@dataclass(frozen=True)
class UnawarePolluxPolicy(PolluxPolicy):
    name: ClassVar[str] = "pollux-unaware"
    summary: ClassVar[str] = "Pollux as Sia ran it, blind to GPU types: for comparison with Sia's published table"

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult:
        blind = super().allocate(type_blind(snap), state)
        return on_real_types(snap, blind)


def type_blind(snap: ClusterSnapshot) -> ClusterSnapshot:
    """``snap`` with every node of one type and every profile's model that of the most numerous type."""
    if not snap.gpus_by_type:
        return snap
    reference = max(sorted(snap.gpus_by_type), key=lambda kind: snap.gpus_by_type[kind])
    nodes = tuple(NodeInfo(node.name, BLIND_TYPE, node.gpus, node.schedulable) for node in snap.nodes)
    profiles = {name: {BLIND_TYPE: by_type.get(reference) or estimated_model(by_type, reference)}
                for name, by_type in snap.profiles.items() if by_type}
    jobs = tuple(dataclasses.replace(job, gpu_type=None) if job.gpu_type else job for job in snap.jobs)
    return ClusterSnapshot(snap.now, nodes, jobs, snap.tenants, profiles, check=False)


def on_real_types(snap: ClusterSnapshot, blind: PolicyResult) -> PolicyResult:
    """The blind answer carried out on the real types: each job on one type, cut to what that type has left."""
    left = dict(snap.usable_by_type)
    allocations: dict[str, int] = {}
    gpu_types: dict[str, str] = {}
    reasons = dict(blind.reasons)
    # Running jobs first (they keep their type where they fit), then the others, each in arrival order.
    for job in sorted(snap.jobs, key=lambda j: (not j.running, *arrival_key(j))):
        wanted = blind.allocations.get(job.id, 0)
        kind = _landing_type(job, snap, wanted, left) if wanted else None
        count = min(wanted, left[kind]) if kind else 0
        if count < job.min_gpus:
            allocations[job.id] = 0
            if wanted:
                reasons[job.id] = f"waiting: its {wanted} GPUs would span GPU types; none has {job.min_gpus} left"
            continue
        allocations[job.id], gpu_types[job.id] = count, kind  # type: ignore[assignment]
        left[kind] -= count  # type: ignore[index]
        if count < wanted:
            reasons[job.id] = f"pollux-unaware: {wanted} GPUs cut to the {count} left on {kind}"
    return PolicyResult(allocations=allocations, state=blind.state, reasons=reasons,
                        batch_sizes=batch_sizes(snap, allocations, gpu_types),
                        gpu_types=gpu_types, wake_at=blind.wake_at, note=blind.note)


def _landing_type(job: JobInfo, snap: ClusterSnapshot, count: int, left: Mapping[str, int]) -> str | None:
    if job.gpu_type is not None:
        return job.gpu_type if job.gpu_type in left else None
    held = held_type(job, snap) if job.running else None
    if held in left and left[held] >= count:  # type: ignore[index]
        return held
    return max(sorted(left), key=lambda kind: left[kind], default=None)
