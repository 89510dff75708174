"""The Utilisation page: allocated vs busy GPUs over time, the per-GPU heatmap, GPU-hours held while idle.

Everything comes from ``telemetry.queries``: the line minute by minute for ranges up to 48 hours (``ScopeMinute``:
the cluster, a node or a tenant) and, for the minute or two not rolled up yet, each GPU's latest sample
(``now_point``); hour by hour beyond, with the running hour from its minutes; the heatmap per GPU; per job from
``JobUsageHour``. The line and the heatmap share the range's time axis.
Scopes: staff choose the whole cluster, a node or a tenant; others only their tenants, and see the heatmap rows
of the GPUs their jobs held.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import dash_bootstrap_components as dbc
import numpy as np
import plotly.graph_objects as go
from dash import Input, Output, dcc
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q
from django.utils import timezone

from scheduler.models import Allocation, Gpu, GpuHealth, Node, Tenant
from telemetry import ledger, queries
from telemetry.rollups import HOURS, MINUTES, Level, floor

from . import common
from .common import COLOURS

TOP_JOBS = 15

app = common.new_app("utilisation")
app.layout = common.page_layout(
    dcc.Store(id="util-init", data=0),
    common.controls(("Time range", common.time_range_dropdown("util-range")),
                    ("Scope", dbc.Select(id="util-scope", size="sm", options=[]))),
    common.section("Allocated vs busy GPUs", common.graph("util-over-time", 320),
                   subtitle="busy: held by a job at or above the idle threshold; idle: held below it"),
    common.section("Utilisation per GPU", common.graph("util-heatmap", 260),
                   subtitle="mean GPU utilisation per time bucket; blank: no telemetry"),
    dbc.Row([
        dbc.Col(common.section("GPU-hours held while idle, by tenant", common.graph("util-idle-tenants", 300)), lg=5),
        dbc.Col(common.section(f"GPU-hours held while idle, top {TOP_JOBS} jobs", common.graph("util-idle-jobs", 300)),
                lg=7),
    ], className="g-3"),
)


@dataclass(frozen=True)
class Scope:
    value: str
    label: str
    node: Node | None = None
    tenant: Tenant | None = None


def scopes(user: User | AnonymousUser) -> list[Scope]:
    """What ``user`` may look at: staff the cluster, each node and each tenant; others their tenants."""
    found = [Scope("cluster", "whole cluster")] if user.is_staff else []
    if user.is_staff:
        found += [Scope(f"node:{n.pk}", f"node {n.hostname}", node=n) for n in Node.objects.order_by("hostname")]
    return found + [Scope(f"tenant:{t.pk}", f"tenant {t.name}", tenant=t) for t in Tenant.objects.visible_to(user)]


def resolve(value: str | None, user: User | AnonymousUser) -> Scope | None:
    """The scope named ``value`` if ``user`` may see it, else their first one (None: nothing at all)."""
    allowed = scopes(user)
    return next((s for s in allowed if s.value == value), allowed[0] if allowed else None)


@app.callback([Output("util-range", "options"), Output("util-range", "value")], Input("util-init", "data"))
def range_options(_: int, **__: object) -> tuple[list[dict[str, str]], str]:
    return common.range_choices(timezone.now())


def _window(range_value: str | None) -> tuple[datetime, datetime]:
    end = timezone.now()
    return end - common.time_range(range_value, end), end


@app.callback([Output("util-scope", "options"), Output("util-scope", "value")], Input("util-init", "data"))
def scope_options(_: int, *, user: User | AnonymousUser, **__: object) -> tuple[list[dict[str, str]], str | None]:
    allowed = scopes(user)
    return [{"label": s.label, "value": s.value} for s in allowed], (allowed[0].value if allowed else None)


@app.callback(Output("util-over-time", "figure"), Input("util-range", "value"), Input("util-scope", "value"))
def over_time(range_value: str, scope_value: str | None, *, user: User | AnonymousUser, **_: object) -> go.Figure:
    scope = resolve(scope_value, user)
    if scope is None:
        return common.empty_figure("You belong to no tenant yet: ask an operator to add you.")
    start, end = _window(range_value)
    step = queries.series_step(start, end)
    points = queries.series(start, end, node=scope.node, tenant=scope.tenant, step=step)
    latest = queries.now_point(end, node=scope.node, tenant=scope.tenant) if step is MINUTES else None
    if latest is not None and (not points or latest.start > points[-1].start + MINUTES.width):
        points.append(latest)  # the minute or two not rolled up yet, from the latest samples: the line reaches now
    if not points:
        return common.empty_figure(common.NO_TELEMETRY if scope.tenant is None
                                   else f"No GPU time recorded for {scope.label} in this range yet.")
    times, held, idle = _series(points, scope, step, end)
    busy = [None if h is None or i is None else h - i for h, i in zip(held, idle, strict=True)]
    fig = go.Figure([
        go.Scatter(name="allocated", x=times, y=held, line_color=COLOURS["allocated"]),
        go.Scatter(name="busy", x=times, y=busy,
                   line_color=COLOURS["busy"], fill="tozeroy", fillcolor="rgba(31,157,85,0.12)"),
        go.Scatter(name="idle but allocated", x=times, y=idle, line_color=COLOURS["idle"]),
    ])
    limit, limit_name = _capacity(scope)
    fig.add_hline(y=limit, line_dash="dash", line_color=COLOURS["capacity"], annotation_text=limit_name,
                  annotation_position="top left")
    fig.update_traces(hovertemplate="%{y:.1f} GPUs", mode="lines")
    fig = common.styled(fig, x_title=f"time ({settings.TIME_ZONE})", y_title="GPUs", height=320)
    return _time_axis(fig, start, end)


# Both charts' plot areas start and end at the same pixels (the heatmap's GPU labels left, its colour bar right).
SHARED_MARGIN = {"l": 150, "r": 90}


def _time_axis(fig: go.Figure, start: datetime, end: datetime) -> go.Figure:
    """The line chart and the heatmap below it share one time axis: the range chosen, at the same place."""
    fig.update_xaxes(range=[timezone.localtime(start), timezone.localtime(end)])
    fig.update_layout(margin=SHARED_MARGIN)
    return fig


def _series(points: list[queries.UtilisationPoint], scope: Scope, step: Level,
            end: datetime) -> tuple[list[datetime], list[float | None], list[float | None]]:
    """Times, GPUs held and GPUs held while idle, with the holes made visible.

    A tenant's hours without a job-hour row held nothing: 0 (its minutes come zero-filled). Elsewhere a bucket
    without rollups had no telemetry: the line breaks (None) where two points are more than two steps apart.
    """
    times: list[datetime] = []
    held: list[float | None] = []
    idle: list[float | None] = []
    for i, p in enumerate(points):
        nxt = points[i + 1].start if i + 1 < len(points) else None
        times.append(timezone.localtime(p.start))
        held.append(p.allocated_gpus)
        idle.append(p.idle_allocated_gpus)
        if scope.tenant is not None and step is HOURS:
            last = min(nxt or end, floor(end, HOURS.width))
            for k in range(1, int((last - p.start) / HOURS.width)):  # the idle hours up to the next point
                times.append(timezone.localtime(p.start + k * HOURS.width))
                held.append(0.0)
                idle.append(0.0)
        elif nxt is not None and nxt - p.start > 2 * step.width:
            times.append(timezone.localtime(p.start + step.width))
            held.append(None)
            idle.append(None)
    return times, held, idle


def _capacity(scope: Scope) -> tuple[int, str]:
    if scope.tenant is not None:
        return scope.tenant.gpu_quota, "quota"
    gpus = Gpu.objects.exclude(health=GpuHealth.LOST)
    return (gpus.filter(node=scope.node) if scope.node else gpus).count(), "GPUs not lost"


@app.callback([Output("util-heatmap", "figure"), Output("util-heatmap", "style")],
              Input("util-range", "value"), Input("util-scope", "value"))
def heatmap(range_value: str, scope_value: str | None, *, user: User | AnonymousUser,
            **_: object) -> tuple[go.Figure, dict[str, str]]:
    """The figure, and the chart's height to match its rows."""
    figure = heatmap_figure(resolve(scope_value, user), *_window(range_value))
    return figure, {"height": f"{figure.layout.height or 260}px"}


