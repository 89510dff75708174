"""Tenants, the GPU inventory, jobs and their allocations.

The database enforces what it can (check and partial unique constraints), so an
invariant holds even when Python-side validation is bypassed. Verbs that span rows or
open transactions live in ``scheduler/jobs/`` (the queue) and ``scheduler/inventory.py`` (nodes and GPUs).
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q

from .. import bounds


class TenantQuerySet(models.QuerySet["Tenant"]):
    def visible_to(self, user: User | AnonymousUser) -> TenantQuerySet:
        """The one rule of tenancy: staff see every tenant, others only those they belong to."""
        if user.is_staff:
            return self
        return self.filter(members__pk=user.pk) if user.is_authenticated else self.none()


class Tenant(models.Model):
    """A team: guaranteed GPUs (quota) and a fair-share weight; may borrow idle GPUs."""

    name = models.CharField(max_length=100, unique=True)
    gpu_quota = models.PositiveIntegerField(default=0, validators=[MaxValueValidator(bounds.MAX_GPUS)],
                                            help_text="GPUs guaranteed to this tenant")
    fair_share_weight = models.FloatField(
        default=1.0, validators=[MinValueValidator(0.0)], help_text="relative weight when sharing"
    )
    max_priority = models.IntegerField(
        default=bounds.DEFAULT_TENANT_MAX_PRIORITY,
        validators=[MinValueValidator(bounds.PRIORITY_RANGE[0]), MaxValueValidator(bounds.PRIORITY_RANGE[1])],
        help_text="the highest priority the tenant's members may give their own jobs; operators may give any",
    )
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="tenants")

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(fair_share_weight__gt=0), name="tenant_weight_positive"),
        ]

    def __str__(self) -> str:
        return self.name


# A Unix user name as useradd takes it (Debian's default NAME_REGEX, without the trailing $ of machine accounts).
LOGIN_NAME = RegexValidator(r"^[a-z_][a-z0-9_-]{0,31}\Z", "A cluster login is a Unix user name: at most 32 lower-case "
                            "letters, digits, _ and -, starting with a letter or _.")


class ClusterLogin(models.Model):
    """The cluster user a console user's jobs run as (on Slurm: the job's owner in ``squeue`` and ``sacct``);
    without a row, the console username."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cluster_login")
    login = models.CharField(max_length=32, validators=[LOGIN_NAME],
                             help_text="the Unix user on the cluster this console user's jobs run as")

    class Meta:
        ordering = ["user__username"]

    def __str__(self) -> str:
        return f"{self.user} → {self.login}"


def cluster_login(user: User) -> str:
    """The cluster user ``user``'s jobs run as: their ``ClusterLogin``, else their username."""
    login = ClusterLogin.objects.filter(user=user).values_list("login", flat=True).first()
    return login or user.username


class Node(models.Model):
    """A machine with GPUs; cordoned nodes get no new allocations."""

    hostname = models.CharField(max_length=255, unique=True)
    schedulable = models.BooleanField(default=True, help_text="untick to cordon the node")
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname


class GpuHealth(models.TextChoices):
    OK = "ok", "ok"
    DEGRADED = "degraded", "degraded"
    LOST = "lost", "lost"


