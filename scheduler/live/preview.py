"""What the next round would do under other settings (another policy, other tenants' quotas), before they are saved.

``preview_round`` reads the live snapshot exactly as a round does (``live.snapshot.build_snapshot``), swaps in the
settings being considered, and runs ``run_cycle`` with the rounds' stored memory: the very decisions a round would
make now.
Nothing is written: no allocation moves, no policy state is stored, no reason replaced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from scheduler.core.config import build_policy
from scheduler.core.cycle import Action, Decision, run_cycle
from scheduler.core.types import ClusterSnapshot
from scheduler.live.config import scheduling_config
from scheduler.live.memory import load_round_state
from scheduler.live.snapshot import build_snapshot
from scheduler.models import Job

KINDS = ("start", "grow", "shrink", "stop")


@dataclass(frozen=True)
class Change:
    """One job whose GPUs the next round would change."""

    job_id: int
    name: str
    tenant: str
    kind: str  # start | grow | shrink | stop
    before: int
    after: int
    reason: str


@dataclass(frozen=True)
class Preview:
    policy: str
    changes: list[Change]  # largest change first
    usable_gpus: int
    idle_before: int  # usable GPUs no job holds now
    idle_after: int  # … after the round
    waiting_after: int  # jobs left waiting

    def count(self, kind: str) -> int:
        return sum(1 for change in self.changes if change.kind == kind)

    @property
    def summary(self) -> str:
        """"2 start, 3 shrink, 1 stop; 36 of 128 GPUs idle after it (now 4)"."""
        said = [f"{self.count(kind)} {kind}" for kind in KINDS if self.count(kind)]
        moves = ", ".join(said) if said else "no job would change"
        return f"{moves}; {self.idle_after} of {self.usable_gpus} GPUs idle after it (now {self.idle_before})"


def preview_round(policy_name: str, now: datetime, quotas: Mapping[str, int] | None = None) -> Preview:
    """The next round's changes under ``policy_name`` and, if given, these tenants' quotas (tenant → GPUs)."""
    snap = build_snapshot(now).snap
    if quotas:
        tenants = tuple(dataclasses.replace(t, quota=quotas.get(t.name, t.quota)) for t in snap.tenants)
        snap = dataclasses.replace(snap, tenants=tenants)
    config = scheduling_config(policy=policy_name)
    policy = build_policy(config)
    result = run_cycle(snap, policy, load_round_state(policy.name), config.cycle, config.restart_delay)
    names = dict(Job.objects.filter(pk__in=[int(d.job_id) for d in result.changes]).values_list("pk", "name"))
    tenant_of = {job.id: job.tenant for job in snap.jobs}
    changes = [Change(int(d.job_id), names.get(int(d.job_id), d.job_id), tenant_of[d.job_id], _kind(d),
                      len(d.previous), len(d.gpus), d.reason)
               for d in result.changes if len(d.previous) != len(d.gpus)]
    changes.sort(key=lambda c: (-abs(c.after - c.before), c.job_id))
    held_after = sum(len(d.gpus) for d in result.decisions.values())
    waiting = sum(1 for d in result.decisions.values() if d.action is Action.WAIT)
    return Preview(policy.name, changes, snap.usable_gpus, _idle(snap), max(0, snap.usable_gpus - held_after),
                   waiting)


def _kind(decision: Decision) -> str:
    previous, gpus = len(decision.previous), len(decision.gpus)
    if not previous:
        return "start"
    if not gpus:
        return "stop"
    return "grow" if gpus > previous else "shrink"


def _idle(snap: ClusterSnapshot) -> int:
    return max(0, snap.usable_gpus - sum(len(job.placement) for job in snap.jobs))
