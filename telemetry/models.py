"""GPU telemetry: raw samples, their per-minute and per-hour rollups, events and power caps.

Raw samples are kept ``TELEMETRY_RAW_DAYS`` (default 7), minute rollups
``TELEMETRY_MINUTE_DAYS`` (30) and hour rollups ``TELEMETRY_HOUR_DAYS`` (365). Dashboards
and reports read rollups, never raw samples, beyond the last hour.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q

from scheduler.models import Gpu, Job

from .readings import EventKind


class GpuSample(models.Model):
    """One reading of one GPU (``readings.GpuReading``); NULL where the GPU does not support a metric."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    simulated = models.BooleanField(default=False, help_text="derived from allocations, not measured")
    job = models.ForeignKey(
        Job, on_delete=models.SET_NULL, null=True, blank=True, related_name="gpu_samples",
        help_text="the job holding the GPU when it was read",
    )
    gpu_util = models.FloatField("GPU utilisation (%)", null=True, blank=True)
    mem_util = models.FloatField("memory utilisation (%)", null=True, blank=True)
    mem_used_mib = models.FloatField("memory used (MiB)", null=True, blank=True)
    mem_total_mib = models.FloatField("memory total (MiB)", null=True, blank=True)
    power_w = models.FloatField("power (W)", null=True, blank=True)
    energy_j = models.FloatField("energy counter (J)", null=True, blank=True)
    temperature_c = models.FloatField("temperature (°C)", null=True, blank=True)
    sm_clock_mhz = models.FloatField("SM clock (MHz)", null=True, blank=True)
    power_limit_w = models.FloatField("power limit (W)", null=True, blank=True)
    processes = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["gpu", "at"]), models.Index(fields=["at"])]

    def __str__(self) -> str:
        return f"{self.gpu_id} at {self.at:%Y-%m-%d %H:%M:%S}"


class Rollup(models.Model):
    """Aggregates of one GPU over one bucket (a minute or an hour) starting at ``start``.

    ``allocated_seconds``: time a job held the GPU; ``idle_allocated_seconds``: of that, time
    its utilisation was below the idle threshold. ``energy_j`` comes from counter deltas
    (a negative delta is a counter reset, not negative energy), else from integrating power.
    """

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="+")
    start = models.DateTimeField()
    samples = models.PositiveIntegerField(default=0)
    simulated = models.BooleanField(default=False)
    gpu_util_avg = models.FloatField(null=True, blank=True)
    gpu_util_max = models.FloatField(null=True, blank=True)
    mem_used_mib_avg = models.FloatField(null=True, blank=True)
    power_w_avg = models.FloatField(null=True, blank=True)
    power_w_max = models.FloatField(null=True, blank=True)
    temperature_c_max = models.FloatField(null=True, blank=True)
    energy_j = models.FloatField(default=0.0)
    allocated_seconds = models.FloatField(default=0.0)
    idle_allocated_seconds = models.FloatField(default=0.0)

    class Meta:
        abstract = True
        ordering = ["-start"]


class GpuMinute(Rollup):
    class Meta(Rollup.Meta):
        constraints = [models.UniqueConstraint(fields=["gpu", "start"], name="gpuminute_one_per_gpu_and_minute")]
        indexes = [models.Index(fields=["start"])]

    def __str__(self) -> str:
        return f"GPU {self.gpu_id}, minute {self.start:%Y-%m-%d %H:%M}"


class GpuHour(Rollup):
    class Meta(Rollup.Meta):
        constraints = [models.UniqueConstraint(fields=["gpu", "start"], name="gpuhour_one_per_gpu_and_hour")]
        indexes = [models.Index(fields=["start"])]

    def __str__(self) -> str:
        return f"GPU {self.gpu_id}, hour {self.start:%Y-%m-%d %H:00}"


class ScopeMinute(models.Model):
    """One minute of a whole scope: the cluster (``"cluster"``), a node (``"node:<id>"``) or a tenant's jobs
    (``"tenant:<id>"``). Written with the GPU minutes (``telemetry.rollups``), so a 48-hour view of a scope reads
    2,880 rows instead of every GPU's minutes.

    ``gpus``: GPUs that reported in the minute (a tenant's: the GPUs its jobs held); ``gpu_util_avg``: the mean of
    their minute means (a tenant's: of its jobs' samples); ``power_w``: the sum of their mean power; the seconds and
    energy are sums over the scope's GPUs, as in ``Rollup``.
    """

    scope = models.CharField(max_length=40)
    start = models.DateTimeField()
    gpus = models.PositiveIntegerField(default=0)
    gpu_util_avg = models.FloatField(null=True, blank=True)
    power_w = models.FloatField(null=True, blank=True)
    energy_j = models.FloatField(default=0.0)
    allocated_seconds = models.FloatField(default=0.0)
    idle_allocated_seconds = models.FloatField(default=0.0)

    class Meta:
        ordering = ["scope", "start"]
        constraints = [models.UniqueConstraint(fields=["scope", "start"], name="scopeminute_one_per_scope_and_minute")]
        indexes = [models.Index(fields=["start"])]

    def __str__(self) -> str:
        return f"{self.scope}, minute {self.start:%Y-%m-%d %H:%M}"


