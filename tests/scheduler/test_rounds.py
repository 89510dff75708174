"""The live round on a real database: snapshot → policy → one transaction → simulated executor."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db.models import Count
from django_celery_beat.models import PeriodicTask

from scheduler import inventory
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.policy import Capabilities
from scheduler.core.speed import job_speed
from scheduler.core.types import PolicyResult
from scheduler.jobs import verbs
from scheduler.live import round as rounds
from scheduler.live.config import ROUND_SCHEDULE_NAME, sync_round_schedule, update_settings
from scheduler.live.refit import model_as_json
from scheduler.models import (
    Allocation,
    Job,
    JobState,
    Node,
    PolicyState,
    RescaleEvent,
    RescaleKind,
    RoundStatus,
    SchedulingRound,
    SettingsChange,
    Tenant,
)


@pytest.fixture
def cluster(db: None) -> list[Node]:
    """Two nodes × 4 A100."""
    return [
        inventory.register_node(host, [
            inventory.GpuSpec(i, f"GPU-{host}-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(4)
        ])
        for host in ("a", "b")
    ]


def submit(tenant: Tenant, name: str, gpus: int, work: float = 3600.0, at: datetime | None = None, **kw) -> Job:
    # A profile the core does not know: a rigid job whose work is seconds at min_gpus.
    return verbs.submit_job(tenant=tenant, name=name, workload_profile="trace", total_work=work,
                               min_gpus=gpus, max_gpus=gpus, submitted_at=at, **kw)


def open_gpus(job: Job) -> set[str]:
    return set(Allocation.objects.filter(job=job, ended_at__isnull=True).values_list("gpu__uuid", flat=True))


def test_a_round_starts_jobs_and_writes_allocations_events_and_the_round(cluster, tenant, now) -> None:
    update_settings(policy="fifo")
    first = submit(tenant, "first", 4, at=now - timedelta(minutes=2))
    second = submit(tenant, "second", 8, at=now - timedelta(minutes=1))
    row = rounds.run_round(now=now)
    assert row is not None and row.status == RoundStatus.OK
    assert (row.jobs_considered, row.starts, row.decisions, row.skipped) == (2, 1, 1, 0)
    assert row.snapshot_ms is not None and row.policy_ms is not None and row.write_ms is not None
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == JobState.RUNNING and len(open_gpus(first)) == 4 and first.started_at == now
    assert second.state == JobState.PENDING and "waiting" in second.pending_reason
    event = RescaleEvent.objects.get(job=first)
    assert (event.kind, event.to_gpus, event.round_id) == (RescaleKind.START, 4, row.pk)
    assert PolicyState.objects.get(policy="fifo").round_id == row.pk
    # The simulated executor acknowledged the launch after the commit.
    assert first.launched_generation == first.generation == 1


def test_the_simulated_executor_finishes_a_job_when_its_work_is_done(cluster, tenant, now) -> None:
    update_settings(policy="fifo", simulated_speedup=2.0)
    job = submit(tenant, "short", 2, work=600.0)  # 600 s of work at 2 GPUs → 300 s at speedup 2
    rounds.run_round(now=now)
    rounds.run_round(now=now + timedelta(seconds=200))
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.progress == pytest.approx(400.0)
    assert job.attained_gpu_seconds == pytest.approx(400.0)  # 2 GPUs × 200 s
    row = rounds.run_round(now=now + timedelta(seconds=400))
    job.refresh_from_db()
    assert row is not None and row.finished == 1
    assert job.state == JobState.SUCCEEDED and job.finished_at == now + timedelta(seconds=300)
    assert job.attained_gpu_seconds == pytest.approx(600.0) and not open_gpus(job)
    assert RescaleEvent.objects.filter(job=job, kind=RescaleKind.FINISH).exists()


def test_an_elastic_job_is_rescaled_and_pays_its_restart_delay(cluster, tenant, now) -> None:
    update_settings(policy="pollux", simulated_speedup=1.0, restart_seconds=60)
    job = verbs.submit_job(tenant=tenant, name="bert", workload_profile="bert", total_work=1e9,
                              min_gpus=1, max_gpus=8)
    rounds.run_round(now=now)
    job.refresh_from_db()
    held = len(open_gpus(job))
    assert held >= 1 and job.state == JobState.RUNNING
    verbs.set_gpu_bounds(job, 1, held + 1 if held < 8 else 4)
    row = rounds.run_round(now=now + timedelta(seconds=60))
    job.refresh_from_db()
    assert row is not None and row.rescales == 1 and job.state == JobState.RESCALING and job.restarts == 1
    assert job.restart_until == now + timedelta(seconds=120)
    restoring = rounds.build_snapshot(now + timedelta(seconds=100)).snap  # what the next round's policy sees
    info = next(j for j in restoring.jobs if j.id == str(job.pk))
    assert info.restart_until == (now + timedelta(seconds=120)).timestamp() and info.restoring(restoring.now)
    progress = job.progress
    rounds.run_round(now=now + timedelta(seconds=100))  # still restarting: no progress
    job.refresh_from_db()
    assert job.progress == progress and job.state == JobState.RESCALING
    rounds.run_round(now=now + timedelta(seconds=180))
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.progress > progress
    reasons = list(RescaleEvent.objects.filter(job=job, kind=RescaleKind.RESCALE).values_list("reason", flat=True))
    assert reasons and all(reasons)


def test_progress_follows_the_goodput_model(cluster, tenant, now) -> None:
    update_settings(policy="fifo", simulated_speedup=3.0)
    job = verbs.submit_job(tenant=tenant, name="cifar", workload_profile="cifar10", total_work=1e9,
                              min_gpus=2, max_gpus=2)
    rounds.run_round(now=now)
    rounds.run_round(now=now + timedelta(seconds=100))
    job.refresh_from_db()
    live = rounds.build_snapshot(now)
    info = next(j for j in live.snap.jobs if j.id == str(job.pk))
    assert job.progress == pytest.approx(job_speed(info, live.snap, 2, 1) * 3.0 * 100, rel=1e-6)


def test_a_lost_launch_is_resent_by_the_next_round(cluster, tenant, now, monkeypatch) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "j", 2)
    from scheduler.backends.simulated.executor import SimulatedExecutor

    def crash(self, launches, at):  # the worker dies between the commit and telling the executor
        raise SystemExit("killed")

    with monkeypatch.context() as patch:
        patch.setattr(SimulatedExecutor, "launch", crash)
        with pytest.raises(SystemExit):
            rounds.run_round(now=now)
    job.refresh_from_db()
    assert (job.generation, job.launched_generation, job.state) == (1, 0, JobState.RUNNING)
    assert [launch.job_id for launch in rounds.unlaunched()] == [job.pk]
    rounds.run_round(now=now + timedelta(seconds=60))
    job.refresh_from_db()
    assert job.launched_generation == job.generation == 1 and rounds.unlaunched() == []


def test_a_broken_policy_records_a_failed_round_and_changes_nothing(cluster, tenant, now, monkeypatch) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "j", 2)

    class Greedy:
        name, event_driven = "fifo", True

        def allocate(self, snap, state):
            return PolicyResult({j.id: 64 for j in snap.jobs})  # more GPUs than its bounds

    monkeypatch.setattr(rounds, "build_policy", lambda config: Greedy())
    row = rounds.run_round(now=now)
    assert row is not None and row.status == RoundStatus.FAILED and "bounds" in row.error
    job.refresh_from_db()
    assert job.state == JobState.PENDING and not open_gpus(job)


def test_no_round_while_paused_or_while_another_worker_holds_the_lease(cluster, tenant, now) -> None:
    update_settings(policy="fifo", paused=True)
    assert rounds.run_round(now=now) is None
    update_settings(paused=False)
    assert rounds.take_lease(rounds.ROUND_LEASE, "other-worker", 60)
    assert rounds.run_round() is None and not SchedulingRound.objects.exists()
    rounds.release_lease(rounds.ROUND_LEASE, "other-worker")
    assert rounds.run_round() is not None


def test_cancelling_a_running_job_tells_the_executor_to_stop_it(cluster, tenant, now) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "j", 2)
    rounds.run_round(now=now)
    verbs.cancel_job(Job.objects.get(pk=job.pk))
    stop = rounds.unlaunched()
    assert [(launch.job_id, launch.gpus) for launch in stop] == [(job.pk, ())]


def test_settings_changes_are_recorded_and_reach_beat(db: None, operator) -> None:
    sync_round_schedule()
    update_settings(actor=operator, policy="srtf", round_seconds=15)
    changes = dict(SettingsChange.objects.values_list("field", "new_value"))
    assert changes == {"policy": "srtf", "round_seconds": "15"}
    assert SettingsChange.objects.filter(actor=operator).count() == 2
    assert PeriodicTask.objects.get(name=ROUND_SCHEDULE_NAME).interval.every == 15
    update_settings(paused=True)
    assert not PeriodicTask.objects.get(name=ROUND_SCHEDULE_NAME).enabled


def test_bad_settings_are_refused_by_field(db: None) -> None:
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as refused:
        update_settings(policy="nonsense", round_seconds=0)
    assert set(refused.value.message_dict) == {"policy", "round_seconds"}
    assert not SettingsChange.objects.exists()


def test_every_round_leaves_each_gpu_with_at_most_one_open_allocation(cluster, tenant, other_tenant, now) -> None:
    update_settings(policy="pollux", simulated_speedup=20.0)
    for i in range(12):
        verbs.submit_job(tenant=(tenant, other_tenant)[i % 2], name=f"j{i}", workload_profile="cifar10",
                            total_work=2000.0 * (i + 1), min_gpus=1, max_gpus=4,
                            submitted_at=now + timedelta(seconds=i))
    for minute in range(30):
        rounds.run_round(now=now + timedelta(minutes=minute))
        doubled = Allocation.objects.filter(ended_at__isnull=True).values("gpu").annotate(n=Count("pk"))
        assert not [row for row in doubled if row["n"] > 1]
        for job in Job.objects.all():
            held = len(open_gpus(job))
            assert (held > 0) == (job.state in (JobState.RUNNING, JobState.RESCALING)), job
    assert Job.objects.filter(state=JobState.SUCCEEDED).count() > 0


def test_mig_split_gpus_and_their_instances_are_never_given_to_jobs(tenant, now) -> None:
    """Node m: GPU 0 whole, GPU 1 split into two MIG instances. Only GPU 0 is offered, so a 2-GPU job waits
    while a 1-GPU job gets GPU 0."""
    parent = inventory.GpuSpec(1, "GPU-m-1", "NVIDIA A100-SXM4-80GB", 81920, 400)
    instances = [inventory.GpuSpec(2000 + slot, f"MIG-m-1-{slot}", "NVIDIA A100-SXM4-80GB MIG 1g.10gb", 9728, 400,
                                  mig_parent_uuid=parent.uuid) for slot in range(2)]
    inventory.register_node("m", [inventory.GpuSpec(0, "GPU-m-0", "NVIDIA A100-SXM4-80GB", 81920, 400), parent,
                                 *instances])
    update_settings(policy="fifo")
    wide = submit(tenant, "wide", 2, at=now - timedelta(minutes=2))
    narrow = submit(tenant, "narrow", 1, at=now - timedelta(minutes=1))
    snapshot = rounds.build_snapshot(now).snap
    assert [slot.id for node in snapshot.nodes for slot in node.gpus] == ["GPU-m-0"]
    rounds.run_round(now=now)
    assert (open_gpus(wide), open_gpus(narrow)) == (set(), {"GPU-m-0"})


def test_a_refit_replaces_the_model_of_the_type_it_ran_on_only(cluster, tenant, now) -> None:
    job = verbs.submit_job(tenant=tenant, name="cifar", workload_profile="cifar10", total_work=1e9,
                              min_gpus=1, max_gpus=4)
    refitted = FITTED_PROFILES["cifar10"]["t4"]  # a slower model, stored as the job's own on a100
    Job.objects.filter(pk=job.pk).update(fitted_model=model_as_json("a100", refitted, reports=4))
    models = rounds.build_snapshot(now).snap.profiles[f"job:{job.pk}"]
    assert models["a100"] == refitted and models["v100"] is FITTED_PROFILES["cifar10"]["v100"]


def test_a_move_between_gpu_types_is_recorded_with_both_types_and_shown_so(tenant, now, monkeypatch) -> None:
    """The Overview listed a type move as "rescale 4 → 4" and no reason named the types."""
    from cluster_ops.dashboards.overview_data import round_summary

    for host, model in (("v", "Tesla V100-SXM2-32GB"), ("a", "NVIDIA A100-SXM4-80GB")):
        inventory.register_node(host, [inventory.GpuSpec(i, f"GPU-{host}-{i}", model, 32768, 300) for i in range(4)])
    job = verbs.submit_job(tenant=tenant, name="cifar", workload_profile="cifar10", total_work=1e9,
                              min_gpus=1, max_gpus=4)

    class OnType:
        name, event_driven = "fifo", False
        capabilities = Capabilities()
        kind = "v100"

        def allocate(self, snap, state):
            return PolicyResult({j.id: 4 for j in snap.jobs}, gpu_types={j.id: self.kind for j in snap.jobs})

    policy = OnType()
    monkeypatch.setattr(rounds, "build_policy", lambda config: policy)
    rounds.run_round(now=now)
    policy.kind = "a100"
    rounds.run_round(now=now + timedelta(seconds=60))
    event = RescaleEvent.objects.get(job=job, kind=RescaleKind.RESCALE)
    assert (event.from_gpus, event.from_type, event.to_gpus, event.to_type) == (4, "v100", 4, "a100")
    assert event.gpus_label == "4 v100 → 4 a100"
    assert event.reason.startswith("moved v100 → a100: ") and "× its speed there; restart ~" in event.reason
    (decision,) = round_summary(Job.objects.all()).decisions
    assert decision.gpus == "4 v100 → 4 a100"
