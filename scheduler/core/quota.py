"""Tenant quotas with borrowing: idle GPUs may go to anyone, and are reclaimed for their owner.

A tenant is guaranteed ``quota`` GPUs. While it uses less and has a job waiting whose
``min_gpus`` fits in what it is owed, GPUs are found for that job: free ones first, then
taken back from borrowers (tenants above their quota) — elastic borrowers shrink toward
their minimum before any borrower job is stopped, the most recently submitted first.
Counts only: placement (placement.py) turns them into GPUs afterwards.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping

from .capacity import Capacity
from .types import ClusterSnapshot, JobInfo


class _Ledger:
    """Counts, per-tenant usage and free capacity, kept consistent as counts change."""

    def __init__(self, snap: ClusterSnapshot, counts: Mapping[str, int]) -> None:
        self.counts = dict(counts)
        self.usage: Counter[str] = Counter()
        self.capacity = Capacity(snap)
        for job in sorted(snap.jobs, key=lambda j: (j.gpu_type is None, j.id)):
            self.usage[job.tenant] += self.counts[job.id]
            if self.capacity.fits(job, self.counts[job.id]):
                self.capacity.take(job, self.counts[job.id])

    def set(self, job: JobInfo, count: int) -> None:
        delta = count - self.counts[job.id]
        if delta > 0:
            self.capacity.take(job, delta)
        elif delta < 0:
            self.capacity.give_back(job, -delta)
        self.usage[job.tenant] += delta
        self.counts[job.id] = count


def reclaim_for_owners(snap: ClusterSnapshot, counts: Mapping[str, int]) -> tuple[dict[str, int], dict[str, str]]:
    """Counts after guaranteeing quotas, and a reason for every job they changed."""
    quotas = {tenant.name: tenant.quota for tenant in snap.tenants if tenant.quota > 0}
    if not _someone_owed(snap, counts, quotas):
        return dict(counts), {}
    ledger, reasons = _Ledger(snap, counts), {}
    # Who gives GPUs back first: jobs that can shrink, then the most recently submitted.
    givers = sorted((j for j in snap.jobs if counts[j.id] > 0),
                    key=lambda j: (counts[j.id] <= j.min_gpus, -j.submit_time, j.id))
    waiting = sorted((j for j in snap.jobs if counts[j.id] == 0), key=lambda j: (-j.priority, j.submit_time, j.id))
    for job in waiting:
        if job.min_gpus > quotas.get(job.tenant, 0) - ledger.usage[job.tenant]:
            continue
        plan = _reclaim_plan(ledger, job, quotas, givers)
        if plan is None:
            continue
        for borrower, count in plan:
            ledger.set(borrower, count)
            reasons[borrower.id] = f"GPUs reclaimed by tenant {job.tenant} (within its quota) from {borrower.tenant}"
        ledger.set(job, job.min_gpus)
        reasons[job.id] = f"started within its tenant's quota of {quotas[job.tenant]} GPUs"
    return ledger.counts, reasons


def _someone_owed(snap: ClusterSnapshot, counts: Mapping[str, int], quotas: Mapping[str, int]) -> bool:
    """Whether any waiting job would fit in what its tenant is still owed (the common answer is no)."""
    waiting = [job for job in snap.jobs if counts[job.id] == 0 and job.tenant in quotas]
    if not waiting:  # the common case: every job of a tenant with a quota runs
        return False
    usage: Counter[str] = Counter()
    for job in snap.jobs:
        usage[job.tenant] += counts[job.id]
    return any(job.min_gpus <= quotas[job.tenant] - usage[job.tenant] for job in waiting)


def _reclaim_plan(
    ledger: _Ledger, job: JobInfo, quotas: Mapping[str, int], givers: list[JobInfo]
) -> list[tuple[JobInfo, int]] | None:
    """Borrower jobs to shrink or stop (with their new counts) so ``job`` fits; None if impossible."""
    borrowed = sum(max(used - quotas.get(t, 0), 0) for t, used in ledger.usage.items() if t != job.tenant)
    if ledger.capacity.free_for(job) + borrowed < job.min_gpus:
        return None  # even taking back every borrowed GPU would not be enough
    capacity, usage, plan = copy.deepcopy(ledger.capacity), Counter(ledger.usage), []
    for borrower in givers:
        if capacity.fits(job, job.min_gpus):
            break
        over = usage[borrower.tenant] - quotas.get(borrower.tenant, 0)
        current = ledger.counts[borrower.id]
        if over <= 0 or current == 0 or borrower.tenant == job.tenant or not _compatible(job, borrower):
            continue
        short = job.min_gpus - capacity.free_for(job)
        shrunk = max(borrower.min_gpus, current - min(over, short))
        new = shrunk if shrunk < current else 0  # shrink if it can; stop it otherwise
        capacity.give_back(borrower, current - new)
        usage[borrower.tenant] -= current - new
        plan.append((borrower, new))
    return plan if capacity.fits(job, job.min_gpus) else None


def _compatible(job: JobInfo, borrower: JobInfo) -> bool:
    """Whether GPUs ``borrower`` holds could serve ``job``."""
    return job.gpu_type is None or borrower.gpu_type in (None, job.gpu_type)
