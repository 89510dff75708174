"""Telemetry in admin, read only: GPU events (operators acknowledge them), power caps, rollups.

Rows here are written by collectors, rollups and the power-cap service, never by hand; the
"Cap power…" request lives on the GPU and node pages (``telemetry/admin_actions.py``).
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from scheduler.admin.audit import AuditAdmin

from .models import GpuEvent, GpuHour, GpuMinute, PowerCap, TelemetrySource
from .storage import acknowledge_events


@admin.action(description="Acknowledge selected events", permissions=["change"])
def acknowledge(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[GpuEvent]) -> None:
    count = acknowledge_events(queryset)
    modeladmin.message_user(request, f"{count} event(s) acknowledged.", messages.SUCCESS)


@admin.register(GpuEvent)
class GpuEventAdmin(AuditAdmin):
    list_display = ("at", "gpu", "kind", "severity", "code", "message", "acknowledged")
    list_filter = ("acknowledged", "severity", "kind", "gpu__node")
    search_fields = ("message", "gpu__uuid", "gpu__node__hostname")
    list_select_related = ("gpu__node",)
    date_hierarchy = "at"
    actions = [acknowledge]

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # The list may change (the acknowledge action); a single event's page stays read only.
        return obj is None and request.user.has_perm("telemetry.change_gpuevent")


@admin.register(PowerCap)
class PowerCapAdmin(AuditAdmin):
    list_display = ("requested_at", "gpu", "requested_w", "status", "enforced_w", "requested_by", "applied_at",
                    "message")
    list_filter = ("status", "gpu__node")
    search_fields = ("gpu__uuid", "gpu__node__hostname", "message")
    list_select_related = ("gpu__node", "requested_by")


class RollupAdmin(AuditAdmin):
    list_display = ("start", "gpu", "samples", "gpu_util_avg", "gpu_util_max", "power_w_avg", "energy_j",
                    "allocated_seconds", "idle_allocated_seconds", "simulated")
    list_filter = ("simulated", "gpu__node")
    search_fields = ("gpu__uuid", "gpu__node__hostname")
    list_select_related = ("gpu__node",)
    date_hierarchy = "start"
    show_full_result_count = False  # COUNT(*) over millions of rows on every page load is not worth it


admin.register(GpuMinute)(RollupAdmin)
admin.register(GpuHour)(RollupAdmin)


@admin.register(TelemetrySource)
class TelemetrySourceAdmin(AuditAdmin):
    """How the last pass over a pulled source (Prometheus) went: written by ``telemetry.prometheus``, read here."""

    list_display = ("source", "ok", "checked_at", "error", "failing_since", "gpus_matched", "samples")
    readonly_fields = ("source", "ok", "checked_at", "error", "failing_since", "last_ok_at", "gpus_matched",
                       "samples", "unmatched", "stale")
