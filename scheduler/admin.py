"""Django admin for operators: the queue, the inventory and the audit trail.

Job actions call ``scheduler.services``; the admin never changes a job's state itself.
"""

from __future__ import annotations

from pathlib import PurePath

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from . import services, whatif
from .core.policy import policy_names
from .models import (
    Allocation,
    Gpu,
    GpuHealth,
    Job,
    JobState,
    Node,
    RescaleEvent,
    SchedulingRound,
    Tenant,
    WhatIfRun,
    WhatIfStatus,
    WhatIfSweep,
)

HEALTH_COLOURS: dict[str, str] = {GpuHealth.OK: "#027a48", GpuHealth.DEGRADED: "#b54708", GpuHealth.LOST: "#b42318"}
STATE_COLOURS: dict[str, str] = {
    JobState.PENDING: "#52606d", JobState.RUNNING: "#027a48", JobState.RESCALING: "#1570ef",
    JobState.PREEMPTED: "#b54708", JobState.SUCCEEDED: "#3e4c59", JobState.FAILED: "#b42318",
    JobState.CANCELLED: "#9aa5b1",
}


def badge(text: str, colour: str) -> str:
    return format_html(
        '<span style="background:{};color:#fff;border-radius:.6em;padding:.1em .6em">{}</span>', colour, text
    )


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class AllocationInline(ReadOnlyInline):
    model = Allocation
    fields = readonly_fields = ("gpu", "started_at", "ended_at")
    verbose_name_plural = "allocation history"


class RescaleEventInline(ReadOnlyInline):
    model = RescaleEvent
    fields = readonly_fields = ("at", "kind", "from_gpus", "to_gpus", "reason", "actor", "round")
    verbose_name_plural = "rescale events"


class RunningOnNodeFilter(admin.SimpleListFilter):
    title = "node"
    parameter_name = "node"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(str(pk), hostname) for pk, hostname in Node.objects.values_list("pk", "hostname")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if not self.value():
            return queryset
        on_node = Q(allocations__gpu__node_id=self.value(), allocations__ended_at__isnull=True)
        return queryset.filter(on_node).distinct()


class PriorityForm(forms.Form):
    priority = forms.IntegerField(help_text="higher runs first where the policy honours priority")


