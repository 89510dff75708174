"""The live forecast on a database queue whose start and finish times are worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from scheduler import inventory
from scheduler.forecasting import forecasts, runtime_models
from scheduler.jobs import verbs
from scheduler.live import forecast_requests
from scheduler.live.config import FORECAST_SCHEDULE_NAME, TRAIN_SCHEDULE_NAME, scheduler_settings, sync_round_schedule
from scheduler.models import (
    Allocation,
    Forecast,
    Gpu,
    GpuHealth,
    Job,
    JobForecast,
    JobState,
    Node,
    RoundStatus,
    SchedulingRound,
    Tenant,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a multiple of every round interval below


@pytest.fixture
def cluster(db: None) -> Node:
    specs = [inventory.GpuSpec(i, f"GPU-f-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(4)]
    node = inventory.register_node("f1", specs)
    settings = scheduler_settings()
    settings.policy, settings.round_seconds, settings.restart_seconds = "fifo", 10, 0.0
    settings.save()
    return node


def rigid(tenant: Tenant, name: str, gpus: int, expected: float, submitted: float) -> Job:
    """A job without a profile (its profile is not a fitted one) whose owner expects ``expected`` seconds."""
    return verbs.submit_job(tenant=tenant, name=name, workload_profile="custom", total_work=1.0, min_gpus=gpus,
                               expected_seconds=expected, submitted_at=NOW - timedelta(seconds=submitted))


def run_on_all_gpus(job: Job, served: float) -> None:
    started = NOW - timedelta(seconds=served)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=started, accounted_at=NOW,
                                         attained_gpu_seconds=served * job.min_gpus)
    for gpu in Gpu.objects.all():
        Allocation.objects.create(job=job, gpu=gpu, started_at=started)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def estimates() -> dict[str, JobForecast]:
    return {row.job.name: row for row in JobForecast.objects.filter(forecast=Forecast.objects.first())
            .select_related("job")}


def test_forecast_of_a_database_queue_worked_by_hand(cluster: Node, tenant: Tenant) -> None:
    # 4 GPUs, rounds every 10 s, FIFO. A has run 200 of its expected 300 s on all 4; B (2 GPUs, 50 s),
    # C (2, 80 s) and D (4, 10 s) wait. A ends at +100, B and C start then (B ends +150, C +180), D at +180.
    a = rigid(tenant, "A", 4, 300, 900)
    rigid(tenant, "B", 2, 50, 500)
    c = rigid(tenant, "C", 2, 80, 400)
    rigid(tenant, "D", 4, 10, 300)
    run_on_all_gpus(a, served=200)
    row = forecasts.refresh(NOW)
    assert row is not None and row.jobs == 4 and row.policy == "fifo"
    got = estimates()
    assert (got["A"].estimated_start, got["A"].estimated_finish) == (None, at(100))
    assert (got["B"].estimated_start, got["B"].estimated_finish) == (at(100), at(150))
    assert (got["C"].estimated_start, got["C"].estimated_finish) == (at(100), at(180))
    assert (got["D"].estimated_start, got["D"].estimated_finish) == (at(180), at(190))
    frees = forecasts.frees_text(got["D"])
    assert frees.startswith("2 A100s free at ~") and frees.endswith(f"when job C (#{c.pk}) finishes")
    redacted = forecasts.frees_text(got["D"], tenant_ids={tenant.pk + 1})  # a viewer of another tenant only
    assert redacted.endswith("when another tenant's job finishes")
    assert forecasts.starts_in(got["D"], NOW) == "starts in ~3 min"
    assert Job.objects.get(name="B").predicted_seconds == 50  # the owner's estimate, stored for policies


def test_the_beat_leaves_a_fresh_change_to_its_own_request(cluster: Node, tenant: Tenant) -> None:
    rigid(tenant, "A", 4, 300, 100)
    assert forecasts.refresh(NOW) is not None
    rigid(tenant, "B", 2, 50, 0)  # the queue changed: its submission asked for a forecast of its own
    assert forecasts.refresh(at(5), catching_up=True) is None  # not the beat's, on the round's tick
    assert forecasts.refresh(at(10), catching_up=True) is not None  # a round interval on, the request was lost


def test_forecast_rounds_fall_when_the_live_rounds_do(cluster: Node, tenant: Tenant) -> None:
    """Beat's rounds run every 10 s from when it started — here at :07, :17, … — not at multiples of 10 s since the
    epoch: B, waiting for A to end at +100, starts at the live round after it, +107 (the demo's estimates were
    all a constant 25.6 s early before)."""
    a = rigid(tenant, "A", 4, 300, 900)
    rigid(tenant, "B", 4, 50, 500)
    run_on_all_gpus(a, served=200)
    SchedulingRound.objects.create(policy="fifo", started_at=NOW - timedelta(seconds=3), finished_at=NOW,
                                   status=RoundStatus.OK)

    forecasts.refresh(NOW)

    assert estimates()["B"].estimated_start == at(107)


def test_a_job_past_its_prediction_is_re_estimated_never_due_in_the_past(cluster: Node, tenant: Tenant) -> None:
    # A expected 300 s has run 400: with no finished job to learn from, half its service again (200 s).
    a = rigid(tenant, "A", 4, 300, 900)
    run_on_all_gpus(a, served=400)
    forecasts.refresh(NOW)
    assert estimates()["A"].estimated_finish == at(200)


def test_the_forecast_is_remade_only_when_something_changed_or_it_is_stale(cluster: Node, tenant: Tenant) -> None:
    rigid(tenant, "B", 2, 50, 500)
    assert forecasts.refresh(NOW) is not None
    assert forecasts.refresh(NOW + timedelta(seconds=20)) is None  # same queue, 2 of the 5 rounds it keeps
    assert forecasts.refresh(NOW + timedelta(seconds=60)) is not None  # stale after 5 rounds of 10 s
    rigid(tenant, "E", 1, 50, 0)
    assert forecasts.refresh(NOW + timedelta(seconds=61)) is not None  # a new job: made again at once


def test_a_forecast_that_moved_says_why(cluster: Node, tenant: Tenant) -> None:
    # A ends at +2800; W (4 GPUs) starts at the round then. Rounds of an hour put that round at +3600: W moves
    # 800 s later (more than 10 min and a quarter of its wait), because of the settings.
    a = rigid(tenant, "A", 4, 3000, 900)
    rigid(tenant, "W", 4, 1000, 100)
    run_on_all_gpus(a, served=200)
    forecasts.refresh(NOW)
    assert estimates()["W"].estimated_start == at(2800) and estimates()["W"].moved_because == ""
    settings = scheduler_settings()
    settings.round_seconds = 3600
    settings.save()
    forecasts.refresh(NOW + timedelta(seconds=1))
    assert estimates()["W"].estimated_start == at(3600)
    assert estimates()["W"].moved_because == "later by 13 min: the scheduler settings changed (round_seconds 10 → 3600)"


def test_a_lost_gpu_is_the_reason_a_start_moved(cluster: Node, tenant: Tenant) -> None:
    # W (2 GPUs, 3000 s) runs on 2 GPUs; X (2 GPUs) starts now on the other two. With one of those lost, X waits
    # for W: it moves 3000 s later, and says a GPU was lost.
    w = rigid(tenant, "W", 2, 3000, 900)
    rigid(tenant, "X", 2, 600, 100)
    gpus = list(Gpu.objects.all())
    Job.objects.filter(pk=w.pk).update(state=JobState.RUNNING, started_at=NOW, accounted_at=NOW)
    for gpu in gpus[:2]:
        Allocation.objects.create(job=w, gpu=gpu, started_at=NOW)
    forecasts.refresh(NOW)
    assert estimates()["X"].estimated_start == NOW
    Gpu.objects.filter(pk=gpus[3].pk).update(health=GpuHealth.LOST)
    assert forecasts.refresh(NOW) is not None  # the inventory changed: made again at once
    assert estimates()["X"].estimated_start == at(3000)
    assert estimates()["X"].moved_because == "later by 50 min: 1 GPU lost or cordoned"


def test_the_api_and_the_admin_show_the_estimates(cluster: Node, tenant: Tenant, operator_client: Client) -> None:
    a = rigid(tenant, "A", 4, 300, 900)
    b = rigid(tenant, "B", 2, 50, 500)
    run_on_all_gpus(a, served=200)
    forecasts.refresh(NOW)
    listed = {job["name"]: job for job in operator_client.get("/api/jobs/").json()["results"]}
    assert listed["B"]["estimated_start"] == at(100).isoformat()
    assert listed["A"]["estimated_start"] is None and listed["A"]["estimated_finish"] == at(100).isoformat()
    assert listed["B"]["estimate"]["as_of"] == NOW.isoformat() and listed["B"]["expected_seconds"] == 50
    one = operator_client.get(f"/api/jobs/{b.pk}/").json()
    assert one["estimated_finish"] == at(150).isoformat() and "when job A" in one["estimate"]["after"]
    page = operator_client.get("/admin/scheduler/job/").content.decode()
    assert "starts in ~" in page and "when job A" in page
    assert "when job A" in operator_client.get(f"/admin/scheduler/job/{b.pk}/change/").content.decode()


def test_beat_sends_the_forecast_every_round_and_trains_hourly(cluster: Node) -> None:
    from django_celery_beat.models import PeriodicTask

    sync_round_schedule()
    forecast = PeriodicTask.objects.get(name=FORECAST_SCHEDULE_NAME)
    assert (forecast.task, forecast.interval.every) == (forecast_requests.FORECAST_TASK, 10)
    assert PeriodicTask.objects.get(name=TRAIN_SCHEDULE_NAME).interval.every == 3600


def test_the_runtime_model_is_trained_on_finished_jobs_stored_and_versioned(cluster: Node, tenant: Tenant) -> None:
    # 40 finished jobs: "short-N" run 100 s, "long-N" 10,000 s. The stored model reads back and tells them apart.
    for n in range(40):
        name, seconds = ("short", 100.0) if n % 2 else ("long", 10_000.0)
        job = rigid(tenant, f"{name}-{n}", 1, 1, 5000)
        Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, attained_gpu_seconds=seconds,
                                             expected_seconds=None, finished_at=NOW)
    first = runtime_models.train_runtime_model(NOW)
    second = runtime_models.train_runtime_model(NOW)
    assert first is not None and second is not None and second.pk > first.pk and first.samples == 40
    predictor, version = runtime_models.runtime_predictor()
    assert version == second.pk
    from scheduler.sim.runtimes import JobFeatures

    assert predictor.predict(JobFeatures(tenant="vision", name="short-99")).seconds == 100  # its history
    assert "format" in second.model and "booster" in second.model  # text, not a pickle


def test_arrival_samples_store_a_range_around_the_estimate(cluster: Node, tenant: Tenant) -> None:
    # FIFO: jobs arriving later queue behind B, so every sample starts B when the point forecast does.
    a = rigid(tenant, "A", 4, 300, 900)
    rigid(tenant, "B", 2, 50, 500)
    run_on_all_gpus(a, served=200)
    row = forecasts.refresh(NOW, samples=3)
    assert row is not None and row.samples == 3
    b = estimates()["B"]
    assert (b.start_p10, b.estimated_start, b.start_p90) == (at(100), at(100), at(100))
    assert b.finish_p10 is not None and b.finish_p10 <= b.estimated_finish <= b.finish_p90


def test_a_new_job_that_goes_first_is_the_reason_a_start_moved(cluster: Node, tenant: Tenant) -> None:
    # qssf, by predicted GPU-time: W (4 GPUs × 1000 s) would start when A ends, at +2800. N (4 × 900 s) arrives
    # and goes first, so W starts 900 s later, at +3700: a new job, not named (it may be another tenant's).
    settings = scheduler_settings()
    settings.policy = "qssf"
    settings.save()
    a = rigid(tenant, "A", 4, 3000, 900)
    rigid(tenant, "W", 4, 1000, 100)
    run_on_all_gpus(a, served=200)
    forecasts.refresh(NOW)
    assert estimates()["W"].estimated_start == at(2800)
    rigid(tenant, "N", 4, 900, 0)
    forecasts.refresh(NOW)
    assert (estimates()["N"].estimated_start, estimates()["W"].estimated_start) == (at(2800), at(3700))
    assert estimates()["W"].moved_because == "later by 15 min: 1 new job goes ahead of it"


def test_a_tenant_never_reads_another_tenants_job_in_an_estimate(cluster: Node, tenant: Tenant,
                                                                other_tenant: Tenant) -> None:
    from django.contrib.auth.models import User

    a = rigid(other_tenant, "secret-project", 4, 300, 900)
    b = rigid(tenant, "B", 2, 50, 500)
    run_on_all_gpus(a, served=200)
    forecasts.refresh(NOW)
    member = User.objects.create_user("vision-member")
    tenant.members.add(member)
    client = Client()
    client.force_login(member)
    seen = client.get(f"/api/jobs/{b.pk}/").json()
    assert seen["estimate"]["after"].endswith("when another tenant's job finishes")
    assert "secret-project" not in client.get("/api/jobs/").content.decode()


def mirrored(tenant: Tenant, user: str, name: str, gpus: int, limit: float, *, priority: int = 1,
             state: str = JobState.PENDING, ran: float | None = None) -> Job:
    """A job Slurm scheduled, as the observer mirrors it: its user, time limit and priority; ``ran``: a finished
    run's length."""
    job = Job.objects.create(tenant=tenant, name=name, workload_profile="", total_work=limit, min_gpus=gpus,
                             max_gpus=gpus, submitted_at=NOW - timedelta(seconds=600), state=state,
                             cluster_job_id=str(Job.objects.count() + 1000), cluster_user=user,
                             time_limit_seconds=limit, cluster_priority=priority)
    if ran is not None:
        Job.objects.filter(pk=job.pk).update(attained_gpu_seconds=ran * gpus, finished_at=NOW - timedelta(hours=1))
    return job


