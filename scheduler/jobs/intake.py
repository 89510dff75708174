"""What arrives from outside the console: job submissions that survive retries, and workers' reports.

The same contract as ``verbs.py``: validate first, raise ``ValidationError`` naming the
field, write in one transaction. Used by the REST API (``scheduler/api/``) and the
``submit_job`` command.

Idempotency: a submission may carry a client key (the ``Idempotency-Key`` header). The
database holds at most one job per (tenant, key) — a unique constraint, so two retries
racing each other still store one job — and a repeated key returns the stored job.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.models import ACTIVE_STATES, Allocation, Job, JobReport, Tenant

from . import verbs

PROGRESS_SLACK = 1e-6  # a last report may overshoot the total by rounding


class IdempotencyConflict(Exception):
    """A client key already stored with a different submission: the client reused a key for another job."""

    def __init__(self, client_key: str, job: Job) -> None:
        super().__init__(f"The idempotency key {client_key!r} was already used for a different submission "
                         f"(job #{job.pk}); use a new key for a new job.")
        self.client_key, self.job = client_key, job


class ReportContradicted(Exception):
    """A report that contradicts its job (more GPUs than it holds, progress beyond its total work)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field


class JobNotRunning(Exception):
    """A report arrived for a job that is not running (or rescaling)."""

    def __init__(self, state: str) -> None:
        super().__init__(f"Only a running or rescaling job reports progress; this one is {state}.")
        self.state = state


def submit_job_once(*, tenant: Tenant | str, workload_profile: str, client_key: str = "",
                    **fields: Any) -> tuple[Job, bool]:
    """Queue a job; ``(job, True)`` when stored now, ``(the stored job, False)`` for a repeated key.

    ``fields`` are ``verbs.new_job``'s. The profile must be one of ``FITTED_PROFILES``: a job submitted from
    outside says what it trains, so the scheduler can model its goodput. A key stored with a different
    submission raises ``IdempotencyConflict``.
    """
    tenant_row = verbs.tenant_named(tenant)
    digest = submission_digest(tenant_row, workload_profile, fields) if client_key else ""
    if client_key and (stored := _keyed(tenant_row, client_key, digest)):
        return stored, False
    if workload_profile not in FITTED_PROFILES:
        known = ", ".join(sorted(FITTED_PROFILES))
        raise ValidationError({"workload_profile": f"Unknown profile {workload_profile!r}; known: {known}."})
    job = verbs.new_job(tenant=tenant_row, workload_profile=workload_profile, client_key=client_key, **fields)
    job.submission_digest = digest
    try:
        with transaction.atomic():
            job.save()
            verbs.announce_submission()
    except IntegrityError:
        stored = _keyed(tenant_row, client_key, digest) if client_key else None
        if stored is None:
            raise
        return stored, False  # a concurrent retry with the same key committed first
    return job, True


SUBMITTED_FIELDS = ("name", "total_work", "min_gpus", "max_gpus", "priority", "gpu_type", "batch_size", "command",
                    "script_path", "expected_seconds")


def submission_digest(tenant: Tenant, workload_profile: str, fields: dict[str, Any]) -> str:
    """A hash of what was asked for, so a retry (same body) is told from a new job under a reused key."""
    asked = {name: fields.get(name) for name in SUBMITTED_FIELDS}
    asked["max_gpus"] = asked["max_gpus"] if asked["max_gpus"] is not None else asked["min_gpus"]
    canonical = json.dumps({"tenant": tenant.pk, "workload_profile": workload_profile, **asked}, sort_keys=True,
                           default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _keyed(tenant: Tenant, client_key: str, digest: str) -> Job | None:
    stored = Job.objects.filter(tenant=tenant, client_key=client_key).first()
    if stored is not None and stored.submission_digest and stored.submission_digest != digest:
        raise IdempotencyConflict(client_key, stored)
    return stored


def record_report(
    job: Job,
    *,
    progress: float,
    throughput: float,
    batch_size: int,
    gpus: int,
    nodes: int = 1,
    grad_noise_scale: float | None = None,
    at: datetime | None = None,
) -> Job:
    """Store a running job's report and update the job, in one transaction.

    Progress never goes backwards (a late report from a restarted worker keeps the
    higher value); a report without a noise scale keeps the last one. Raises
    ``JobNotRunning`` unless the job is running or rescaling, ``ValidationError`` naming
    the field for a bad value, ``ReportContradicted`` for a report its job's state refutes.
    """
    at = at or timezone.now()
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state not in ACTIVE_STATES:
            raise JobNotRunning(job.state)
        _check_consistent(job, progress, gpus)
        report = JobReport(job=job, at=at, progress=progress, throughput=throughput, batch_size=batch_size,
                           gpus=gpus, nodes=nodes, grad_noise_scale=grad_noise_scale)
        report.full_clean()
        report.save()
        job.progress = max(job.progress, progress)
        job.last_throughput, job.last_reported_at = throughput, at
        if grad_noise_scale is not None:
            job.last_grad_noise_scale = grad_noise_scale
        job.save(update_fields=["progress", "last_throughput", "last_grad_noise_scale", "last_reported_at"])
    return job


def _check_consistent(job: Job, progress: float, gpus: int) -> None:
    """A report may not claim more GPUs than the job holds now, nor more work than the job has."""
    held = Allocation.objects.filter(job=job, ended_at__isnull=True).count()
    if gpus > held:
        raise ReportContradicted("gpus", f"The job holds {held} GPU{'s' if held != 1 else ''}; "
                                         f"a report cannot say it ran on {gpus}.")
    if progress > job.total_work * (1 + PROGRESS_SLACK):
        raise ReportContradicted("progress", f"Progress {progress:g} is beyond the job's total work "
                                             f"{job.total_work:g}.")
