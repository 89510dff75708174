"""Trace jobs become simulator jobs: rigid replays run their durations, elastic ones get profiles by a stable rule."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings

from scheduler.sim.traces import TraceJob, load_itp, load_philly, load_sia_workload
from scheduler.sim.workload import (
    COMPLETION_PROGRESS,
    ELASTIC_MAX_GPUS,
    assign_profile,
    load_completion_progress,
    to_workload,
)

REAL = settings.TRACES_DIR


@pytest.fixture
def traces(fixtures_dir: Path) -> Path:
    return fixtures_dir / "traces"


def rigid_job(name: str, gpu_seconds: float, gpus: int = 1) -> TraceJob:
    return TraceJob(name=name, submit_seconds=0.0, application="", num_gpus=gpus, duration=gpu_seconds / gpus)


@pytest.mark.parametrize(
    "gpu_seconds, bucket",
    [
        (0, {"cifar10", "ncf"}), (3599, {"cifar10", "ncf"}),
        (3600, {"deepspeech2", "bert"}), (35_999, {"deepspeech2", "bert"}),
        (36_000, {"yolov3"}), (359_999, {"yolov3"}),
        (360_000, {"imagenet"}), (10**9, {"imagenet"}),
    ],
)
def test_gpu_time_buckets_map_to_pollux_applications(gpu_seconds: float, bucket: set[str]) -> None:
    chosen = {assign_profile(rigid_job(f"job-{n}", gpu_seconds), seed=0) for n in range(50)}
    assert chosen == bucket  # 50 jobs reach every application of a bucket, and no other


def test_the_gpu_time_is_the_traces_own_figure_first() -> None:
    # A 2-GPU job of 1000 s whose trace reports 4000 GPU-s: 4000 → second bucket, not first.
    job = TraceJob("j", 0.0, "", 2, duration=1000.0, gpu_time=4000.0)
    assert assign_profile(job, seed=0) in {"deepspeech2", "bert"}
    with pytest.raises(ValueError, match="job j: no GPU-time or duration"):
        assign_profile(TraceJob("j", 0.0, "", 2), seed=0)


def test_the_choice_is_seeded_stable_and_keyed_on_the_job() -> None:
    jobs = [rigid_job(f"job-{n}", 60) for n in range(400)]
    first = [assign_profile(job, seed=7) for job in jobs]
    assert first == [assign_profile(job, seed=7) for job in jobs]
    assert first[::-1] == [assign_profile(job, seed=7) for job in reversed(jobs)]  # order-free
    assert first != [assign_profile(job, seed=8) for job in jobs]
    assert 160 < Counter(first)["cifar10"] < 240  # an even split within the bucket


def test_rigid_replay_runs_each_philly_job_its_duration_at_its_gpus(traces: Path) -> None:
    trace = load_philly(traces / "philly" / "philly_jobs.csv")
    jobs = to_workload(trace, elastic=False, seed=0)
    assert [job.submit_time for job in jobs] == [0.0, 5.0, 3600.0, 7085.0, 86400.0]
    assert all(job.profile is None and job.min_gpus == job.max_gpus for job in jobs)
    by_id = {job.id: job for job in jobs}
    longest = by_id["philly-4"]
    assert (longest.total_work, longest.min_gpus, longest.tenant) == (100_000.0, 8, "11cb48")
    assert by_id["philly-3"].tenant == "default"  # an empty cluster cell
    # Totals: GPU-time and jobs per tenant are the trace's.
    assert sum(job.total_work * job.min_gpus for job in jobs) == sum(job.gpu_time or 0 for job in trace) == 976_266
    assert Counter(job.tenant for job in jobs) == {"6214e9": 2, "11cb48": 2, "default": 1}


def test_elastic_philly_jobs_get_a_profile_by_bucket_and_a_bounded_range(traces: Path) -> None:
    trace = load_philly(traces / "philly" / "philly_jobs.csv")
    jobs = {job.id: job for job in to_workload(trace, elastic=True, seed=0)}
    # GPU-hours 0.02, 4, 44, 0.5, 222 → the buckets; max = min(GPUs × 4, 64).
    expected = {"philly-0": ({"cifar10", "ncf"}, 4), "philly-1": ({"deepspeech2", "bert"}, 8),
                "philly-2": ({"yolov3"}, 16), "philly-3": ({"cifar10", "ncf"}, 4), "philly-4": ({"imagenet"}, 32)}
    for name, (bucket, high) in expected.items():
        job = jobs[name]
        assert job.profile in bucket and (job.min_gpus, job.max_gpus) == (1, high)
        assert job.total_work == COMPLETION_PROGRESS[job.profile]
    wide = to_workload(trace, elastic=True, seed=0, max_gpus_factor=16)
    assert max(job.max_gpus for job in wide) == ELASTIC_MAX_GPUS  # 8 GPUs × 16, capped


def test_pollux_workloads_keep_their_application(traces: Path) -> None:
    trace = load_sia_workload(traces / "sia" / "workloads" / "saturn" / "workload-1.csv")
    rigid = to_workload(trace, elastic=False, seed=0)
    assert [(job.profile, job.min_gpus, job.max_gpus, job.batch_size) for job in rigid] == [
        ("cifar10", 12, 12, 4096), ("bert", 1, 1, 12), ("imagenet", 8, 8, 800)]
    assert [job.total_work for job in rigid] == [39063.0, 14774.0, 576526.0]
    elastic = to_workload(trace, elastic=True, seed=0)
    assert {(job.min_gpus, job.max_gpus) for job in elastic} == {(1, ELASTIC_MAX_GPUS)}
    assert [job.profile for job in elastic] == [job.profile for job in rigid]


def test_elasticflow_model_names_count_only_when_they_are_profiles(traces: Path) -> None:
    trace = load_itp(traces / "elasticflow-itp" / "elasticflow" / "cluster01.csv")  # gpt2 (612 GPU-s), bert
    rigid = to_workload(trace, elastic=False, seed=0)
    assert [(job.profile, job.total_work) for job in rigid] == [(None, 3600.0), (None, 612.0)]  # durations win
    elastic = {job.id: job for job in to_workload(trace, elastic=True, seed=0)}
    assert (elastic["b2"].profile, elastic["b2"].batch_size) == ("bert", 64)
    assert elastic["a1"].profile in {"cifar10", "ncf"} and elastic["a1"].batch_size is None


def test_a_job_without_duration_or_known_profile_is_named() -> None:
    job = TraceJob("mystery-1", 0.0, "resnet50", 1)
    for elastic in (False, True):
        with pytest.raises(ValueError, match="mystery-1"):
            to_workload([job], elastic=elastic, seed=0)
    with pytest.raises(ValueError, match="max_gpus_factor"):
        to_workload([], elastic=True, seed=0, max_gpus_factor=0)


@pytest.mark.needs("traces")
def test_completion_progress_is_read_from_the_validation_curves() -> None:
    assert load_completion_progress(REAL) == COMPLETION_PROGRESS


@pytest.mark.needs("traces")
def test_the_full_philly_list_converts_both_ways() -> None:
    trace = load_philly(REAL / "philly" / "philly_jobs_sia_pollux.csv")
    rigid = to_workload(trace, elastic=False, seed=0)
    assert sum(job.total_work * job.min_gpus for job in rigid) == pytest.approx(sum(job.gpu_time or 0 for job in trace))
    profiles = Counter(job.profile for job in to_workload(trace, elastic=True, seed=0))
    assert set(profiles) == set(COMPLETION_PROGRESS)
    assert profiles["cifar10"] + profiles["ncf"] > profiles["imagenet"] * 10  # most Philly jobs are short