def heatmap_figure(scope: Scope | None, start: datetime, end: datetime) -> go.Figure:
    if scope is None:
        return common.empty_figure("You belong to no tenant yet: ask an operator to add you.", height=260)
    gpu_ids = _gpus_held(scope.tenant, start, end) if scope.tenant is not None else None
    data = queries.gpu_heatmap_binned(start, end, node=scope.node, gpu_ids=gpu_ids)
    if _blank(data) and end - start > queries.HEATMAP_MINUTE_LIMIT:  # no complete hour yet: the recent minutes
        data = queries.gpu_heatmap_binned(end - queries.HEATMAP_MINUTE_LIMIT, end, node=scope.node, gpu_ids=gpu_ids)
    if not data.gpus or _blank(data):
        return common.empty_figure(common.NO_TELEMETRY, height=260)
    # float32 with NaN for "no telemetry": plotly sends numpy arrays as compact binary, not 100,000s of numbers.
    z = np.round(np.array(data.util, dtype=np.float32), 1)
    height = min(760, max(260, 12 * len(data.gpus) + 90))
    fig = go.Figure(go.Heatmap(
        z=z, x=[timezone.localtime(s) for s in data.starts], y=data.gpus, zmin=0, zmax=100, colorscale="Viridis",
        colorbar={"title": {"text": "utilisation (%)", "side": "right"}, "thickness": 12},
        hovertemplate="%{y}<br>%{x}<br>%{z:.0f} %<extra></extra>", hoverongaps=False,
    ))
    fig = common.styled(fig, x_title=f"time ({settings.TIME_ZONE})", y_title="GPU (node/index)", height=height,
                        legend=False)
    fig.update_layout(hovermode="closest")
    fig.update_yaxes(autorange="reversed", nticks=min(len(data.gpus), 40), rangemode="normal")
    return _time_axis(fig, start, end)


