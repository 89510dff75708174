"""Verbs on the job queue, each in one transaction of its own (the GPU inventory's are in ``inventory``).

Every verb validates first and writes in one transaction, so bad input raises
``django.core.exceptions.ValidationError`` naming the field and leaves nothing
half-written. Verbs that find the job already in the target state return early.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduler import bounds
from scheduler.backends import get_backend
from scheduler.core.gpu_types import gpu_type_key
from scheduler.inventory import check_fits_inventory
from scheduler.live.config import scheduler_settings
from scheduler.live.forecast_requests import request_forecast
from scheduler.live.start_requests import request_start
from scheduler.models import (
    ACTIVE_STATES,
    Allocation,
    Job,
    JobState,
    RescaleEvent,
    RescaleKind,
    Tenant,
)

Actor = User | AnonymousUser | None  # who asked: an operator, or None for the scheduler


# --- jobs ---------------------------------------------------------------------------


def submit_job(**fields: Any) -> Job:
    """Queue a new job: ``new_job(**fields)``, saved."""
    job = new_job(**fields)
    job.save()
    announce_submission()
    return job


def announce_submission() -> None:
    """What a job just queued asks for, once the transaction commits: a start between rounds (idle GPUs take it
    now, not at the next round) and a fresh forecast."""
    request_start("a submission")
    request_forecast("a submission")


def new_job(
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
    script_path: str = "",
    client_key: str = "",
    owner: Actor = None,
    submitted_at: datetime | None = None,
    expected_seconds: float | None = None,
) -> Job:
    """A validated, unsaved job: ``submit_job`` saves it, ``intake.submit_job_once`` saves it under its key.

    ``max_gpus`` defaults to ``min_gpus`` (a rigid job); ``gpu_type`` is normalised (``"A100"`` → ``"a100"``).
    Every constraint of the table is checked except the client key's uniqueness, which only the insert can decide
    when two submissions race.
    """
    job = Job(
        tenant=tenant_named(tenant), owner=_user(owner), name=name, workload_profile=workload_profile,
        total_work=total_work, min_gpus=min_gpus, max_gpus=min_gpus if max_gpus is None else max_gpus,
        priority=priority, gpu_type=gpu_type_key(gpu_type) if gpu_type else "", batch_size=batch_size,
        command=command, script_path=script_path, client_key=client_key,
        submitted_at=submitted_at or timezone.now(), expected_seconds=expected_seconds,
    )
    _validate_new_job(job)
    return job


def _validate_new_job(job: Job) -> None:
    """Field checks, then the table's constraints except the client key's, then whether it fits the inventory.

    The check constraints the table enforces are checked first by hand, so that their errors name the field
    rather than the whole row.
    """
    problems = {
        # A job of no work would "succeed" in its first second: it is refused, as by the API.
        "total_work": (not 0 < job.total_work <= bounds.MAX_TOTAL_WORK, TOTAL_WORK_RULE),
        "min_gpus": (job.min_gpus < 1, AT_LEAST_ONE_GPU),
        "max_gpus": (job.max_gpus < job.min_gpus, MAX_BELOW_MIN),
    }
    errors = {field: message for field, (failed, message) in problems.items() if failed}
    if errors:
        raise ValidationError(errors)
    job.full_clean(validate_constraints=False)
    job.validate_constraints(exclude={"client_key"})
    check_fits_inventory(job.gpu_type, job.min_gpus, job.max_gpus)
    check_priority_allowed(job.tenant, job.priority, job.owner)
    _check_cluster(job)


# The messages of the rules the services check by hand, worded as the validators word the same rules elsewhere.
TOTAL_WORK_RULE = f"Ensure this value is greater than 0 and at most {bounds.MAX_TOTAL_WORK:g}."
AT_LEAST_ONE_GPU = "Ensure this value is greater than or equal to 1."
MAX_BELOW_MIN = "Max GPUs must be at least min GPUs."


def check_job_change(job: Job, min_gpus: int, max_gpus: int, priority: int, gpu_type: str, actor: Actor) -> None:
    """``ValidationError`` naming the field when ``set_gpu_bounds``, ``set_priority`` or a new GPU type would refuse
    these values for ``job``: for a form to show before it saves anything."""
    if max_gpus < min_gpus:
        raise ValidationError({"max_gpus": MAX_BELOW_MIN})
    check_fits_inventory(gpu_type, min_gpus, max_gpus)
    check_priority_allowed(job.tenant, priority, actor)


def check_priority_allowed(tenant: Tenant, priority: int, actor: Actor) -> None:
    """A tenant's member may give their own jobs at most the tenant's ``max_priority``; operators (staff) and
    the service itself (no actor) any priority in range: priorities order jobs across tenants."""
    user = actor if isinstance(actor, User) else None
    if user is None or user.is_staff or priority <= tenant.max_priority:
        return
    raise ValidationError({"priority": f"Ensure this value is less than or equal to {tenant.max_priority} (the "
                                       f"highest priority {tenant.name}'s members may give; operators set it)."})


def _check_cluster(job: Job) -> None:
    """What the cluster's back-end must accept (on Slurm: a script from the allowed folder and a known account)."""
    get_backend(scheduler_settings().executor).check_submission(job)


