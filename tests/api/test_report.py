"""Workers' reports: the job's own token, running jobs only, progress never backwards, then a refit."""

from __future__ import annotations

import numpy as np
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from scheduler import inventory
from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.live.refit import job_models
from scheduler.live.snapshot import build_snapshot
from scheduler.models import Allocation, Job, JobReport, JobState


@pytest.fixture
def running(job: Job) -> Job:
    """``job`` running on 8 A100s over two nodes (a report may claim at most the GPUs the job holds)."""
    hold_gpus(job, nodes=2, per_node=4)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, gpu_type="a100", max_gpus=8)
    return Job.objects.get(pk=job.pk)


def hold_gpus(job: Job, nodes: int, per_node: int) -> None:
    for n in range(nodes):
        specs = [inventory.GpuSpec(i, f"GPU-r{n}-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(per_node)]
        node = inventory.register_node(f"report-node{n}", specs)
        Allocation.objects.bulk_create(Allocation(job=job, gpu=gpu, started_at=timezone.now())
                                       for gpu in node.gpus.all())


def report(job: Job, token: str | None = None, **fields: object):  # type: ignore[no-untyped-def]
    body = {"progress": 10.0, "throughput": 500.0, "batch_size": 128, "gpus": 1, **fields}
    headers = {} if token == "" else {"HTTP_X_JOB_TOKEN": token or job.report_token}
    return APIClient().post(f"/api/jobs/{job.pk}/report/", body, format="json", **headers)


def test_a_report_is_stored_and_updates_the_job(running: Job) -> None:
    response = report(running, progress=42.0, throughput=900.0, gpus=2, nodes=1, grad_noise_scale=1500.0)
    assert response.status_code == 201
    assert response.json() == {"id": running.pk, "progress": 42.0, "fitted": False}
    job, stored = Job.objects.get(pk=running.pk), JobReport.objects.get()
    assert (job.progress, job.last_throughput, job.last_grad_noise_scale) == (42.0, 900.0, 1500.0)
    assert job.last_reported_at is not None and abs((timezone.now() - job.last_reported_at).total_seconds()) < 60
    assert (stored.gpus, stored.nodes, stored.batch_size, stored.grad_noise_scale) == (2, 1, 128, 1500.0)


def test_progress_never_goes_backwards(running: Job) -> None:
    report(running, progress=100.0, grad_noise_scale=800.0)
    report(running, progress=60.0, throughput=450.0)  # a late report from a restarted worker
    job = Job.objects.get(pk=running.pk)
    assert (job.progress, job.last_throughput, job.last_grad_noise_scale) == (100.0, 450.0, 800.0)
    assert sorted(JobReport.objects.values_list("progress", flat=True)) == [60.0, 100.0]


@pytest.mark.parametrize("token", ["", "wrong", "x" * 43])
def test_a_missing_or_wrong_token_is_403(running: Job, token: str) -> None:
    assert report(running, token=token).status_code == 403
    assert not JobReport.objects.exists()


def test_another_jobs_token_is_403(running: Job, other_job: Job) -> None:
    assert report(running, token=other_job.report_token).status_code == 403


def test_no_such_job_is_404(running: Job) -> None:
    response = APIClient().post("/api/jobs/999999/report/", {}, format="json", HTTP_X_JOB_TOKEN="x")
    assert response.status_code == 404


@pytest.mark.parametrize("state", [JobState.PENDING, JobState.PREEMPTED, JobState.SUCCEEDED, JobState.CANCELLED])
def test_only_running_jobs_report(running: Job, state: str) -> None:
    Job.objects.filter(pk=running.pk).update(state=state)
    response = report(running)
    assert response.status_code == 409 and list(response.json()) == ["state"]
    assert not JobReport.objects.exists()


def test_a_rescaling_job_reports(running: Job) -> None:
    Job.objects.filter(pk=running.pk).update(state=JobState.RESCALING)
    assert report(running).status_code == 201


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"progress": -1}, "progress"), ({"throughput": -5}, "throughput"), ({"batch_size": 0}, "batch_size"),
     ({"gpus": 0}, "gpus"), ({"nodes": 3, "gpus": 2}, "nodes"), ({"grad_noise_scale": -1}, "grad_noise_scale"),
     ({"throughput": None}, "throughput"), ({"progress": "inf"}, "progress")],
)
def test_report_errors_name_the_field(running: Job, changes: dict, field: str) -> None:
    body = {"progress": 1.0, "throughput": 1.0, "batch_size": 1, "gpus": 1, **changes}
    if body["throughput"] is None:
        del body["throughput"]
    response = APIClient().post(f"/api/jobs/{running.pk}/report/", body, format="json",
                                HTTP_X_JOB_TOKEN=running.report_token)
    assert response.status_code == 400 and list(response.json()) == [field], response.json()


