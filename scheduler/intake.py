"""What arrives from outside the console: job submissions that survive retries, and workers' reports.

The same contract as ``services.py``: validate first, raise ``ValidationError`` naming the
field, write in one transaction. Used by the REST API (``scheduler/api/``) and the
``submit_job`` command.

Idempotency: a submission may carry a client key (the ``Idempotency-Key`` header). The
database holds at most one job per (tenant, key) — a unique constraint, so two retries
racing each other still store one job — and a repeated key returns the stored job.
"""

from __future__ import annotations

import math
from datetime import datetime

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from .core.fitted_profiles import FITTED_PROFILES
from .core.gpu_types import gpu_type_key
from .models import ACTIVE_STATES, Job, JobReport, Tenant
from .services import Actor


class JobNotRunning(Exception):
    """A report arrived for a job that is not running (or rescaling)."""

    def __init__(self, state: str) -> None:
        super().__init__(f"Only a running or rescaling job reports progress; this one is {state}.")
        self.state = state


def submit_job_once(
    *,
    tenant: Tenant | str,
    name: str,
    workload_profile: str,
    total_work: float,
    min_gpus: int = 1,
    max_gpus: int | None = None,
    priority: int = 0,
    gpu_type: str = "",
    batch_size: int | None = None,
    command: str = "",
    client_key: str = "",
    owner: Actor = None,
) -> tuple[Job, bool]:
    """Queue a job; ``(job, True)`` when stored now, ``(the stored job, False)`` for a repeated key.

    ``max_gpus`` defaults to ``min_gpus`` (a rigid job); ``gpu_type`` is normalised
    (``"A100"`` → ``"a100"``); the profile must be one of ``FITTED_PROFILES``.
    """
    tenant_row = _tenant(tenant)
    if client_key and (stored := _keyed(tenant_row, client_key)):
        return stored, False
    job = Job(
        tenant=tenant_row, owner=owner if isinstance(owner, User) else None, name=name,
        workload_profile=workload_profile, total_work=total_work, min_gpus=min_gpus,
        max_gpus=min_gpus if max_gpus is None else max_gpus, priority=priority,
        gpu_type=gpu_type_key(gpu_type) if gpu_type else "", batch_size=batch_size, command=command,
        client_key=client_key, submitted_at=timezone.now(),
    )
    _validate(job)
    try:
        with transaction.atomic():
            job.save()
    except IntegrityError:
        stored = _keyed(tenant_row, client_key) if client_key else None
        if stored is None:
            raise
        return stored, False  # a concurrent retry with the same key committed first
    return job, True


def _tenant(tenant: Tenant | str) -> Tenant:
    if isinstance(tenant, Tenant):
        return tenant
    try:
        return Tenant.objects.get(name=tenant)
    except Tenant.DoesNotExist:
        raise ValidationError({"tenant": f"Unknown tenant {tenant!r}."}) from None


def _keyed(tenant: Tenant, client_key: str) -> Job | None:
    return Job.objects.filter(tenant=tenant, client_key=client_key).first()


def _validate(job: Job) -> None:
    """Field checks, then the table's constraints except the key's (the insert decides that one).

    The check constraints the table enforces are checked first by hand, so that their
    errors name the field rather than the whole row.
    """
    known = ", ".join(sorted(FITTED_PROFILES))
    problems = {
        "workload_profile": (job.workload_profile not in FITTED_PROFILES,
                             f"Unknown profile {job.workload_profile!r}; known: {known}."),
        "total_work": (not 0 <= job.total_work < math.inf, "Total work must be a finite number ≥ 0."),
        "min_gpus": (job.min_gpus < 1, "A job needs at least one GPU (min GPUs ≥ 1)."),
        "max_gpus": (job.max_gpus < job.min_gpus, "Max GPUs must be at least min GPUs."),
    }
    errors = {field: message for field, (failed, message) in problems.items() if failed}
    if errors:
        raise ValidationError(errors)
    job.full_clean(validate_constraints=False)
    job.validate_constraints(exclude={"client_key"})


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
