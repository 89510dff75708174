"""Faults around the live round, on a real database: the lease, decisions gone stale, a crash mid-write, lost GPUs."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from django.db import connections
from django.utils import timezone

from scheduler import inventory
from scheduler.core.config import get_policy
from scheduler.core.cycle import Action, CycleResult, run_cycle
from scheduler.jobs import verbs
from scheduler.live import round as rounds
from scheduler.live import writer
from scheduler.live.config import scheduler_settings, update_settings
from scheduler.models import (
    Allocation,
    Gpu,
    GpuHealth,
    Job,
    JobState,
    Lease,
    Node,
    RescaleEvent,
    RescaleKind,
    SchedulingRound,
    Tenant,
)

from ..round_invariants import problems, unlaunched_jobs

LEASE = rounds.ROUND_LEASE


@pytest.fixture
def cluster(db: None) -> list[Node]:
    """Nodes a and b with 4 A100 each, node v with 4 V100."""
    models = {"a": "NVIDIA A100-SXM4-80GB", "b": "NVIDIA A100-SXM4-80GB", "v": "Tesla V100-SXM2-32GB"}
    return [inventory.register_node(host, [inventory.GpuSpec(i, f"GPU-{host}-{i}", model, 32768, 300)
                                          for i in range(4)]) for host, model in models.items()]


def submit(tenant: Tenant, name: str, gpus: int, at: datetime, gpu_type: str = "") -> Job:
    # A profile the core does not know: a rigid job, one work unit per second; 1e6 s never finishes here.
    job = verbs.submit_job(tenant=tenant, name=name, workload_profile="trace", total_work=1e6,
                              min_gpus=gpus, max_gpus=gpus, submitted_at=at)
    Job.objects.filter(pk=job.pk).update(gpu_type=gpu_type)
    return job


def held(job: Job) -> set[str]:
    return set(Allocation.objects.filter(job=job, ended_at__isnull=True).values_list("gpu__uuid", flat=True))


def state(job: Job) -> str:
    return Job.objects.get(pk=job.pk).state


# --- the lease ------------------------------------------------------------------------


def test_a_held_lease_refuses_a_second_holder_and_lets_its_holder_renew(db: None, now: datetime) -> None:
    assert rounds.take_lease(LEASE, "worker-a", 30, now=now)
    assert not rounds.take_lease(LEASE, "worker-b", 30, now=now + timedelta(seconds=29))
    assert rounds.take_lease(LEASE, "worker-a", 30, now=now + timedelta(seconds=29))  # renewal moves the expiry
    assert not rounds.take_lease(LEASE, "worker-b", 30, now=now + timedelta(seconds=45))
    lease = Lease.objects.get(name=LEASE)
    assert (lease.holder, lease.expires_at) == ("worker-a", now + timedelta(seconds=59))


def test_an_expired_lease_is_taken_over_and_the_old_holder_cannot_release_it(db: None, now: datetime) -> None:
    assert rounds.take_lease(LEASE, "killed-worker", 2, now=now)
    assert not rounds.take_lease(LEASE, "worker-b", 2, now=now + timedelta(seconds=1))
    assert rounds.take_lease(LEASE, "worker-b", 2, now=now + timedelta(seconds=3))
    rounds.release_lease(LEASE, "killed-worker")  # a late release by the old holder is a no-op
    assert Lease.objects.get(name=LEASE).holder == "worker-b"
    assert not rounds.take_lease(LEASE, "killed-worker", 2, now=now + timedelta(seconds=4))


def test_a_released_lease_is_free_at_once(db: None, now: datetime) -> None:
    assert rounds.take_lease(LEASE, "worker-a", 600, now=now)
    rounds.release_lease(LEASE, "worker-a")
    lease = Lease.objects.get(name=LEASE)
    assert (lease.holder, lease.expires_at) == ("", None)
    assert rounds.take_lease(LEASE, "worker-b", 600, now=now + timedelta(seconds=1))
    assert Lease.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_workers_get_the_lease_exactly_once() -> None:
    """Eight threads, each with its own database connection, ask at the same instant: one UPDATE decides."""
    holders, start = [f"worker-{i}" for i in range(8)], threading.Barrier(8)
    won: dict[str, bool] = {}

    def take(holder: str) -> None:
        try:
            start.wait()
            won[holder] = rounds.take_lease(LEASE, holder, 60)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=take, args=(holder,)) for holder in holders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(won) == 8, f"threads that never answered: {set(holders) - set(won)}"
    winners = [holder for holder, ok in won.items() if ok]
    assert len(winners) == 1, f"winners: {winners}"
    assert Lease.objects.get(name=LEASE).holder == winners[0]


def test_a_round_after_a_dead_workers_lease_expired_runs(cluster, tenant, now) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "j", 2, now)
    rounds.take_lease(LEASE, "dead-worker", 2, now=timezone.now() - timedelta(seconds=3))
    row = rounds.run_round(now=now)
    assert row is not None and state(job) == JobState.RUNNING
    assert Lease.objects.get(name=LEASE).holder == ""  # and the round released it


def test_a_round_that_crashes_mid_write_writes_nothing_and_frees_the_lease(cluster, tenant, now, monkeypatch) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "j", 2, now)

    def crash(*args: object) -> None:
        raise RuntimeError("the worker died here")

    monkeypatch.setattr(writer, "_record_events", crash)  # after allocations and job states were written
    with pytest.raises(RuntimeError):
        rounds.run_round(now=now)
    assert (state(job), held(job), SchedulingRound.objects.count()) == (JobState.PENDING, set(), 0)
    assert not RescaleEvent.objects.exists() and Job.objects.get(pk=job.pk).generation == 0
    assert Lease.objects.get(name=LEASE).holder == ""
    monkeypatch.undo()
    assert rounds.run_round(now=now) is not None and state(job) == JobState.RUNNING


# --- decisions that went stale between the snapshot and the write ------------------------


def decide(now: datetime) -> tuple[rounds.LiveSnapshot, CycleResult]:
    """A round's first half: the snapshot and the policy's answer, not yet written."""
    live = rounds.build_snapshot(now)
    return live, run_cycle(live.snap, get_policy(scheduler_settings().policy), None)


def write(live: rounds.LiveSnapshot, result: CycleResult, now: datetime) -> SchedulingRound:
    timings = writer.Timings()
    timings.mark("snapshot")
    timings.mark("policy")
    return writer.apply_round(live, result, "fifo", now, "simulated", 0, timings)


def test_a_job_cancelled_between_snapshot_and_write_is_not_started(cluster, tenant, now) -> None:
    update_settings(policy="fifo")
    cancelled, other = submit(tenant, "cancelled", 4, now), submit(tenant, "other", 2, now + timedelta(seconds=1))
    live, result = decide(now)
    assert {result.decisions[str(j.pk)].action for j in (cancelled, other)} == {Action.START}
    verbs.cancel_job(cancelled)
    row = write(live, result, now)
    assert (row.decisions, row.starts, row.skipped) == (1, 1, 1)
    assert (state(cancelled), held(cancelled)) == (JobState.CANCELLED, set())
    assert state(other) == JobState.RUNNING and len(held(other)) == 2
    assert not RescaleEvent.objects.filter(job=cancelled, kind=RescaleKind.START).exists()
    assert problems() == []


def test_a_decision_for_gpus_taken_meanwhile_is_dropped_not_written_twice(cluster, tenant, now) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "j", 4, now)
    live, result = decide(now)
    wanted = result.decisions[str(job.pk)].gpus
    intruder = submit(tenant, "intruder", 1, now)  # started by someone else on one of those GPUs
    Job.objects.filter(pk=intruder.pk).update(state=JobState.RUNNING)
    Allocation.objects.create(job=intruder, gpu=Gpu.objects.get(uuid=wanted[0]), started_at=now)
    row = write(live, result, now)
    assert (row.decisions, row.skipped) == (0, 1)
    assert (state(job), held(job), held(intruder)) == (JobState.PENDING, set(), {wanted[0]})
    assert problems() == []


def test_a_job_that_already_holds_gpus_is_not_started_again(cluster, tenant, now) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "j", 2, now)
    live, result = decide(now)
    elsewhere = Gpu.objects.filter(node__hostname="b").exclude(uuid__in=result.decisions[str(job.pk)].gpus)[:2]
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    Allocation.objects.bulk_create(Allocation(job=job, gpu=gpu, started_at=now) for gpu in elsewhere)
    row = write(live, result, now)
    assert row.skipped == 1 and held(job) == {gpu.uuid for gpu in elsewhere}
    assert problems() == []


# --- lost GPUs --------------------------------------------------------------------------


def test_a_lost_gpus_job_moves_to_healthy_gpus_and_one_that_no_longer_fits_is_preempted(cluster, tenant, now) -> None:
    update_settings(policy="fifo")
    mover, stuck = submit(tenant, "mover", 2, now, gpu_type="a100"), submit(tenant, "stuck", 4, now, gpu_type="v100")
    rounds.run_round(now=now)
    before = held(mover)
    assert len(before) == 2 and len(held(stuck)) == 4
    lost = sorted(before)[0], sorted(held(stuck))[0]
    assert inventory.set_gpu_health(list(Gpu.objects.filter(uuid__in=lost)), GpuHealth.LOST) == 2

    later = now + timedelta(minutes=1)
    row = rounds.run_round(now=later)
    assert row is not None and (row.rescales, row.preemptions) == (1, 1)
    after = held(mover)
    assert len(after) == 2 and lost[0] not in after and before - {lost[0]} <= after  # it keeps its healthy GPU
    assert not Gpu.objects.filter(uuid__in=after, health=GpuHealth.LOST).exists()
    move = RescaleEvent.objects.get(job=mover, kind=RescaleKind.RESCALE)
    assert (move.from_gpus, move.to_gpus, move.round_id) == (2, 2, row.pk) and "moved" in move.reason
    assert state(mover) == JobState.RESCALING

    stopped = Job.objects.get(pk=stuck.pk)
    assert (stopped.state, held(stuck)) == (JobState.PREEMPTED, set())
    assert "needs 4 v100 GPUs" in stopped.pending_reason and "3 usable" in stopped.pending_reason
    event = RescaleEvent.objects.get(job=stuck, kind=RescaleKind.PREEMPT)
    assert (event.from_gpus, event.to_gpus, event.reason) == (4, 0, stopped.pending_reason)

    closed = Allocation.objects.filter(gpu__uuid__in=lost)
    assert not closed.filter(ended_at__isnull=True).exists() and set(closed.values_list("ended_at", flat=True)) == {
        later}
    assert problems() == [] and unlaunched_jobs() == []  # and the executor was told both


def test_a_preempted_job_comes_back_when_its_gpu_does(cluster, tenant, now) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "v", 4, now, gpu_type="v100")
    rounds.run_round(now=now)
    gpu = Gpu.objects.get(uuid=sorted(held(job))[0])
    inventory.set_gpu_health([gpu], GpuHealth.LOST)
    rounds.run_round(now=now + timedelta(minutes=1))
    assert state(job) == JobState.PREEMPTED
    rounds.run_round(now=now + timedelta(minutes=2))
    assert state(job) == JobState.PREEMPTED  # still lost: it waits, and says why
    assert "3 usable" in Job.objects.get(pk=job.pk).pending_reason
    inventory.set_gpu_health([gpu], GpuHealth.OK)
    rounds.run_round(now=now + timedelta(minutes=3))
    assert state(job) == JobState.RUNNING and len(held(job)) == 4
    assert problems() == []