def test_step_seconds_stand_in_for_throughput(running: Job) -> None:
    body = {"progress": 1.0, "step_seconds": 0.25, "batch_size": 256, "gpus": 2}
    APIClient().post(f"/api/jobs/{running.pk}/report/", body, format="json", HTTP_X_JOB_TOKEN=running.report_token)
    assert JobReport.objects.get().throughput == pytest.approx(1024.0)


# --- refit --------------------------------------------------------------------------------------

CONFIGS = [(1, 1, 128), (2, 1, 256), (4, 1, 512), (8, 2, 1024)]  # (GPUs, nodes, global batch)


def test_reports_from_a_job_twice_as_slow_as_its_profile_halve_its_model_speed(running: Job) -> None:
    profile = FITTED_PROFILES["cifar10"]["a100"]
    for n, (gpus, nodes, batch) in enumerate(CONFIGS):
        samples_per_s = float(profile.throughput(nodes, gpus, batch / gpus)[()]) / 2
        response = report(running, progress=n, throughput=samples_per_s, gpus=gpus, nodes=nodes, batch_size=batch,
                          grad_noise_scale=1000.0 + 100 * n)
        assert response.json()["fitted"] is (n + 1 >= 3)  # three distinct configurations are needed
    stored = Job.objects.get(pk=running.pk).fitted_model
    assert stored is not None and stored["reports"] == 4 and stored["noise_scale"] == pytest.approx(1150.0)
    fitted = job_models(stored)["a100"]
    gpus = np.array([1, 2, 4, 8, 16])
    nodes = np.ceil(gpus / 8)
    ratio = fitted.speed(nodes, gpus, 1000.0) / profile.speed(nodes, gpus, 1000.0)
    assert ratio == pytest.approx(0.5, rel=0.2)


def test_the_next_round_uses_the_refitted_model(running: Job) -> None:
    for gpus, nodes, batch in CONFIGS[:3]:
        report(running, gpus=gpus, nodes=nodes, batch_size=batch)
    jobs = build_snapshot(timezone.now()).snap.jobs
    assert [job.profile for job in jobs] == [f"job:{running.pk}"]


def test_wrong_tokens_never_spend_the_job_s_budget(running: Job, settings) -> None:
    """The report throttle ran before the token was checked and was keyed by the job's sequential id: requests with
    a wrong token spent the job's budget and the real worker got 429, its progress lost."""
    from django.core.cache import cache

    from scheduler.api.throttles import FailedCredentialsThrottle

    per_address = FailedCredentialsThrottle.cache_format % {"scope": FailedCredentialsThrottle.scope,
                                                            "ident": "127.0.0.1"}
    budget = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["job-report"].split("/")[0])
    for n in range(budget + 5):
        cache.delete(per_address)  # as if from many addresses: the job's own budget is what is tested
        assert report(running, token=f"guess-{n}").status_code == 403
    assert report(running, progress=11.0).status_code == 201  # the real worker still reports


def test_an_address_guessing_job_tokens_is_throttled(running: Job) -> None:
    codes = [report(running, token=f"guess-{n}").status_code for n in range(30)]
    assert codes[0] == 403 and codes[-1] == 429