def cancel_job(job: Job, *, actor: Actor = None, reason: str = "cancelled by operator") -> Job:
    """Cancel a queued or running job, releasing its GPUs."""
    with transaction.atomic():
        job = _locked(job)
        if job.state == JobState.CANCELLED:
            return job
        _require_transition(job, JobState.CANCELLED)
        now = timezone.now()
        released = _release_gpus(job, now)
        job.state, job.finished_at = JobState.CANCELLED, now
        job.save(update_fields=["state", "finished_at", "generation"])
        _record(job, RescaleKind.CANCEL, released, 0, reason, actor, now)
        if released:  # its GPUs are idle now: a waiting job need not wait for the round
            request_start("a cancel")
        request_forecast("a cancel")
    return job


def requeue_job(job: Job, *, actor: Actor = None, reason: str = "requeued by operator") -> Job:
    """Put a job back in the queue: preempts it if it runs; keeps its progress (checkpoint)."""
    with transaction.atomic():
        job = _locked(job)
        if job.state == JobState.PENDING:
            return job
        if job.state in ACTIVE_STATES:
            job.state = JobState.PREEMPTED
        _require_transition(job, JobState.PENDING)
        now = timezone.now()
        released = _release_gpus(job, now)
        job.state, job.finished_at = JobState.PENDING, None
        job.save(update_fields=["state", "finished_at", "generation"])
        _record(job, RescaleKind.REQUEUE, released, 0, reason, actor, now)
        request_forecast("a requeue")
    return job


def set_priority(job: Job, priority: int, *, actor: Actor = None) -> Job:
    with transaction.atomic():
        job = _locked(job)
        if job.priority == priority:
            return job
        reason = f"priority {job.priority} → {priority}"
        job.priority = priority
        job.full_clean()
        check_priority_allowed(job.tenant, priority, actor)
        job.save(update_fields=["priority"])
        _record_settings_change(job, reason, actor)
    return job


def set_gpu_bounds(job: Job, min_gpus: int, max_gpus: int, *, actor: Actor = None) -> Job:
    """Change a job's GPU range; a running job is resized by the next round, not here."""
    with transaction.atomic():
        job = _locked(job)
        if (job.min_gpus, job.max_gpus) == (min_gpus, max_gpus):
            return job
        reason = f"GPU bounds {job.min_gpus}..{job.max_gpus} → {min_gpus}..{max_gpus}"
        job.min_gpus, job.max_gpus = min_gpus, max_gpus
        job.full_clean()
        check_fits_inventory(job.gpu_type, min_gpus, max_gpus)
        job.save(update_fields=["min_gpus", "max_gpus"])
        _record_settings_change(job, reason, actor)
        request_forecast("new GPU bounds")
    return job


def tenant_named(tenant: Tenant | str) -> Tenant:
    """``tenant`` itself, or the tenant of that name; a ValidationError on ``tenant`` if there is none."""
    if isinstance(tenant, Tenant):
        return tenant
    try:
        return Tenant.objects.get(name=tenant)
    except Tenant.DoesNotExist:
        raise ValidationError({"tenant": f"Unknown tenant {tenant!r}."}) from None


def _user(actor: Actor) -> User | None:
    return actor if isinstance(actor, User) else None


def _locked(job: Job) -> Job:
    return Job.objects.select_for_update().get(pk=job.pk)


def _require_transition(job: Job, state: str) -> None:
    if not job.can_become(state):
        raise ValidationError({"state": f"A {job.state} job cannot become {state}."})


def _release_gpus(job: Job, now: datetime) -> int:
    """Close the job's open allocations; returns how many GPUs it held.

    A job that held GPUs moves to a new generation, so the executor is told to stop it
    (``scheduler.backends``); the caller saves the job.
    """
    released = Allocation.objects.filter(job=job, ended_at__isnull=True).update(ended_at=now)
    if released:
        job.generation += 1
    return released


def _record_settings_change(job: Job, reason: str, actor: Actor) -> None:
    held = Allocation.objects.filter(job=job, ended_at__isnull=True).count()
    _record(job, RescaleKind.SETTINGS, held, held, reason, actor, timezone.now())


def _record(
    job: Job, kind: str, from_gpus: int, to_gpus: int, reason: str, actor: Actor, at: datetime
) -> RescaleEvent:
    return RescaleEvent.objects.create(
        job=job, kind=kind, from_gpus=from_gpus, to_gpus=to_gpus, reason=reason,
        actor=_user(actor), at=at,
    )