class GpuBoundsForm(forms.Form):
    min_gpus = forms.IntegerField(min_value=1, label="Min GPUs")
    max_gpus = forms.IntegerField(min_value=1, label="Max GPUs")

    def clean(self) -> dict:
        data = super().clean() or {}
        if data.get("min_gpus") and data.get("max_gpus") and data["max_gpus"] < data["min_gpus"]:
            self.add_error("max_gpus", "Max GPUs must be at least min GPUs.")
        return data


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = (
        "id", "name", "tenant", "state_badge", "gpus_held", "gpu_range", "priority", "progress_pct",
        "submitted_at",
    )
    list_display_links = ("id", "name")
    list_filter = ("state", "tenant", RunningOnNodeFilter)
    search_fields = ("name", "tenant__name", "owner__username", "workload_profile")
    date_hierarchy = "submitted_at"
    list_select_related = ("tenant",)
    inlines = (AllocationInline, RescaleEventInline)
    actions = ("cancel_jobs", "requeue_jobs", "change_priority", "change_gpu_bounds")
    readonly_fields = (
        "state", "submitted_at", "started_at", "finished_at", "progress", "attained_gpu_seconds",
        "restarts", "last_throughput", "last_grad_noise_scale",
    )
    fieldsets = (
        (None, {"fields": ("name", "tenant", "owner", "workload_profile", "total_work")}),
        ("Scheduling", {"fields": ("min_gpus", "max_gpus", "priority")}),
        ("Status", {"fields": readonly_fields}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        open_allocations = Count("allocations", filter=Q(allocations__ended_at__isnull=True))
        return super().get_queryset(request).annotate(held=open_allocations)

    @admin.display(description="state", ordering="state")
    def state_badge(self, job: Job) -> str:
        return badge(job.state, STATE_COLOURS[job.state])

    @admin.display(description="GPUs held", ordering="held")
    def gpus_held(self, job: Job) -> int:
        return job.held  # type: ignore[attr-defined]

    @admin.display(description="GPU range")
    def gpu_range(self, job: Job) -> str:
        return f"{job.min_gpus}..{job.max_gpus}" if job.elastic else str(job.min_gpus)

    @admin.display(description="progress")
    def progress_pct(self, job: Job) -> str:
        return f"{100 * job.progress / job.total_work:.0f}%" if job.total_work else "–"

    def save_model(self, request: HttpRequest, obj: Job, form: forms.ModelForm, change: bool) -> None:
        if not change:
            obj.pk = services.submit_job(
                tenant=obj.tenant, name=obj.name, workload_profile=obj.workload_profile,
                total_work=obj.total_work, min_gpus=obj.min_gpus, max_gpus=obj.max_gpus,
                priority=obj.priority, owner=obj.owner or request.user,
            ).pk
            return
        services.set_gpu_bounds(obj, obj.min_gpus, obj.max_gpus, actor=request.user)
        services.set_priority(obj, obj.priority, actor=request.user)
        changed = set(form.changed_data) - {"min_gpus", "max_gpus", "priority"}
        if changed:
            obj.save(update_fields=sorted(changed))

    @admin.action(description="Cancel selected jobs")
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, lambda job: services.cancel_job(job, actor=request.user), "cancelled")

    @admin.action(description="Requeue selected jobs")
    def requeue_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, lambda job: services.requeue_job(job, actor=request.user), "requeued")

    @admin.action(description="Change priority of selected jobs")
    def change_priority(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        form = PriorityForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            return self._action_form(request, queryset, form, "change_priority", "Change priority")
        priority = form.cleaned_data["priority"]
        self._apply(request, queryset, lambda job: services.set_priority(job, priority, actor=request.user),
                    f"given priority {priority}")
        return None

    @admin.action(description="Change GPU bounds of selected jobs")
    def change_gpu_bounds(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        form = GpuBoundsForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            return self._action_form(request, queryset, form, "change_gpu_bounds", "Change GPU bounds")
        low, high = form.cleaned_data["min_gpus"], form.cleaned_data["max_gpus"]
        self._apply(request, queryset,
                    lambda job: services.set_gpu_bounds(job, low, high, actor=request.user),
                    f"given GPU bounds {low}..{high}")
        return None

    def _apply(self, request: HttpRequest, queryset: QuerySet[Job], verb, done: str) -> None:
        """Run ``verb`` per job; a job that refuses is named with the reason, the rest proceed."""
        succeeded = 0
        for job in queryset:
            try:
                verb(job)
                succeeded += 1
            except ValidationError as error:
                self.message_user(request, f"{job}: {'; '.join(error.messages)}", messages.ERROR)
        if succeeded:
            self.message_user(request, f"{succeeded} job(s) {done}.", messages.SUCCESS)

    def _action_form(
        self, request: HttpRequest, queryset: QuerySet[Job], form: forms.Form, action: str, title: str
    ) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request), "title": title, "form": form, "action": action,
            "jobs": queryset, "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/scheduler/job/action_form.html", context)


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0
    fields = ("index", "uuid", "model", "memory_mib", "power_limit_w", "health")


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("hostname", "schedulable", "gpu_count", "gpus_ok", "gpus_not_ok", "last_seen_at")
    list_filter = ("schedulable", "gpus__model")
    search_fields = ("hostname", "gpus__uuid")
    inlines = (GpuInline,)
    actions = ("cordon", "uncordon")

    @admin.action(description="Cordon selected nodes (no new allocations)")
    def cordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        self.message_user(request, f"{services.set_node_schedulable(list(queryset), False)} node(s) cordoned.")

    @admin.action(description="Uncordon selected nodes")
    def uncordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        self.message_user(request, f"{services.set_node_schedulable(list(queryset), True)} node(s) uncordoned.")

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
class GpuAdmin(admin.ModelAdmin):
    list_display = ("__str__", "model", "memory_mib", "power_limit_w", "health_badge", "held_by")
    list_filter = ("health", "node", "model")
    search_fields = ("uuid", "node__hostname", "model")
    list_select_related = ("node",)
    actions = ("mark_ok", "mark_degraded", "mark_lost")

    @admin.action(description="Mark selected GPUs ok")
    def mark_ok(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        self._mark(request, queryset, GpuHealth.OK)

    @admin.action(description="Mark selected GPUs degraded")
    def mark_degraded(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        self._mark(request, queryset, GpuHealth.DEGRADED)

    @admin.action(description="Mark selected GPUs lost (the scheduler stops using them)")
    def mark_lost(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        self._mark(request, queryset, GpuHealth.LOST)

    def _mark(self, request: HttpRequest, queryset: QuerySet[Gpu], health: str) -> None:
        self.message_user(request, f"{services.set_gpu_health(list(queryset), health)} GPU(s) marked {health}.")

    @admin.display(description="health", ordering="health")
    def health_badge(self, gpu: Gpu) -> str:
        return badge(gpu.health, HEALTH_COLOURS[gpu.health])

    @admin.display(description="held by")
    def held_by(self, gpu: Gpu) -> str:
        allocation = gpu.allocations.filter(ended_at__isnull=True).select_related("job").first()
        return str(allocation.job) if allocation else "–"


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
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


class AuditAdmin(admin.ModelAdmin):
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
    list_display = ("id", "policy", "status", "started_at", "duration_ms", "jobs_considered", "decisions")
    list_filter = ("status", "policy")
    inlines = (RescaleEventInline,)


@admin.register(RescaleEvent)
class RescaleEventAdmin(AuditAdmin):
    list_display = ("at", "job", "kind", "from_gpus", "to_gpus", "reason", "actor")
    list_filter = ("kind", "job__tenant")
    search_fields = ("job__name", "reason")
    list_select_related = ("job", "actor")


# --- what-if runs and sweeps: results are read, never edited; runs are made through scheduler.whatif ----------

WHATIF_COLOURS: dict[str, str] = {
    WhatIfStatus.QUEUED: "#52606d", WhatIfStatus.RUNNING: "#1570ef", WhatIfStatus.SUCCEEDED: "#027a48",
    WhatIfStatus.FAILED: "#b42318",
}


def readable(value: object) -> str:
    """A summary value for people: floats to four significant digits, missing values as a dash."""
    if value is None or value == "":
        return "–"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def key_value_table(data: dict | None) -> str:
    if not data:
        return "–"
    rows = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", ((k, readable(v)) for k, v in data.items()))
    return format_html("<table>{}</table>", rows)


def comparison_table(comparison: dict | None) -> str:
    """The sweep's comparison: one row per run, then the best run per metric."""
    if not comparison:
        return "– (filled when every run has finished)"
    columns = ["run", "status", *comparison["parameters"], *comparison["metrics"]]
    head = format_html_join("", "<th>{}</th>", ((column,) for column in columns))
    body = format_html_join("", "<tr>{}</tr>", (
        (format_html_join("", "<td>{}</td>", ((readable(row[column]),) for column in columns)),)
        for row in comparison["rows"]
    ))
    best = comparison["best"]
    best_cells = format_html_join("", "<td>{}</td>", (
        (f"{best[column]['policy']} (#{best[column]['run']})" if best.get(column) else "",) for column in columns
    ))
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}<tr>{}</tr></tbody></table>",
                       head, body, best_cells)


class ReadOnlyResultsAdmin(admin.ModelAdmin):
    """Results are written by the what-if service only: operators read them, and may delete old ones."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class WhatIfPolicyFilter(admin.SimpleListFilter):
    title = "policy"
    parameter_name = "policy"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(name, name) for name in policy_names()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[WhatIfRun]) -> QuerySet[WhatIfRun]:
        return queryset.filter(scenario__policy=self.value()) if self.value() else queryset


@admin.register(WhatIfRun)
class WhatIfRunAdmin(ReadOnlyResultsAdmin):
    list_display = ("id", "policy", "trace", "status_badge", "progress_pct", "sweep", "created_by", "created_at",
                    "finished_at")
    list_filter = ("status", WhatIfPolicyFilter)
    list_select_related = ("sweep", "created_by")
    actions = ("run_again",)
    fields = readonly_fields = ("status", "progress_pct", "scenario_table", "summary_table", "error", "sweep",
                                "created_by", "created_at", "started_at", "finished_at", "celery_task_id")

    @admin.display(description="status", ordering="status")
    def status_badge(self, run: WhatIfRun) -> str:
        return badge(run.status, WHATIF_COLOURS[run.status])

    @admin.display(description="trace")
    def trace(self, run: WhatIfRun) -> str:
        return PurePath(str(run.scenario.get("trace", ""))).name

    @admin.display(description="progress", ordering="progress")
    def progress_pct(self, run: WhatIfRun) -> str:
        return f"{100 * run.progress:.0f}%"

    @admin.display(description="scenario")
    def scenario_table(self, run: WhatIfRun) -> str:
        return key_value_table(run.scenario)

    @admin.display(description="summary")
    def summary_table(self, run: WhatIfRun) -> str:
        return key_value_table(run.summary)

    @admin.action(description="Run again")
    def run_again(self, request: HttpRequest, queryset: QuerySet[WhatIfRun]) -> None:
        started = 0
        for run in queryset:
            try:
                whatif.rerun(run, request.user)
                started += 1
            except ValidationError as error:
                self.message_user(request, f"{run}: {'; '.join(error.messages)}", messages.ERROR)
        if started:
            self.message_user(request, f"{started} run(s) queued again.", messages.SUCCESS)


class WhatIfRunInline(ReadOnlyInline):
    model = WhatIfRun
    fields = readonly_fields = ("run_link", "status", "setting", "progress")
    verbose_name_plural = "runs"

    @admin.display(description="run")
    def run_link(self, run: WhatIfRun) -> str:
        return format_html('<a href="{}">#{}</a>', reverse("admin:scheduler_whatifrun_change", args=[run.pk]), run.pk)

    @admin.display(description="policy @ power cap × load")
    def setting(self, run: WhatIfRun) -> str:
        scenario = run.scenario
        return f"{scenario.get('policy')} @ {scenario.get('power_cap_fraction')} × {scenario.get('load_factor')}"


@admin.register(WhatIfSweep)
class WhatIfSweepAdmin(ReadOnlyResultsAdmin):
    list_display = ("id", "name", "run_count", "finished_count", "compared", "created_by", "created_at")
    list_display_links = ("id", "name")
    list_select_related = ("created_by",)
    inlines = (WhatIfRunInline,)
    fields = readonly_fields = ("name", "created_by", "created_at", "comparison_table")

    def get_queryset(self, request: HttpRequest) -> QuerySet[WhatIfSweep]:
        finished = Q(runs__status__in=[WhatIfStatus.SUCCEEDED, WhatIfStatus.FAILED])
        return super().get_queryset(request).annotate(n_runs=Count("runs"), n_finished=Count("runs", filter=finished))

    @admin.display(description="runs", ordering="n_runs")
    def run_count(self, sweep: WhatIfSweep) -> int:
        return sweep.n_runs  # type: ignore[attr-defined]

    @admin.display(description="finished", ordering="n_finished")
    def finished_count(self, sweep: WhatIfSweep) -> int:
        return sweep.n_finished  # type: ignore[attr-defined]

    @admin.display(description="compared", boolean=True)
    def compared(self, sweep: WhatIfSweep) -> bool:
        return sweep.comparison is not None

    @admin.display(description="comparison")
    def comparison_table(self, sweep: WhatIfSweep) -> str:
        return comparison_table(sweep.comparison)
