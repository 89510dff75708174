"""The audit trail in admin: allocations, rounds and rescale events, read only."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from ..models import (
    Allocation,
    RescaleEvent,
    SchedulingRound,
)
from .common import ZonedTimeFilters, shorten
from .jobs import RescaleEventInline


class AuditAdmin(ZonedTimeFilters, admin.ModelAdmin):
    """Audit rows are written by the scheduler only: operators read them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Allocation)
class AllocationAdmin(AuditAdmin):
    list_display = ("gpu", "job", "started_at", "ended_at")
    list_filter = (("ended_at", admin.EmptyFieldListFilter), "gpu__node", "job__tenant")
    search_fields = ("job__name", "gpu__uuid", "gpu__node__hostname")
    list_select_related = ("gpu__node", "job")


@admin.register(SchedulingRound)
class SchedulingRoundAdmin(AuditAdmin):
    # What fits 1366 px; the timings of each phase and the skipped count are on the change page.
    list_display = ("id", "policy", "status", "started_at", "jobs_considered", "starts", "rescales", "preemptions",
                    "duration_ms")
    list_filter = ("status", "policy", "executor", "between_rounds")
    inlines = (RescaleEventInline,)


@admin.register(RescaleEvent)
class RescaleEventAdmin(AuditAdmin):
    list_display = ("at", "job", "kind", "gpus", "short_reason", "actor")
    list_filter = ("kind", "job__tenant")
    search_fields = ("job__name", "reason")
    list_select_related = ("job", "actor")

    @admin.display(description="GPUs", ordering="to_gpus")
    def gpus(self, event: RescaleEvent) -> str:
        return event.gpus_label

    @admin.display(description="reason", ordering="reason")
    def short_reason(self, event: RescaleEvent) -> str:
        return shorten(event.reason)

    class Media:
        css = {"all": ("cluster_ops/admin.css",)}
