"""Every registered policy, over generated clusters and job sets, keeps the invariants."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings

from scheduler.core.capacity import Capacity
from scheduler.core.config import get_policy, policy_names
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


@pytest.mark.parametrize("name", POLICY_NAMES)
@PROPERTY_SETTINGS
@given(snap=snapshots())
def test_a_round_places_every_policy_validly(name: str, snap: ClusterSnapshot) -> None:
    from scheduler.core.cycle import Action, run_cycle

    result = run_cycle(snap, get_policy(name))
    usable = {gpu.id: node for node in snap.nodes for gpu in node.usable_gpus}
    used = [gpu for d in result.decisions.values() for gpu in d.gpus]
    assert len(used) == len(set(used)), "a GPU given twice"
    assert set(used) <= set(usable), "an unhealthy GPU, or one on a cordoned node, was used"
    jobs = {job.id: job for job in snap.jobs}
    assert set(result.decisions) == set(jobs)
    for decision in result.decisions.values():
        job, count = jobs[decision.job_id], len(decision.gpus)
        assert count == 0 or job.min_gpus <= count <= job.max_gpus
        if job.gpu_type and decision.gpus:
            assert {usable[g].gpu_type for g in decision.gpus} == {job.gpu_type}
        assert decision.reason
    assert run_cycle(snap, get_policy(name)).decisions == result.decisions
    # ``changes`` is found without building every decision, and must be exactly the ones that move GPUs.
    moves = [d for d in result.decisions.values() if d.action not in (Action.KEEP, Action.WAIT)]
    assert list(result.changes) == moves