def test_an_observed_slurm_queue_is_forecast_as_slurm_backfills_with_runs_predicted_from_history(
        cluster: Node, tenant: Tenant) -> None:
    # Slurm decides; the console forecasts its backfill. Each user's earlier runs of a name say how long it runs:
    # alice's "train" 200 s, "prep" 50 s, bob's "eval" 60 s, far under their limits (600, 120, 300 s).
    settings = scheduler_settings()
    settings.executor = "slurm-observer"
    settings.save()
    for user, name, seconds in (("alice", "train", 200), ("alice", "prep", 50), ("bob", "eval", 60)):
        mirrored(tenant, user, name, 1, 900, state=JobState.SUCCEEDED, ran=seconds)
    a = mirrored(tenant, "alice", "train", 4, 600)
    run_on_all_gpus(a, served=100)
    mirrored(tenant, "bob", "eval", 4, 300, priority=10)
    mirrored(tenant, "alice", "prep", 2, 120, priority=20)

    row = forecasts.refresh(NOW)

    # By the limits Slurm plans prep (first by priority) at +500, when A's limit ends, and eval at +620. A ends at
    # +100 by its history: prep starts then, and planned to end by its limit at +220, eval waits for it; prep ends
    # at +150 by its history, and eval starts then.
    assert row is not None and row.policy == "slurm-backfill"
    got = estimates()
    assert got["train"].estimated_finish == at(100)
    assert (got["prep"].estimated_start, got["prep"].estimated_finish) == (at(100), at(150))
    assert (got["eval"].estimated_start, got["eval"].estimated_finish) == (at(150), at(210))
    assert Job.objects.get(name="eval", state=JobState.PENDING).predicted_seconds == 60


def test_a_prediction_never_exceeds_the_time_limit() -> None:
    from scheduler.sim.runtimes import JobFeatures, RuntimePredictor

    predictor = RuntimePredictor()
    predictor.observe(JobFeatures(owner="alice", name="train"), 500.0)
    assert predictor.predict(JobFeatures(owner="alice", name="train")).seconds == 500
    capped = predictor.predict(JobFeatures(owner="alice", name="train", limit_seconds=300))
    assert (capped.seconds, capped.source) == (300, "history")
    assert predictor.predict(JobFeatures(owner="bob", name="x", limit_seconds=60)).seconds == 60  # median 500
