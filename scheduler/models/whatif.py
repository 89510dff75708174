"""What-if runs and sweeps: simulations of the cluster under other policies, caps and loads."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q


class WhatIfStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


WHATIF_FINISHED = frozenset({WhatIfStatus.SUCCEEDED, WhatIfStatus.FAILED, WhatIfStatus.CANCELLED})


class WhatIfSweep(models.Model):
    """A family of what-if runs (policies × power caps × load factors) compared side by side."""

    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="whatif_sweeps"
    )
    comparison = models.JSONField(null=True, blank=True, help_text="filled when every run has finished")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "what-if sweep"

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"


class WhatIfRun(models.Model):
    """One replay of a trace through the simulator (``scheduler.sim.runner.Scenario``) and its summary."""

    scenario = models.JSONField(help_text="Scenario.as_dict()")
    sweep = models.ForeignKey(WhatIfSweep, on_delete=models.CASCADE, null=True, blank=True, related_name="runs")
    status = models.CharField(max_length=10, choices=WhatIfStatus.choices, default=WhatIfStatus.QUEUED)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    progress = models.FloatField(default=0.0, help_text="fraction of the trace's jobs finished, 0..1")
    summary = models.JSONField(null=True, blank=True, help_text="the simulator's summary metrics")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="whatif_runs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="last sign of life of the worker running it; a stale one is taken over"
    )
    celery_task_id = models.CharField(max_length=255, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True, help_text="last sent to the workers; resent if still queued")
    attempts = models.PositiveSmallIntegerField(default=0, help_text="times a worker took it up")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "what-if run"
        constraints = [
            models.CheckConstraint(condition=Q(status__in=WhatIfStatus.values), name="whatif_status_valid"),
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=1), name="whatif_progress_in_unit_interval",
                violation_error_message="Progress is a fraction between 0 and 1.",
            ),
            models.CheckConstraint(
                condition=(
                    Q(finished_at__isnull=True) | Q(started_at__isnull=True) | Q(finished_at__gte=F("started_at"))
                ),
                name="whatif_finishes_after_start",
            ),
        ]

    def __str__(self) -> str:
        return f"what-if #{self.pk} ({self.policy}, {self.status})"

    @property
    def policy(self) -> str:
        return str(self.scenario.get("policy", ""))

    @property
    def finished(self) -> bool:
        return self.status in WHATIF_FINISHED
