"""Admin for reports: the reports with their files and deliveries, recipients per tenant, and every delivery."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html_join

from cluster_ops.reports.models import Report, ReportDelivery, ReportRecipient, ReportStatus
from scheduler.admin.common import ZonedTimeFilters

from . import services, tasks


class DeliveryInline(admin.TabularInline):
    model = ReportDelivery
    extra = 0
    can_delete = False
    fields = readonly_fields = ("email", "status", "attempts", "last_error", "queued_at", "sent_at")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Report)
class ReportAdmin(ZonedTimeFilters, admin.ModelAdmin):
    list_display = ("period_start", "kind", "scope", "status", "made_at", "files")
    list_filter = ("kind", "status", "tenant")
    date_hierarchy = "period_start"
    readonly_fields = ("kind", "period_start", "period_end", "tenant", "status", "created_at", "made_at",
                       "requested_by", "files", "notes", "error", "summary")
    exclude = ("html", "pdf", "csv")
    inlines = [DeliveryInline]
    actions = ["make_again", "send"]

    @admin.display(description="files")
    def files(self, report: Report) -> str:
        links = [(reverse("reports:download", args=[report.pk, fmt]), fmt.upper())
                 for fmt in ("pdf", "html", "csv") if getattr(report, fmt)]
        return format_html_join(" · ", '<a href="{}">{}</a>', links) or "–"

    @admin.action(description="Make the selected reports again (replaces their files)", permissions=["make"])
    def make_again(self, request: HttpRequest, queryset: QuerySet[Report]) -> None:
        now = timezone.now()
        for report in queryset.select_related("tenant"):
            services.make_report(services.period_of(report), report.tenant, user=request.user, now=now)
        self.message_user(request, f"{queryset.count()} report(s) made again.", messages.SUCCESS)

    @admin.action(description="E-mail the selected reports to their recipients", permissions=["send"])
    def send(self, request: HttpRequest, queryset: QuerySet[Report]) -> None:
        queued = sum(len(tasks.send_report(report)) for report in queryset.filter(status=ReportStatus.READY))
        self.message_user(request, f"{queued} e-mail(s) queued.", messages.SUCCESS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made by beat, the reports page or `manage.py make_report`

    def has_make_permission(self, request: HttpRequest) -> bool:
        """Making a report is adding one, as on the reports page (there the page adds it, not this form)."""
        return request.user.has_perm("reports.add_report")

    def has_send_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("reports.send_report")


@admin.register(ReportRecipient)
class ReportRecipientAdmin(admin.ModelAdmin):
    list_display = ("email", "tenant", "daily", "weekly", "active")
    list_editable = ("daily", "weekly", "active")
    list_filter = ("tenant", "active")
    search_fields = ("email",)


@admin.register(ReportDelivery)
class ReportDeliveryAdmin(admin.ModelAdmin):
    list_display = ("report", "email", "status", "attempts", "queued_at", "sent_at", "last_error")
    list_filter = ("status",)
    readonly_fields = ("report", "recipient", "email", "status", "attempts", "last_error", "queued_at", "sent_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
