"""Themis by hand: finish-time fairness ρ = T_shared / T_independent, worst first.

Jobs here have no workload profile, so a job of ``min_gpus`` m runs at k/m work units per
second on k ≥ m GPUs, and at (slice/m) when time-shared on a slice below m.
"""

from __future__ import annotations

import pytest

from scheduler.core.config import get_policy
from scheduler.core.policies.themis import FinishTimeFairness
from scheduler.core.types import ClusterSnapshot, JobInfo, TenantInfo

from . import cluster, job, snapshot


def snap_of(*jobs: JobInfo, gpus: int = 4, now: float = 10.0, weights: dict[str, float] | None = None,
            ) -> ClusterSnapshot:
    tenants = tuple(TenantInfo(name, weight=w) for name, w in (weights or {}).items())
    return snapshot(cluster(gpus), *jobs, now=now, tenants=tenants)


def test_the_worst_finish_time_fairness_goes_first_even_if_it_arrived_later() -> None:
    # 4 GPUs, tenants a and b of equal weight: a's slice is 2 GPUs for its one job, b's 2 GPUs
    # are split between two jobs. Each job needs 4 GPUs and 100 s of work at 4 GPUs.
    #   A1: T_ind = 100 / (2/4) = 200 s; T_sh = (10 − 10) + 100 = 100 s → ρ = 0.5
    #   B1: T_ind = 100 / (1/4) = 400 s; T_sh = (10 − 0) + 100 = 110 s → ρ = 0.275
    a1 = job("A1", 4, tenant="a", submit=10)
    b1, b2 = job("B1", 4, tenant="b", submit=0), job("B2", 4, tenant="b", submit=0)
    snap = snap_of(a1, b1, b2)
    fairness = FinishTimeFairness(snap)
    assert fairness.rho(a1, 4) == pytest.approx(0.5)
    assert fairness.rho(b1, 4) == pytest.approx(0.275)
    result = get_policy("themis").allocate(snap, None)
    assert dict(result.allocations) == {"A1": 4, "B1": 0, "B2": 0}
    assert result.reasons["B1"] == "waiting: 4 GPUs needed, 0 free; 1 less fairly served job ahead [ρ=0.28 at 4 GPUs]"


def test_tenant_weights_size_the_private_slices() -> None:
    # Weight 3 for b: b owns 3 of 4 GPUs, 1.5 per job; a owns 1.
    #   A1: T_ind = 100 / (1/4) = 400 s → ρ = 100/400 = 0.25
    #   B1: T_ind = 100 / (1.5/4) = 266.7 s → ρ = 110/266.7 = 0.4125 (B1 before B2 by id)
    a1 = job("A1", 4, tenant="a", submit=10)
    b1, b2 = job("B1", 4, tenant="b", submit=0), job("B2", 4, tenant="b", submit=0)
    snap = snap_of(a1, b1, b2, weights={"a": 1.0, "b": 3.0})
    assert FinishTimeFairness(snap).rho(b1, 4) == pytest.approx(0.4125)
    assert dict(get_policy("themis").allocate(snap, None).allocations) == {"A1": 0, "B1": 4, "B2": 0}


def test_spare_gpus_water_fill_the_worst_rho_and_split_equals_evenly() -> None:
    # 8 GPUs, two tenants with one elastic job each (1..8 GPUs, 100 work units, k units/s on k GPUs).
    # Slices of 4: T_ind = 100/4 = 25 s; at now = submit, ρ(k) = (100/k)/25 = 4/k for both.
    e = job("E", min_gpus=1, max_gpus=8, tenant="a", submit=10)
    f = job("F", min_gpus=1, max_gpus=8, tenant="b", submit=10)
    assert dict(get_policy("themis").allocate(snap_of(e, f, gpus=8), None).allocations) == {"E": 4, "F": 4}


def test_a_job_that_waited_longer_gets_all_spare_gpus_while_its_rho_stays_worse() -> None:
    # As above, but E was submitted 100 s before now: ρ_E(k) = (100 + 100/k)/25 = 4 + 4/k ≥ 4.5
    # at k ≤ 8, always worse than ρ_F(1) = 4: E grows from 1 to 7, F keeps its minimum.
    e = job("E", min_gpus=1, max_gpus=8, tenant="a", submit=0, holds=2)
    f = job("F", min_gpus=1, max_gpus=8, tenant="b", submit=100)
    result = get_policy("themis").allocate(snap_of(e, f, gpus=8, now=100), None)
    assert dict(result.allocations) == {"E": 7, "F": 1}
    assert result.reasons["E"] == "resized 2→7 GPUs: GPUs go to the worst finish-time fairness first [ρ=4.57 at 7 GPUs]"


def test_finished_jobs_get_nothing_and_jobs_too_big_for_the_cluster_are_unschedulable() -> None:
    done = job("done", 4, work=10, done=10, holds=4)
    huge = job("huge", 16)
    result = get_policy("themis").allocate(snap_of(done, huge), None)
    assert dict(result.allocations) == {"done": 0, "huge": 0}
    assert result.reasons["done"] == "finished: no work left"
    assert result.reasons["huge"].startswith("unschedulable: needs 16 GPUs, the cluster has 4 usable")
