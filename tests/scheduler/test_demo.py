"""The demo cluster: inventory, tenants and a trace arriving live, seeded idempotently."""

from datetime import timedelta
from pathlib import Path

from django_celery_beat.models import PeriodicTask

from scheduler.demo import (
    DEMO_LOAD,
    DEMO_POLICY,
    DEMO_SPEEDUP,
    FEED_SCHEDULE_NAME,
    FIRST_WINDOW_SECONDS,
    MAX_JOBS_PER_FEED,
    REALISTIC_MIX,
    feed_demo,
    generate_jobs,
    seed_demo,
)
from scheduler.models import DemoFeed, Gpu, Job, Node, SchedulerSettings, SettingsChange, Tenant
from scheduler.sim.workload import COMPLETION_PROGRESS


def test_seeds_inventory_tenants_and_the_first_hour(db: None, fixtures_dir: Path, now) -> None:
    added = seed_demo(fixtures_dir, now)
    assert added == {"nodes": 16, "tenants": 3, "jobs": 3}  # the fixture's job at t=3600 is outside the hour
    assert Gpu.objects.count() == 128 and set(Gpu.objects.values_list("model", flat=True)) == {
        "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB"}
    ncf = Job.objects.get(name="ncf-1")
    assert (ncf.workload_profile, ncf.total_work, ncf.min_gpus, ncf.max_gpus) == ("ncf", 5000.0, 1, 16)
    # The first hour is compressed DEMO_SPEEDUP times and ends now.
    assert ncf.submitted_at == now - timedelta(seconds=(FIRST_WINDOW_SECONDS - 600) / (DEMO_SPEEDUP * DEMO_LOAD))


def test_the_demo_runs_an_elastic_policy_fast_and_says_so(db: None, fixtures_dir: Path, now) -> None:
    seed_demo(fixtures_dir, now)
    config = SchedulerSettings.objects.get()
    assert (config.policy, config.simulated_speedup) == (DEMO_POLICY, DEMO_SPEEDUP)
    assert set(SettingsChange.objects.values_list("field", flat=True)) >= {"policy", "simulated_speedup"}
    assert PeriodicTask.objects.get(name=FEED_SCHEDULE_NAME).enabled


def test_the_feed_submits_arrivals_as_their_time_comes_and_loops(db: None, fixtures_dir: Path, now) -> None:
    seed_demo(fixtures_dir, now)
    assert feed_demo(fixtures_dir, now) == 0  # nothing new yet
    # The fixture's 4th job arrives at trace second 3600: 1 s (trace) after the first hour.
    arrivals = DEMO_SPEEDUP * DEMO_LOAD  # trace seconds per wall second
    assert feed_demo(fixtures_dir, now + timedelta(seconds=1 / arrivals)) == 1
    span = 3600 + 60  # the fixture's last arrival + one minute, in trace seconds
    later = now + timedelta(seconds=(span + 11 - FIRST_WINDOW_SECONDS) / arrivals)
    assert feed_demo(fixtures_dir, later) == 1  # the second loop's first job (trace second 10)
    assert Job.objects.filter(name="cifar10-0~1").exists()
    assert DemoFeed.objects.get().submitted == 5


def test_the_feed_catches_up_gradually_after_a_long_stop(db: None, fixtures_dir: Path, now) -> None:
    seed_demo(fixtures_dir, now)
    assert feed_demo(fixtures_dir, now + timedelta(days=30)) == MAX_JOBS_PER_FEED


def test_seeding_twice_adds_nothing(db: None, fixtures_dir: Path, now) -> None:
    seed_demo(fixtures_dir, now)
    assert seed_demo(fixtures_dir, now) == {"nodes": 0, "tenants": 0, "jobs": 0}
    assert (Node.objects.count(), Tenant.objects.count(), Job.objects.count()) == (16, 3, 3)
    assert DemoFeed.objects.count() == 1


def test_without_traces_the_generator_feeds_the_demo(db: None, tmp_path: Path, now) -> None:
    added = seed_demo(tmp_path, now, seed=3)
    assert 0 < added["jobs"] < 160
    assert {job.workload_profile for job in Job.objects.all()} <= set(COMPLETION_PROGRESS)


def test_generator_is_seeded_and_follows_the_realistic_mix() -> None:
    assert generate_jobs(7) == generate_jobs(7) != generate_jobs(8)
    jobs = generate_jobs(0, count=4000)
    single_gpu = sum(job.num_gpus == 1 for job in jobs) / len(jobs)
    expected = sum(n for (_, gpus), n in REALISTIC_MIX.items() if gpus == 1) / sum(REALISTIC_MIX.values())
    assert abs(single_gpu - expected) < 0.02

