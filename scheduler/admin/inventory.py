"""Nodes, GPUs and tenants in admin: health at a glance, cordon and health actions."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from scheduler.live.preview import Preview, preview_round
from telemetry.admin_actions import CapPowerPermission, cap_power

from .. import inventory
from ..live.config import scheduler_settings
from ..models import (
    Gpu,
    GpuHealth,
    JobState,
    Node,
    Tenant,
)
from .common import HEALTH_COLOURS, PreviewBeforeSaving, badge


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0
    fields = ("index", "uuid", "model", "memory_mib", "power_limit_w", "health")


@admin.register(Node)
class NodeAdmin(CapPowerPermission, admin.ModelAdmin):
    list_display = ("hostname", "schedulable", "gpu_count", "gpus_ok", "gpus_not_ok", "last_seen_at")
    list_filter = ("schedulable", "gpus__model")
    search_fields = ("hostname", "gpus__uuid")
    inlines = (GpuInline,)
    actions = ("cordon", "uncordon", cap_power)

    @admin.action(description="Cordon selected nodes (no new allocations)", permissions=["change"])
    def cordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        self.message_user(request, f"{inventory.set_node_schedulable(list(queryset), False)} node(s) cordoned.")

    @admin.action(description="Uncordon selected nodes", permissions=["change"])
    def uncordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        self.message_user(request, f"{inventory.set_node_schedulable(list(queryset), True)} node(s) uncordoned.")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        return super().get_queryset(request).annotate(
            n_gpus=Count("gpus"),
            n_ok=Count("gpus", filter=Q(gpus__health=GpuHealth.OK)),
        )

    @admin.display(description="GPUs", ordering="n_gpus")
    def gpu_count(self, node: Node) -> int:
        return node.n_gpus  # type: ignore[attr-defined]

    @admin.display(description="ok", ordering="n_ok")
    def gpus_ok(self, node: Node) -> int:
        return node.n_ok  # type: ignore[attr-defined]

    @admin.display(description="degraded or lost")
    def gpus_not_ok(self, node: Node) -> str:
        bad = node.n_gpus - node.n_ok  # type: ignore[attr-defined]
        return badge(str(bad), HEALTH_COLOURS[GpuHealth.LOST]) if bad else "0"


@admin.register(Gpu)
class GpuAdmin(CapPowerPermission, admin.ModelAdmin):
    list_display = ("__str__", "model", "memory_mib", "power_limit_w", "health_badge", "held_by")
    list_filter = ("health", "node", "model")
    search_fields = ("uuid", "node__hostname", "model")
    list_select_related = ("node",)
    actions = ("mark_ok", "mark_degraded", "mark_lost", cap_power)

    @admin.action(description="Mark selected GPUs ok", permissions=["change"])
    def mark_ok(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        self._mark(request, queryset, GpuHealth.OK)

    @admin.action(description="Mark selected GPUs degraded", permissions=["change"])
    def mark_degraded(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        self._mark(request, queryset, GpuHealth.DEGRADED)

    @admin.action(description="Mark selected GPUs lost (the scheduler stops using them)", permissions=["change"])
    def mark_lost(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        self._mark(request, queryset, GpuHealth.LOST)

    def _mark(self, request: HttpRequest, queryset: QuerySet[Gpu], health: str) -> None:
        self.message_user(request, f"{inventory.set_gpu_health(list(queryset), health)} GPU(s) marked {health}.")

    @admin.display(description="health", ordering="health")
    def health_badge(self, gpu: Gpu) -> str:
        return badge(gpu.health, HEALTH_COLOURS[gpu.health])

    @admin.display(description="held by")
    def held_by(self, gpu: Gpu) -> str:
        allocation = gpu.allocations.filter(ended_at__isnull=True).select_related("job").first()
        return str(allocation.job) if allocation else "–"


@admin.register(Tenant)
class TenantAdmin(PreviewBeforeSaving, admin.ModelAdmin):
    preview_field = "gpu_quota"  # a new quota is previewed before it is saved
    list_display = ("name", "gpu_quota", "fair_share_weight", "active_jobs", "pending_jobs")
    search_fields = ("name",)
    filter_horizontal = ("members",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        return super().get_queryset(request).annotate(
            n_active=Count("jobs", filter=Q(jobs__state__in=[JobState.RUNNING, JobState.RESCALING])),
            n_pending=Count("jobs", filter=Q(jobs__state=JobState.PENDING)),
        )

    @admin.display(description="running", ordering="n_active")
    def active_jobs(self, tenant: Tenant) -> int:
        return tenant.n_active  # type: ignore[attr-defined]

    @admin.display(description="pending", ordering="n_pending")
    def pending_jobs(self, tenant: Tenant) -> int:
        return tenant.n_pending  # type: ignore[attr-defined]

    def preview_change(self, obj: Tenant, before: int, after: int) -> tuple[Preview, str]:
        """A new quota: what the next round would do with it, under the live policy."""
        preview = preview_round(scheduler_settings().policy, timezone.now(), {obj.name: after})
        return preview, f"tenant {obj.name}'s quota {before} → {after} GPUs"
