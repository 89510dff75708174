"""The job queue in admin: filters, inlines, and actions that call ``scheduler.jobs.verbs``.

The admin never changes a job's state itself.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html_join

from scheduler.backends import files
from scheduler.forecasting.forecasts import NOT_WITHIN, clock, describe, frees_text, latest_for, starts_in

from .. import bounds
from ..core.fitted_profiles import FITTED_PROFILES
from ..jobs import verbs
from ..models import (
    ACTIVE_STATES,
    QUEUED_STATES,
    Allocation,
    Forecast,
    Job,
    JobForecast,
    JobState,
    Node,
    RescaleEvent,
)
from .common import STATE_COLOURS, ReadOnlyInline, ZonedTimeFilters, badge, shorten

LAUNCH_FIELDS = ("gpu_type", "batch_size", "command", "script_path")  # editable while the job waits for its first start


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
    priority = forms.IntegerField(min_value=bounds.PRIORITY_RANGE[0], max_value=bounds.PRIORITY_RANGE[1],
                                  help_text="higher runs first where the policy honours priority")


class GpuBoundsForm(forms.Form):
    min_gpus = forms.IntegerField(min_value=1, max_value=bounds.MAX_GPUS, label="Min GPUs")
    max_gpus = forms.IntegerField(min_value=1, max_value=bounds.MAX_GPUS, label="Max GPUs")

    def clean(self) -> dict:
        data = super().clean() or {}
        if data.get("min_gpus") and data.get("max_gpus") and data["max_gpus"] < data["min_gpus"]:
            self.add_error("max_gpus", verbs.MAX_BELOW_MIN)
        return data


class JobAdminForm(forms.ModelForm):
    """The job form, checked by the services' own rules before anything is saved (a new job as ``submit_job``
    checks it; a change as ``set_gpu_bounds`` and ``set_priority`` do), so that a job the cluster cannot run is
    a form error naming the field, with the API's message — never a 500 from ``save_model``."""

    request: HttpRequest | None = None  # set by ``JobAdmin.get_form``: whose change it is
    # ≥ 1, not the column's ≥ 0: the rule (and its message) the API and the services have
    min_gpus = forms.IntegerField(min_value=1, max_value=bounds.MAX_GPUS, initial=1, label="Min GPUs")
    max_gpus = forms.IntegerField(min_value=1, max_value=bounds.MAX_GPUS, initial=1, label="Max GPUs")

    def clean(self) -> dict:
        data = super().clean() or {}
        if self.errors:
            return data
        actor = self.request.user if self.request is not None else None
        try:
            if self.instance.pk is None:
                fields: dict[str, Any] = {name: data[name] for name in NEW_JOB_FIELDS if name in data}
                verbs.new_job(**fields, owner=data.get("owner") or actor)
            else:
                job = self.instance
                verbs.check_job_change(job, data.get("min_gpus", job.min_gpus), data.get("max_gpus", job.max_gpus),
                                          data.get("priority", job.priority), data.get("gpu_type", job.gpu_type) or "",
                                          actor)
        except ValidationError as refused:
            for field, problems in refused.message_dict.items():
                self.add_error(field if field in self.fields else None, problems)
        return data


NEW_JOB_FIELDS = ("tenant", "name", "workload_profile", "total_work", "min_gpus", "max_gpus", "priority", "gpu_type",
                  "batch_size", "command", "script_path", "expected_seconds")


