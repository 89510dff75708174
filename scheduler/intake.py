"""What arrives from outside the console: job submissions that survive retries, and workers' reports.

The same contract as ``services.py``: validate first, raise ``ValidationError`` naming the
field, write in one transaction. Used by the REST API (``scheduler/api/``) and the
``submit_job`` command.

Idempotency: a submission may carry a client key (the ``Idempotency-Key`` header). The
database holds at most one job per (tenant, key) — a unique constraint, so two retries
racing each other still store one job — and a repeated key returns the stored job.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from . import services
from .core.fitted_profiles import FITTED_PROFILES
from .models import ACTIVE_STATES, Job, JobReport, Tenant


class JobNotRunning(Exception):
    """A report arrived for a job that is not running (or rescaling)."""

    def __init__(self, state: str) -> None:
        super().__init__(f"Only a running or rescaling job reports progress; this one is {state}.")
        self.state = state


def submit_job_once(*, tenant: Tenant | str, workload_profile: str, client_key: str = "",
                    **fields: Any) -> tuple[Job, bool]:
    """Queue a job; ``(job, True)`` when stored now, ``(the stored job, False)`` for a repeated key.

    ``fields`` are ``services.new_job``'s. The profile must be one of ``FITTED_PROFILES``: a job submitted from
    outside says what it trains, so the scheduler can model its goodput.
    """
    tenant_row = services.tenant_named(tenant)
    if client_key and (stored := _keyed(tenant_row, client_key)):
        return stored, False
    if workload_profile not in FITTED_PROFILES:
        known = ", ".join(sorted(FITTED_PROFILES))
        raise ValidationError({"workload_profile": f"Unknown profile {workload_profile!r}; known: {known}."})
    job = services.new_job(tenant=tenant_row, workload_profile=workload_profile, client_key=client_key, **fields)
    try:
        with transaction.atomic():
            job.save()
    except IntegrityError:
        stored = _keyed(tenant_row, client_key) if client_key else None
        if stored is None:
            raise
        return stored, False  # a concurrent retry with the same key committed first
    return job, True


def _keyed(tenant: Tenant, client_key: str) -> Job | None:
    return Job.objects.filter(tenant=tenant, client_key=client_key).first()


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
    the field for a bad value.
    """
    at = at or timezone.now()
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state not in ACTIVE_STATES:
            raise JobNotRunning(job.state)
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
