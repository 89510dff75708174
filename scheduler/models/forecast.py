"""Forecasts of the live queue, and the runtime models they use (scheduler/forecasting/forecasts.py makes both)."""

from __future__ import annotations

from django.db import models

from .queue import Job


class Forecast(models.Model):
    """One run of the live cluster forward (``scheduler.sim.forecast``): when it was made and from what."""

    made_at = models.DateTimeField(db_index=True)
    policy = models.CharField(max_length=50)
    round_seconds = models.PositiveIntegerField()
    restart_seconds = models.FloatField()
    usable_gpus = models.PositiveIntegerField(help_text="healthy GPUs on schedulable nodes when it was made")
    jobs = models.PositiveIntegerField(help_text="jobs forecast")
    samples = models.PositiveSmallIntegerField(default=0, help_text="arrival samples (0: no arrivals, a point)")
    wall_ms = models.FloatField(help_text="time the forecast took")
    digest = models.CharField(max_length=64, help_text="the queue, inventory and settings it was made from")
    runtime_model = models.PositiveIntegerField(null=True, blank=True, help_text="version of the runtime model used")

    class Meta:
        ordering = ["-made_at", "-id"]
        get_latest_by = ["made_at", "id"]

    def __str__(self) -> str:
        return f"forecast of {self.jobs} jobs at {self.made_at:%Y-%m-%d %H:%M:%S}"


class JobForecast(models.Model):
    """One job's estimated start and finish in one forecast; ranges are p10–p90 over arrival samples."""

    forecast = models.ForeignKey(Forecast, on_delete=models.CASCADE, related_name="job_forecasts")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="forecasts")
    estimated_start = models.DateTimeField(null=True, blank=True, help_text="empty: running already, or never")
    estimated_finish = models.DateTimeField(null=True, blank=True, help_text="empty: not within the forecast")
    start_p10 = models.DateTimeField(null=True, blank=True)
    start_p90 = models.DateTimeField(null=True, blank=True)
    finish_p10 = models.DateTimeField(null=True, blank=True)
    finish_p90 = models.DateTimeField(null=True, blank=True)
    # What frees its GPUs (a waiting job): the job that finishes last before its start, and what that one held.
    after_job = models.ForeignKey(Job, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    after_gpus = models.CharField(max_length=100, blank=True, help_text="what that job frees, e.g. '24 A100s'")
    moved_because = models.CharField(max_length=255, blank=True, help_text="why it moved since the last forecast")

    class Meta:
        ordering = ["forecast", "job"]
        constraints = [models.UniqueConstraint(fields=["forecast", "job"], name="one_forecast_per_job_per_run")]
        indexes = [models.Index(fields=["job", "forecast"])]

    def __str__(self) -> str:
        return f"{self.job} in {self.forecast}"


class RuntimeModel(models.Model):
    """A trained runtime predictor (``scheduler.sim.runtimes``), versioned by its id; LightGBM's text format."""

    trained_at = models.DateTimeField()
    samples = models.PositiveIntegerField(help_text="finished jobs it learnt from")
    validation_mae_s = models.FloatField(null=True, blank=True, help_text="median absolute error on held-out jobs")
    model = models.TextField(help_text="the model as text (never a pickle)")

    class Meta:
        ordering = ["-id"]
        verbose_name = "runtime model"

    def __str__(self) -> str:
        return f"runtime model v{self.pk} ({self.samples} jobs, {self.trained_at:%Y-%m-%d %H:%M})"
