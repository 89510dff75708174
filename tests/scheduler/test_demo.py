"""The demo cluster: inventory, tenants and the first hour of a trace, seeded idempotently."""

from datetime import timedelta
from pathlib import Path

from scheduler.demo import FIRST_WINDOW_SECONDS, REALISTIC_MIX, generate_jobs, seed_demo
from scheduler.models import Gpu, Job, Node, Tenant
from scheduler.sim.workload import COMPLETION_PROGRESS


def test_seeds_inventory_tenants_and_the_first_hour(db: None, fixtures_dir: Path, now) -> None:
    added = seed_demo(fixtures_dir, now)
    assert added == {"nodes": 16, "tenants": 3, "jobs": 3}  # the fixture's job at t=3600 is outside the hour
    assert Gpu.objects.count() == 128 and set(Gpu.objects.values_list("model", flat=True)) == {
        "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB"}
    ncf = Job.objects.get(name="ncf-1")
    assert (ncf.workload_profile, ncf.total_work, ncf.min_gpus, ncf.max_gpus) == ("ncf", 5000.0, 1, 4)
    assert ncf.submitted_at == now - timedelta(seconds=FIRST_WINDOW_SECONDS - 600)


def test_seeding_twice_adds_nothing(db: None, fixtures_dir: Path, now) -> None:
    seed_demo(fixtures_dir, now)
    assert seed_demo(fixtures_dir, now) == {"nodes": 0, "tenants": 0, "jobs": 0}
    assert (Node.objects.count(), Tenant.objects.count(), Job.objects.count()) == (16, 3, 3)


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