def _blank(data: queries.Heatmap) -> bool:
    return all(v is None for row in data.util for v in row)


def _gpus_held(tenant: Tenant, start: datetime, end: datetime) -> list[int]:
    """GPUs the tenant's jobs held at some time in [start, end)."""
    overlapping = Q(ended_at__isnull=True) | Q(ended_at__gt=start)
    rows = Allocation.objects.filter(overlapping, job__tenant=tenant, started_at__lt=end)
    return list(rows.values_list("gpu_id", flat=True).distinct())


@app.callback([Output("util-idle-tenants", "figure"), Output("util-idle-jobs", "figure")],
              Input("util-range", "value"), Input("util-scope", "value"))
def idle(range_value: str, scope_value: str | None, *, user: User | AnonymousUser,
         **_: object) -> tuple[go.Figure, go.Figure]:
    scope = resolve(scope_value, user)
    start, end = _window(range_value)
    visible = set(Tenant.objects.visible_to(user).values_list("name", flat=True))
    books = ledger.read(start, end, tenant=scope.tenant if scope is not None else None)
    jobs = [j for j in books.lines if j.tenant in visible]
    if not jobs:
        empty = common.empty_figure("No GPU-hours held by jobs in this range yet.")
        return empty, empty
    idle_jobs = [j for j in books.idle_jobs() if j.tenant in visible][:TOP_JOBS]
    return _by_tenant_figure(jobs), (_by_job_figure(idle_jobs) if idle_jobs else
                                     common.empty_figure("No job held GPUs while idle in this range."))


def _by_tenant_figure(jobs: list[ledger.JobLine]) -> go.Figure:
    held: dict[str, float] = {}
    idle: dict[str, float] = {}
    for j in jobs:
        held[j.tenant] = held.get(j.tenant, 0.0) + j.allocated_gpu_hours
        idle[j.tenant] = idle.get(j.tenant, 0.0) + j.idle_allocated_gpu_hours
    names = sorted(held)
    fig = go.Figure([
        go.Bar(name="busy", x=names, y=[held[n] - idle[n] for n in names], marker_color=COLOURS["busy"]),
        go.Bar(name="idle while held", x=names, y=[idle[n] for n in names], marker_color=COLOURS["idle"]),
    ])
    fig.update_layout(barmode="stack")
    fig.update_traces(hovertemplate="%{y:,.1f} GPU-hours")
    return common.styled(fig, x_title="tenant", y_title="GPU-hours", height=300)


def _by_job_figure(jobs: list[ledger.JobLine]) -> go.Figure:
    labels = [f"{j.job} (#{j.job_id}, {j.tenant})" for j in jobs]
    fig = go.Figure([
        go.Bar(name="idle while held", y=labels, x=[j.idle_allocated_gpu_hours for j in jobs], orientation="h",
               marker_color=COLOURS["idle"]),
        go.Bar(name="busy", y=labels, x=[j.allocated_gpu_hours - j.idle_allocated_gpu_hours for j in jobs],
               orientation="h", marker_color=COLOURS["busy"]),
    ])
    fig.update_layout(barmode="stack", hovermode="y unified")
    fig.update_traces(hovertemplate="%{x:,.1f} GPU-hours")
    fig = common.styled(fig, x_title="GPU-hours", y_title="job", height=300)
    fig.update_yaxes(autorange="reversed", rangemode="normal")
    return fig

