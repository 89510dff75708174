"""`manage.py submit_job` and `manage.py cancel_job`: the same verbs as the API, errors naming the option."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import Job, JobState, Tenant


def submit(*args: str) -> str:
    out = StringIO()
    call_command("submit_job", "--tenant", "vision", "--name", "resnet", "--profile", "cifar10", "--work", "100",
                 *args, stdout=out)
    return out.getvalue()


def test_submit_job_prints_the_id_and_the_report_token(tenant: Tenant) -> None:
    out = submit("--min-gpus", "2", "--max-gpus", "8", "--priority", "3", "--gpu-type", "V100",
                 "--batch-size", "512", "--command", "python train.py --epochs 3")
    job = Job.objects.get()
    assert re.search(rf"^job {job.pk} submitted$", out, re.M) and f"report token: {job.report_token}" in out
    assert (job.min_gpus, job.max_gpus, job.priority, job.gpu_type, job.batch_size, job.command) == (
        2, 8, 3, "v100", 512, "python train.py --epochs 3"
    )


def test_a_rerun_with_the_same_key_submits_nothing(tenant: Tenant) -> None:
    submit("--idempotency-key", "nightly-42")
    assert "already submitted" in submit("--idempotency-key", "nightly-42")
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tenant", "nobody"], "--tenant: Unknown tenant 'nobody'."),
        (["--min-gpus", "4", "--max-gpus", "2"], "--max-gpus: Max GPUs must be at least min GPUs."),
        (["--profile", "resnet9000"], "--profile: Unknown profile 'resnet9000'"),
        (["--work", "-5"], "--work: Ensure this value is greater than 0 and at most 1e+12."),
        (["--work", "nan"], "--work: Ensure this value is greater than 0 and at most 1e+12."),
        (["--work", "0"], "--work: Ensure this value is greater than 0 and at most 1e+12."),  # the API's rule too
        (["--min-gpus", "0"], "--min-gpus: Ensure this value is greater than or equal to 1."),
    ],
)
def test_submit_job_errors_name_the_option(tenant: Tenant, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        submit(*args)
    assert not Job.objects.exists()


def test_cancel_job(job: Job) -> None:
    out = StringIO()
    call_command("cancel_job", str(job.pk), "--reason", "bad data", stdout=out)
    assert out.getvalue().strip() == f"job {job.pk} (resnet) is cancelled"
    assert Job.objects.get(pk=job.pk).rescale_events.get().reason == "bad data"


def test_cancel_job_errors(job: Job) -> None:
    with pytest.raises(CommandError, match="no job with id 999999"):
        call_command("cancel_job", "999999")
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    with pytest.raises(CommandError, match="A succeeded job cannot become cancelled"):
        call_command("cancel_job", str(job.pk))
