"""The reports' rows: a report per period and scope, who receives them, and each e-mail sent."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import models
from django.db.models import F, Q
from django.utils.text import slugify

from scheduler.models import Tenant


class ReportKind(models.TextChoices):
    DAILY = "daily", "daily"
    WEEKLY = "weekly", "weekly"
    CUSTOM = "custom", "custom"


class ReportStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "being made"
    READY = "ready", "ready"
    FAILED = "failed", "failed"


def report_file_path(report: Report, filename: str) -> str:
    return f"reports/{report.period_start:%Y}/{filename}"


class ReportQuerySet(models.QuerySet["Report"]):
    def visible_to(self, user: User | AnonymousUser) -> ReportQuerySet:
        """Staff see every report; others the reports of their tenants (never the cluster-wide ones)."""
        return self if user.is_staff else self.filter(tenant__in=Tenant.objects.visible_to(user))


class Report(models.Model):
    """One report for one period and scope (a tenant, or the whole cluster); making it again replaces its files."""

    kind = models.CharField(max_length=10, choices=ReportKind.choices)
    period_start = models.DateTimeField()
    period_end = models.DateTimeField(help_text="exclusive: the midnight after the last day")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="reports",
                               help_text="empty: the whole cluster")
    status = models.CharField(max_length=10, choices=ReportStatus.choices, default=ReportStatus.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    made_at = models.DateTimeField(null=True, blank=True, help_text="when its files were last written")
    sent_at = models.DateTimeField(null=True, blank=True, help_text="last sent to the workers; resent if still queued")
    started_at = models.DateTimeField(null=True, blank=True, help_text="when a worker began making it")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="last sign of life of the worker making it")
    attempts = models.PositiveIntegerField(default=0, help_text="workers that began making it (made again)")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                     related_name="+")
    html = models.FileField(upload_to=report_file_path, blank=True)
    pdf = models.FileField(upload_to=report_file_path, blank=True)
    csv = models.FileField(upload_to=report_file_path, blank=True)
    accounting = models.FileField(upload_to=report_file_path, blank=True,
                                  help_text="exact GPU-hours per tenant and user (CSV, as sreport's accounts)")
    summary = models.JSONField(default=dict, blank=True, help_text="headline figures for the list and the e-mail")
    notes = models.JSONField(default=list, blank=True, help_text="what a section could not show, and why")
    error = models.TextField(blank=True)

    objects = ReportQuerySet.as_manager()

    class Meta:
        db_table = "cluster_ops_report"  # made by the project's app before reports had one of their own
        ordering = ["-period_start", "kind", "tenant__name", "-id"]
        permissions = [("send_report", "Can e-mail reports to their recipients")]
        constraints = [
            # Two partial constraints: NULL tenants (cluster-wide) are never equal in a plain unique constraint.
            models.UniqueConstraint(fields=["kind", "period_start", "period_end", "tenant"],
                                    condition=Q(tenant__isnull=False), name="report_one_per_period_and_tenant"),
            models.UniqueConstraint(fields=["kind", "period_start", "period_end"],
                                    condition=Q(tenant__isnull=True), name="report_one_per_period_cluster_wide"),
            models.CheckConstraint(condition=Q(period_end__gt=F("period_start")), name="report_period_not_empty"),
            models.CheckConstraint(condition=Q(kind__in=ReportKind.values), name="report_kind_valid"),
            models.CheckConstraint(condition=Q(status__in=ReportStatus.values), name="report_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} report {self.period_start:%Y-%m-%d} ({self.scope})"

    @property
    def scope(self) -> str:
        return self.tenant.name if self.tenant else "whole cluster"

    def file_name(self, kind: str) -> str:
        """``weekly-2026-11-16-vision.pdf``; the accounting CSV is ``…-accounting.csv``."""
        return f"{self.file_stem}-accounting.csv" if kind == "accounting" else f"{self.file_stem}.{kind}"

    @property
    def file_stem(self) -> str:
        """``weekly-2026-11-16-vision``: the files' names without extension."""
        scope = slugify(self.tenant.name) or f"tenant-{self.tenant.pk}" if self.tenant else "cluster"
        return f"{self.kind}-{self.period_start:%Y-%m-%d}-{scope}"  # a tenant's name never makes a path


class ReportRecipient(models.Model):
    """Who receives a tenant's reports (or, with no tenant, the cluster-wide ones) by e-mail."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True,
                               related_name="report_recipients", help_text="empty: the cluster-wide reports")
    email = models.EmailField()
    daily = models.BooleanField(default=True, help_text="receives the daily reports")
    weekly = models.BooleanField(default=True, help_text="receives the weekly reports")
    active = models.BooleanField(default=True)

    class Meta:
        db_table = "cluster_ops_reportrecipient"
        ordering = ["tenant__name", "email"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "email"], condition=Q(tenant__isnull=False),
                                    name="recipient_unique_per_tenant"),
            models.UniqueConstraint(fields=["email"], condition=Q(tenant__isnull=True),
                                    name="recipient_unique_cluster_wide"),
        ]

    def __str__(self) -> str:
        return f"{self.email} ({self.tenant.name if self.tenant else 'whole cluster'})"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "pending"
    SENDING = "sending", "sending"
    RETRYING = "retrying", "failed, will retry"
    SENT = "sent", "sent"
    FAILED = "failed", "failed"


class ReportDelivery(models.Model):
    """One report e-mailed to one recipient: every attempt counted, the last error kept."""

    report = models.ForeignKey(Report, on_delete=models.CASCADE, related_name="deliveries")
    recipient = models.ForeignKey(ReportRecipient, on_delete=models.CASCADE, related_name="deliveries")
    email = models.EmailField(help_text="the address it went to")
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    queued_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "cluster_ops_reportdelivery"
        ordering = ["-queued_at", "-id"]
        verbose_name_plural = "report deliveries"
        constraints = [
            models.UniqueConstraint(fields=["report", "recipient"], name="delivery_one_per_report_and_recipient"),
            models.CheckConstraint(condition=Q(status__in=DeliveryStatus.values), name="delivery_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.report} to {self.email}: {self.status}"