class JobUsage(models.Model):
    """A job's GPU time in one bucket starting at ``start``: held, idle while held, and energy; tenants sum their
    jobs."""

    start = models.DateTimeField()
    allocated_seconds = models.FloatField(default=0.0, help_text="GPU-seconds held")
    idle_allocated_seconds = models.FloatField(default=0.0, help_text="GPU-seconds held while idle")
    energy_j = models.FloatField(default=0.0)

    class Meta:
        abstract = True
        ordering = ["-start"]


class JobUsageHour(JobUsage):
    """A job's hour: what the curves of a tenant read, and the ledger before the job minutes kept."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="usage_hours")

    class Meta(JobUsage.Meta):
        constraints = [models.UniqueConstraint(fields=["job", "start"], name="jobusagehour_one_per_job_and_hour")]
        indexes = [models.Index(fields=["start"])]

    def __str__(self) -> str:
        return f"job {self.job_id}, hour {self.start:%Y-%m-%d %H:00}"


class JobUsageMinute(JobUsage):
    """A job's minute: what the GPU-hour ledger (``telemetry.ledger``) reads for idle time and energy, so that a
    period ending mid-hour is counted to the minute. Kept as long as minute rollups."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="usage_minutes")

    class Meta(JobUsage.Meta):
        constraints = [models.UniqueConstraint(fields=["job", "start"], name="jobusageminute_one_per_job_and_minute")]
        indexes = [models.Index(fields=["start"])]

    def __str__(self) -> str:
        return f"job {self.job_id}, minute {self.start:%Y-%m-%d %H:%M}"


class Severity(models.TextChoices):
    INFO = "info", "info"
    WARNING = "warning", "warning"
    CRITICAL = "critical", "critical"


class GpuEvent(models.Model):
    """Something that happened to a GPU: an XID error, lost/recovered, a collection error, a power cap."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    kind = models.CharField(max_length=20, choices=[(k.value, k.value) for k in EventKind])
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.INFO)
    code = models.IntegerField(null=True, blank=True, help_text="XID number")
    message = models.TextField()
    acknowledged = models.BooleanField(default=False)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["at"]), models.Index(fields=["kind", "acknowledged"])]

    def __str__(self) -> str:
        return f"{self.kind} on {self.gpu_id}: {self.message[:60]}"


class PowerCapStatus(models.TextChoices):
    PENDING = "pending", "pending"
    APPLIED = "applied", "applied"
    REFUSED = "refused", "refused"


class PowerCap(models.Model):
    """An operator's request to cap a GPU's power, and what the GPU enforced."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="power_caps")
    requested_w = models.PositiveIntegerField()
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    requested_at = models.DateTimeField()
    status = models.CharField(max_length=10, choices=PowerCapStatus.choices, default=PowerCapStatus.PENDING)
    enforced_w = models.FloatField(null=True, blank=True, help_text="the limit NVML reported back")
    message = models.TextField(blank=True, help_text="why it was refused, or what NVML said")
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        constraints = [models.CheckConstraint(condition=Q(requested_w__gt=0), name="powercap_positive")]
        # Capping power changes hardware: its own permission, not implied by changing GPUs or nodes.
        permissions = [("cap_power", "Can cap GPU power")]

    def __str__(self) -> str:
        return f"{self.gpu_id}: {self.requested_w} W ({self.status})"


class TelemetrySource(models.Model):
    """How the last pass of a pulled source (``telemetry.prometheus``) went: the Overview page and ``/metrics`` show
    it, so that a source that stopped answering is never read as idle GPUs."""

    source = models.CharField(max_length=20, unique=True)
    checked_at = models.DateTimeField()
    ok = models.BooleanField(default=False)
    error = models.CharField(max_length=500, blank=True)
    failing_since = models.DateTimeField(null=True, blank=True)
    last_ok_at = models.DateTimeField(null=True, blank=True)
    gpus_matched = models.PositiveIntegerField(default=0)
    samples = models.PositiveIntegerField(default=0, help_text="samples stored by the last pass")
    unmatched = models.JSONField(default=list, blank=True, help_text="series matching no GPU of the inventory")
    stale = models.JSONField(default=list, blank=True, help_text="nodes with no recent sample")

    def __str__(self) -> str:
        return f"{self.source}: {'ok' if self.ok else self.error}"

    @classmethod
    def record_failure(cls, source: str, now: datetime, error: str) -> TelemetrySource:
        row = cls.objects.filter(source=source).first() or cls(source=source)
        row.checked_at, row.ok, row.error = now, False, error[:500]
        row.failing_since = row.failing_since or now
        row.save()
        return row

    @classmethod
    def record_success(cls, source: str, now: datetime, *, matched: int, samples: int, unmatched: list[str],
                       stale: list[str]) -> TelemetrySource:
        row, _ = cls.objects.update_or_create(source=source, defaults={
            "checked_at": now, "ok": True, "error": "", "failing_since": None, "last_ok_at": now,
            "gpus_matched": matched, "samples": samples, "unmatched": unmatched, "stale": stale})
        return row


class RollupCursor(models.Model):
    """How far one rollup level (``telemetry.rollups``) has read its source rows.

    Source rows with an id above ``last_id`` are new: their buckets are recomputed.
    ``rolled_until``: buckets before it were complete, and rolled up, at the last run; a new
    row in one of them arrived late.
    """

    level = models.CharField(max_length=10, unique=True)
    last_id = models.BigIntegerField(default=0)
    rolled_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.level} rollup: rows up to #{self.last_id}, buckets before {self.rolled_until}"
