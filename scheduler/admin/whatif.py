"""What-if runs and sweeps in admin: results are read, never edited; runs are made through scheduler.whatif."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from .. import whatif
from ..core.config import policy_names
from ..models import (
    WHATIF_FINISHED,
    WhatIfRun,
    WhatIfStatus,
    WhatIfSweep,
)
from ..sim.catalogue import BY_KEY
from ..whatif.traces import display_name
from .common import ReadOnlyInline, badge

WHATIF_COLOURS: dict[str, str] = {
    WhatIfStatus.QUEUED: "#52606d", WhatIfStatus.RUNNING: "#1570ef", WhatIfStatus.SUCCEEDED: "#027a48",
    WhatIfStatus.FAILED: "#b42318",
    WhatIfStatus.CANCELLED: "#6c757d",
}


def readable(value: object) -> str:
    """A summary value for people: floats to four significant digits, missing values as a dash."""
    if value is None or value == "":
        return "–"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def key_value_table(data: dict | None) -> str:
    """A scenario's or summary's fields, each summary figure under its catalogue label and unit."""
    if not data:
        return "–"
    rows = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", ((_label(k), readable(v)) for k, v in data.items()))
    return format_html("<table>{}</table>", rows)


def _label(key: str) -> str:
    known = BY_KEY.get(key)
    return key if known is None else f"{known.label} ({known.unit})" if known.unit else known.label


def comparison_table(comparison: dict | None) -> str:
    """The sweep's comparison: one row per run, then the best run per metric."""
    if not comparison:
        return "– (filled when every run has finished)"
    columns = ["run", "status", *comparison["parameters"], *comparison["metrics"]]
    head = format_html_join("", "<th>{}</th>", ((_label(column),) for column in columns))
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
    list_display = ("id", "policy", "trace", "status_badge", "progress_pct", "created_by", "created_at")
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
        return display_name(str(run.scenario.get("trace", "")))

    @admin.display(description="progress", ordering="progress")
    def progress_pct(self, run: WhatIfRun) -> str:
        return f"{100 * run.progress:.0f}%"

    @admin.display(description="scenario")
    def scenario_table(self, run: WhatIfRun) -> str:
        return key_value_table(run.scenario)

    @admin.display(description="summary")
    def summary_table(self, run: WhatIfRun) -> str:
        return key_value_table(run.summary)

    def has_run_permission(self, request: HttpRequest) -> bool:
        """Running again adds a run: the permission ``POST /api/whatif/`` asks for (this form adds none itself)."""
        return request.user.has_perm("scheduler.add_whatifrun")

    @admin.action(description="Run again", permissions=["run"])
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

    @admin.display(description="policy, power caps, load")
    def setting(self, run: WhatIfRun) -> str:
        scenario = run.scenario
        return f"{scenario.get('policy')}, {whatif.caps_label(scenario)}, load ×{scenario.get('load_factor', 1.0):g}"


@admin.register(WhatIfSweep)
class WhatIfSweepAdmin(ReadOnlyResultsAdmin):
    list_display = ("id", "name", "run_count", "finished_count", "compared", "created_by", "created_at")
    list_display_links = ("id", "name")
    list_select_related = ("created_by",)
    inlines = (WhatIfRunInline,)
    fields = readonly_fields = ("name", "created_by", "created_at", "comparison_table")

    def get_queryset(self, request: HttpRequest) -> QuerySet[WhatIfSweep]:
        finished = Q(runs__status__in=WHATIF_FINISHED)
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