class Gpu(models.Model):
    """One GPU of a node, keyed by its NVML UUID."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(help_text="NVML index on its node")
    uuid = models.CharField("UUID", max_length=64, unique=True)
    model = models.CharField(max_length=100, help_text="e.g. NVIDIA A100-SXM4-80GB")
    memory_mib = models.PositiveIntegerField("memory (MiB)")
    power_limit_w = models.PositiveIntegerField("power limit (W)")
    power_min_w = models.PositiveIntegerField("lowest settable limit (W)", null=True, blank=True)
    power_max_w = models.PositiveIntegerField("highest settable limit (W)", null=True, blank=True)
    power_default_w = models.PositiveIntegerField("default limit (W)", null=True, blank=True)
    mig_parent_uuid = models.CharField(
        "MIG parent UUID", max_length=64, blank=True, help_text="for a MIG instance: its physical GPU"
    )
    health = models.CharField(max_length=10, choices=GpuHealth.choices, default=GpuHealth.OK)
    health_changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node__hostname", "index"]
        verbose_name = "GPU"
        constraints = [
            models.UniqueConstraint(
                fields=["node", "index"],
                name="gpu_index_unique_per_node",
                violation_error_message="This node already has a GPU with this index.",
            ),
            models.CheckConstraint(condition=Q(memory_mib__gt=0), name="gpu_memory_positive"),
            models.CheckConstraint(condition=Q(power_limit_w__gt=0), name="gpu_power_limit_positive"),
            models.CheckConstraint(condition=Q(health__in=GpuHealth.values), name="gpu_health_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname}/gpu{self.index}"


class JobState(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    RESCALING = "rescaling", "rescaling"
    PREEMPTED = "preempted", "preempted"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


# pending → running ⇄ rescaling → succeeded | failed | cancelled; preempted → running (resumes
# from its checkpoint) or pending (an operator requeued it).
# Failed and cancelled jobs may be requeued by an operator.
JOB_TRANSITIONS: dict[str, frozenset[str]] = {
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
    JobState.RUNNING: frozenset(
        {JobState.RESCALING, JobState.PREEMPTED, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
    ),
    JobState.RESCALING: frozenset({JobState.RUNNING, JobState.PREEMPTED, JobState.FAILED, JobState.CANCELLED}),
    JobState.PREEMPTED: frozenset({JobState.PENDING, JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset({JobState.PENDING}),
    JobState.CANCELLED: frozenset({JobState.PENDING}),
}
ACTIVE_STATES = frozenset({JobState.RUNNING, JobState.RESCALING})
QUEUED_STATES = frozenset({JobState.PENDING, JobState.PREEMPTED})
SCHEDULABLE_STATES = ACTIVE_STATES | QUEUED_STATES  # the jobs a round looks at
FINISHED_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


def new_report_token() -> str:
    return secrets.token_urlsafe(32)


class JobQuerySet(models.QuerySet["Job"]):
    def visible_to(self, user: User | AnonymousUser) -> JobQuerySet:
        """Jobs of the tenants ``user`` may see (``TenantQuerySet.visible_to``)."""
        return self if user.is_staff else self.filter(tenant__in=Tenant.objects.visible_to(user))


class Job(models.Model):
    """A training job in the queue; elastic when ``min_gpus < max_gpus``."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="jobs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs"
    )
    name = models.CharField(max_length=200)
    workload_profile = models.CharField(
        max_length=100, help_text="the fitted throughput profile the goodput model uses, e.g. cifar10 or bert"
    )
    total_work = models.FloatField(
        validators=[MaxValueValidator(bounds.MAX_TOTAL_WORK)],  # ≥ 0: the check constraint, with its message
        help_text="work to completion, in the profile's units (samples)",
    )
    min_gpus = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1),
                                                                  MaxValueValidator(bounds.MAX_GPUS)])
    max_gpus = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1),
                                                                  MaxValueValidator(bounds.MAX_GPUS)])
    priority = models.IntegerField(
        default=0,
        validators=[MinValueValidator(bounds.PRIORITY_RANGE[0]), MaxValueValidator(bounds.PRIORITY_RANGE[1])],
        help_text="higher runs first where a policy honours it",
    )
    state = models.CharField(max_length=10, choices=JobState.choices, default=JobState.PENDING)
    submitted_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    progress = models.FloatField(default=0.0, help_text="work done so far, same units as total work")
    attained_gpu_seconds = models.FloatField(default=0.0)
    restarts = models.PositiveIntegerField(default=0)
    last_throughput = models.FloatField(null=True, blank=True, help_text="samples/s last reported")
    last_grad_noise_scale = models.FloatField(null=True, blank=True)
    last_reported_at = models.DateTimeField(null=True, blank=True)
    gpu_type = models.CharField(max_length=20, blank=True, help_text="GPU type it needs (a100, v100, …); empty: any")
    batch_size = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(bounds.MAX_BATCH_SIZE)],
        help_text="global batch size asked for; empty lets the scheduler tune it",
    )
    policy_batch_size = models.PositiveIntegerField(
        null=True, blank=True, editable=False,
        help_text="the global batch the policy chose for its current allocation (Pollux, Sia); empty: its own",
    )
    command = models.TextField(
        blank=True, validators=[MaxLengthValidator(bounds.MAX_COMMAND_LENGTH)],
        help_text="command line the local executor runs for each worker",
    )
    script_path = models.CharField(
        max_length=500, blank=True,
        help_text="on Slurm: the batch script to run, a file under SLURM_SCRIPT_DIR (else the command is run)",
    )
    cluster_job_id = models.CharField(
        max_length=50, blank=True, default="", db_index=True,
        help_text="the job's id in the cluster manager (Slurm's job id); empty until it is submitted there",
    )
    expected_seconds = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(1.0), MaxValueValidator(bounds.MAX_EXPECTED_SECONDS)],
        help_text="how long it runs once started, in seconds, as its owner expects (a time limit); empty: predicted",
    )
    predicted_seconds = models.FloatField(
        null=True, blank=True, editable=False,
        help_text="how long it runs once started, as the runtime predictor expects (jobs without a profile)",
    )
    # What the cluster manager says of a job it scheduled itself (mirrored by an observer): empty on the console's.
    cluster_user = models.CharField(
        max_length=64, blank=True, default="", editable=False,
        help_text="the cluster user it runs as, for a job the cluster manager scheduled (Slurm's user name)",
    )
    cluster_priority = models.BigIntegerField(
        null=True, blank=True, editable=False,
        help_text="the cluster manager's own priority of a job it scheduled (Slurm's); higher starts first",
    )
    time_limit_seconds = models.FloatField(
        null=True, blank=True, editable=False,
        validators=[MinValueValidator(1.0), MaxValueValidator(bounds.MAX_EXPECTED_SECONDS)],
        help_text="the cluster manager's time limit of a job it scheduled, in seconds; empty: none",
    )
    pending_reason = models.CharField(max_length=255, blank=True, help_text="why the last round left it waiting")
    error = models.TextField(blank=True, help_text="why it failed")
    # The round bumps ``generation`` whenever the job's GPUs change; the executor sets
    # ``launched_generation`` once it has acted on it, so a launch lost to a crash is resent.
    generation = models.PositiveIntegerField(default=0)
    launched_generation = models.PositiveIntegerField(default=0)
    accounted_at = models.DateTimeField(
        null=True, blank=True, help_text="progress and GPU time are counted up to here"
    )
    restart_until = models.DateTimeField(
        null=True, blank=True, help_text="restarting (loading its checkpoint) until then: no progress"
    )
    report_token = models.CharField(
        max_length=64, default=new_report_token, editable=False,
        help_text="secret the job's workers send with their progress reports",
    )
    fitted_model = models.JSONField(
        null=True, blank=True, help_text="goodput model refitted from the job's own reports"
    )
    client_key = models.CharField(
        max_length=255, blank=True, default="",
        help_text="the submitting client's idempotency key: a retried submission returns this job",
    )
    submission_digest = models.CharField(
        max_length=64, blank=True, default="", editable=False,
        help_text="hash of what was submitted under the client key: the same key with another body is refused",
    )

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["submitted_at", "id"]
        # The queue in order; and arrivals over a window (forecasts.arrival_window, whatever the state).
        indexes = [models.Index(fields=["state", "submitted_at"]), models.Index(fields=["submitted_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(min_gpus__gte=1), name="job_min_gpus_at_least_one",
                violation_error_message="A job needs at least one GPU (min GPUs ≥ 1).",
            ),
            models.CheckConstraint(
                condition=Q(max_gpus__gte=F("min_gpus")), name="job_max_gpus_not_below_min",
                violation_error_message="Max GPUs must be at least min GPUs.",
            ),
            models.CheckConstraint(
                condition=Q(total_work__gte=0), name="job_total_work_non_negative",
                violation_error_message="Total work cannot be negative.",
            ),
            models.CheckConstraint(condition=Q(progress__gte=0), name="job_progress_non_negative"),
            models.CheckConstraint(
                condition=Q(total_work__lte=bounds.MAX_TOTAL_WORK) & Q(progress__lte=bounds.MAX_TOTAL_WORK),
                name="job_work_bounded",
            ),
            models.CheckConstraint(  # an infinite throughput once made every job list unrenderable as JSON
                condition=Q(last_throughput__isnull=True) | Q(last_throughput__lte=bounds.MAX_THROUGHPUT),
                name="job_last_throughput_bounded",
            ),
            models.CheckConstraint(
                condition=Q(attained_gpu_seconds__gte=0), name="job_attained_gpu_seconds_non_negative"
            ),
            models.CheckConstraint(condition=Q(state__in=JobState.values), name="job_state_valid"),
            models.CheckConstraint(
                condition=Q(expected_seconds__isnull=True) | (
                    Q(expected_seconds__gte=1) & Q(expected_seconds__lte=bounds.MAX_EXPECTED_SECONDS)),
                name="job_expected_seconds_bounded",
                violation_error_message="Expected seconds must be between 1 and a year.",
            ),
            models.UniqueConstraint(
                fields=["tenant", "client_key"], condition=~Q(client_key=""), name="job_client_key_unique_per_tenant",
                violation_error_message="This tenant already has a job with this idempotency key.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def elastic(self) -> bool:
        return self.min_gpus < self.max_gpus

    def can_become(self, state: str) -> bool:
        return state in JOB_TRANSITIONS[self.state]


class Allocation(models.Model):
    """A job held a GPU from ``started_at`` until ``ended_at`` (open while NULL)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="allocations")
    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT, related_name="allocations")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu"], condition=Q(ended_at__isnull=True), name="one_open_allocation_per_gpu",
                violation_error_message="This GPU is already allocated.",
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=F("started_at")),
                name="allocation_ends_after_start",
            ),
        ]
        # Who held this GPU at time t (telemetry attributes every sample to a job); the GPU-hour ledger's spans
        # (allocations overlapping [start, end)) and the cluster's first allocation (telemetry/ledger.py).
        indexes = [models.Index(fields=["gpu", "ended_at"]), models.Index(fields=["started_at"]),
                   models.Index(fields=["ended_at"])]

    def __str__(self) -> str:
        return f"{self.job} on {self.gpu}"
