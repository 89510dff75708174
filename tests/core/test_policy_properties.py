"""Every registered policy, over generated clusters and job sets, keeps the invariants."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings

from scheduler.core.capacity import Capacity
from scheduler.core.policy import get_policy, policy_names
from scheduler.core.types import ClusterSnapshot

from .strategies import snapshots

POLICY_NAMES = policy_names()
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_counts(snap: ClusterSnapshot, allocations: dict[str, int]) -> None:
    assert set(allocations) == {job.id for job in snap.jobs}
    capacity = Capacity(snap)
    for job in sorted(snap.jobs, key=lambda j: (j.gpu_type is None, j.id)):  # typed jobs draw first
        gpus = allocations[job.id]
        assert gpus == 0 or job.min_gpus <= gpus <= job.max_gpus, (job, gpus)
        assert capacity.fits(job, gpus), f"{job.id} got {gpus}; {capacity.free_for(job)} usable GPUs left"
        capacity.take(job, gpus)


@pytest.mark.parametrize("name", POLICY_NAMES)
@PROPERTY_SETTINGS
@given(snap=snapshots())
def test_policy_counts_respect_bounds_capacity_and_types(name: str, snap: ClusterSnapshot) -> None:
    result = get_policy(name).allocate(snap, None)
    check_counts(snap, dict(result.allocations))


@pytest.mark.parametrize("name", POLICY_NAMES)
@PROPERTY_SETTINGS
@given(snap=snapshots())
def test_policy_is_deterministic_pure_and_its_state_is_json(name: str, snap: ClusterSnapshot) -> None:
    before = copy.deepcopy(snap)
    first = get_policy(name).allocate(snap, None)
    second = get_policy(name).allocate(snap, None)
    assert snap == before
    assert dict(first.allocations) == dict(second.allocations)
    state = json.loads(json.dumps(first.state))
    again = get_policy(name).allocate(snap, state)  # a round later, state restored from JSON
    check_counts(snap, dict(again.allocations))