@admin.register(Job)
class JobAdmin(ZonedTimeFilters, admin.ModelAdmin):
    # What fits 1366 px; bounds, priority and the rest are on the change page.
    list_display = ("id", "name", "tenant", "state_badge", "gpus_held", "progress_pct", "why_pending", "estimate",
                    "submitted_at")
    list_display_links = ("id", "name")
    ordering = ("-submitted_at", "-id")  # newest first
    list_filter = ("state", "tenant", RunningOnNodeFilter)
    search_fields = ("name", "tenant__name", "owner__username", "workload_profile")
    date_hierarchy = "submitted_at"
    list_select_related = ("tenant",)
    inlines = (AllocationInline, RescaleEventInline)
    actions = ("cancel_jobs", "requeue_jobs", "change_priority", "change_gpu_bounds")
    readonly_fields = (
        "state", "pending_reason", "submitted_at", "started_at", "finished_at", "progress", "attained_gpu_seconds",
        "restarts", "last_throughput", "last_grad_noise_scale", "forecast", "predicted_seconds",
    )
    fieldsets = (
        (None, {"fields": ("name", "tenant", "owner", "workload_profile", "total_work", "expected_seconds")}),
        ("Scheduling", {"fields": ("min_gpus", "max_gpus", "priority", "gpu_type", "batch_size")}),
        ("Workers", {"fields": ("command", "script_path", "cluster_job_id"),
                     "description": "what each worker process runs (local executor), or the batch script Slurm runs"}),
        ("Status", {"fields": readonly_fields}),
        ("Worker logs", {"fields": ("worker_logs",), "classes": ("collapse",)}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        open_allocations = Count("allocations", filter=Q(allocations__ended_at__isnull=True))
        latest = Forecast.objects.values_list("pk", flat=True).first()
        estimates = JobForecast.objects.filter(job=OuterRef("pk"), forecast_id=latest or 0)
        return super().get_queryset(request).annotate(
            held=open_allocations, forecast_made=Subquery(estimates.values("pk")[:1]),
            forecast_start=Subquery(estimates.values("estimated_start")[:1]),
            forecast_p90=Subquery(estimates.values("start_p90")[:1]),
            forecast_finish=Subquery(estimates.values("estimated_finish")[:1]),
            forecast_after_job=Subquery(estimates.values("after_job_id")[:1]),
            forecast_after_gpus=Subquery(estimates.values("after_gpus")[:1]),
            forecast_after_name=Subquery(estimates.values("after_job__name")[:1]))

    @admin.display(description="state", ordering="state")
    def state_badge(self, job: Job) -> str:
        return badge(job.state, STATE_COLOURS[job.state])

    @admin.display(description="GPUs held", ordering="held")
    def gpus_held(self, job: Job) -> int:
        return job.held  # type: ignore[attr-defined]

    @admin.display(description="why pending", ordering="pending_reason")
    def why_pending(self, job: Job) -> str:
        if job.state not in QUEUED_STATES:
            return ""
        after = frees_text(self._estimate_of(job))
        return shorten(f"{job.pending_reason}; {after}" if after else job.pending_reason)

    @staticmethod
    def _estimate_of(job: Job) -> JobForecast:
        """The latest forecast's row for ``job``, from the list's annotations (no query per row)."""
        after_pk = getattr(job, "forecast_after_job", None)
        after = Job(pk=after_pk, name=getattr(job, "forecast_after_name", "") or "") if after_pk else None
        return JobForecast(estimated_start=getattr(job, "forecast_start", None),
                           start_p90=getattr(job, "forecast_p90", None), after_job=after,
                           after_gpus=getattr(job, "forecast_after_gpus", "") or "")

    @admin.display(description="estimate", ordering="forecast_start")
    def estimate(self, job: Job) -> str:
        """'starts in ~12 min (p90 25 min)' for a waiting job, 'ends ~10:40' for a running one (latest forecast)."""
        start, finish = getattr(job, "forecast_start", None), getattr(job, "forecast_finish", None)
        if job.state in QUEUED_STATES and start is not None:
            return starts_in(self._estimate_of(job))
        if job.state in ACTIVE_STATES and finish is not None:
            return f"ends ~{clock(finish)}"
        if getattr(job, "forecast_made", None) and job.state in QUEUED_STATES:
            return NOT_WITHIN
        return ""

    @admin.display(description="forecast")
    def forecast(self, job: Job) -> str:
        row = latest_for([job.pk]).get(job.pk) if job.pk else None
        return describe(row) if row else "no forecast yet"

    form = JobAdminForm

    def get_form(self, request: HttpRequest, obj: Job | None = None, change: bool = False,
                 **kwargs: object) -> type[forms.ModelForm]:
        """The profile is a choice of the fitted ones (the job's own kept, should it be another)."""
        form = super().get_form(request, obj, change=change, **kwargs)
        form.request = request  # type: ignore[attr-defined]
        names = sorted(FITTED_PROFILES) + ([obj.workload_profile] if obj and obj.workload_profile
                                           not in FITTED_PROFILES else [])
        profile = form.base_fields.get("workload_profile")
        if profile is not None:
            form.base_fields["workload_profile"] = forms.ChoiceField(
                choices=[("", "---------"), *((name, name) for name in names)], label="Workload profile",
                help_text="the fitted throughput profile the goodput model uses")
        return form

    @admin.display(description="progress")
    def progress_pct(self, job: Job) -> str:
        return f"{100 * job.progress / job.total_work:.0f}%" if job.total_work else "–"

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> tuple[str, ...]:
        fields = (*super().get_readonly_fields(request, obj), "worker_logs", "cluster_job_id")  # logs: own section
        if obj is not None and obj.state != JobState.PENDING:
            fields += LAUNCH_FIELDS  # its workers were launched with them
        return fields

    @admin.display(description="end of each rank's log")
    def worker_logs(self, job: Job) -> str:
        """The local executor's rank logs (under JOB_DIR), newest generation first."""
        tails = files.log_tails(job.pk) if job.pk else []
        if not tails:
            return "–"
        return format_html_join("", '<p><strong>{}</strong></p><pre style="white-space: pre-wrap">{}</pre>', tails)

    def save_model(self, request: HttpRequest, obj: Job, form: forms.ModelForm, change: bool) -> None:
        if not change:
            obj.pk = verbs.submit_job(
                tenant=obj.tenant, name=obj.name, workload_profile=obj.workload_profile,
                total_work=obj.total_work, min_gpus=obj.min_gpus, max_gpus=obj.max_gpus,
                priority=obj.priority, gpu_type=obj.gpu_type, batch_size=obj.batch_size, command=obj.command,
                script_path=obj.script_path, owner=obj.owner or request.user,
            ).pk
            return
        verbs.set_gpu_bounds(obj, obj.min_gpus, obj.max_gpus, actor=request.user)
        verbs.set_priority(obj, obj.priority, actor=request.user)
        changed = set(form.changed_data) - {"min_gpus", "max_gpus", "priority"}
        if changed:
            obj.save(update_fields=sorted(changed))

    @admin.action(description="Cancel selected jobs", permissions=["change"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, lambda job: verbs.cancel_job(job, actor=request.user), "cancelled")

    @admin.action(description="Requeue selected jobs", permissions=["change"])
    def requeue_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply(request, queryset, lambda job: verbs.requeue_job(job, actor=request.user), "requeued")

    @admin.action(description="Change priority of selected jobs", permissions=["change"])
    def change_priority(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        form = PriorityForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            return self._action_form(request, queryset, form, "change_priority", "Change priority")
        priority = form.cleaned_data["priority"]
        self._apply(request, queryset, lambda job: verbs.set_priority(job, priority, actor=request.user),
                    f"given priority {priority}")
        return None

    @admin.action(description="Change GPU bounds of selected jobs", permissions=["change"])
    def change_gpu_bounds(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        form = GpuBoundsForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            return self._action_form(request, queryset, form, "change_gpu_bounds", "Change GPU bounds")
        low, high = form.cleaned_data["min_gpus"], form.cleaned_data["max_gpus"]
        self._apply(request, queryset,
                    lambda job: verbs.set_gpu_bounds(job, low, high, actor=request.user),
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
