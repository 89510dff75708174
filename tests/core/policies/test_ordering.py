"""``grant_in_order``: when every job fits at once it skips the walk, and must answer as the walk would."""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.capacity import Capacity
from scheduler.core.policies import _ordering
from scheduler.core.policies._ordering import Grants, arrival_key, grant_in_order
from scheduler.core.types import ClusterSnapshot, JobInfo

from ..strategies import snapshots
from . import cluster, job, snapshot


def free_after(snap: ClusterSnapshot, capacity: Capacity) -> dict[str | None, int]:
    """What ``capacity`` has left for an untyped job and for each GPU type's jobs."""
    samples = {None: job("untyped")} | {t: job(f"typed-{t}", gpu_type=t) for t in snap.usable_by_type}
    return {gpu_type: capacity.free_for(sample) for gpu_type, sample in samples.items()}


def grant(
    snap: ClusterSnapshot, order: list[JobInfo], backfill: bool, *, walk: bool
) -> tuple[Grants, dict[str | None, int]]:
    capacity = Capacity(snap)
    if walk:  # no shortcut: every job through the ledger, one by one
        with mock.patch.object(_ordering, "_all_fit", return_value=False):
            granted = grant_in_order(snap, order, capacity, backfill=backfill, ahead="earlier")
    else:
        granted = grant_in_order(snap, order, capacity, backfill=backfill, ahead="earlier")
    return granted, free_after(snap, capacity)


def test_when_everyone_fits_each_gets_its_request_and_the_ledger_is_booked() -> None:
    nodes = cluster(8, 8) + cluster(4, gpu_type="v100", prefix="v")
    jobs = [job("a", 2), job("b", 3, gpu_type="v100"), job("e", min_gpus=2, max_gpus=4, holds=4), job("c", 1)]
    snap = snapshot(nodes, *jobs)
    (allocations, reasons), free = grant(snap, jobs, backfill=False, walk=False)
    assert allocations == {"a": 2, "b": 3, "e": 2, "c": 1}
    assert reasons == {"e": "resized 4→2 GPUs: this policy runs every job at its min_gpus"}
    assert free == {None: 20 - 8, "a100": 20 - 8, "v100": 4 - 3}  # a100: 16 of its own, but 12 left in all
    assert grant(snap, jobs, backfill=False, walk=True) == ((allocations, reasons), free)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=snapshots(), backfill=st.booleans())
def test_the_shortcut_answers_as_the_walk_does(snap: ClusterSnapshot, backfill: bool) -> None:
    order = sorted(snap.jobs, key=arrival_key)
    assert grant(snap, order, backfill, walk=False) == grant(snap, order, backfill, walk=True)
