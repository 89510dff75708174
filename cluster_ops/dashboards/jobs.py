"""The Jobs page: JCT and queueing-delay CDFs, a timeline of allocations with their events and reasons, and goodput
vs GPUs of a chosen job (data: ``jobs_data``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import dash_bootstrap_components as dbc
import plotly.graph_objects as go
from dash import Input, Output, dcc, html
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone
from plotly.colors import sample_colorscale

from scheduler.models import RescaleKind, Tenant

from . import common
from .common import COLOURS
from .forecast_data import waiting_forecast
from .jobs_data import Distribution, Goodput, Timeline, completion_times, goodput, job_choices, timeline
from .overview import next_to_start  # the same table as the Overview's

Viewer = User | AnonymousUser
ALL = "__all__"
GANTT_ROWS = 30
GPU_SCALE = [[0, "#9ecae1"], [1, "#08306b"]]  # a bar's GPUs, light (one) to dark (the most in view)
# How each kind of RescaleEvent is drawn on the timeline.
MARKERS = {
    RescaleKind.START: ("triangle-right", COLOURS["busy"]),
    RescaleKind.RESCALE: ("diamond", COLOURS["allocated"]),
    RescaleKind.PREEMPT: ("x", COLOURS["down"]),
    RescaleKind.FINISH: ("square", "#52606d"),
    RescaleKind.CANCEL: ("x-thin-open", "#52606d"),
    RescaleKind.REQUEUE: ("circle-open", COLOURS["pending"]),
    RescaleKind.SETTINGS: ("star", COLOURS["idle"]),
}

app = common.new_app("jobs")
app.layout = common.page_layout(
    dcc.Store(id="jobs-init", data=0),
    common.controls(("Time range", common.time_range_dropdown("jobs-range")),
                    ("Tenant", dbc.Select(id="jobs-tenant", size="sm", options=[], value=ALL))),
    dbc.Row([
        dbc.Col(common.section("Job completion time (CDF)", common.graph("jobs-jct", 300),
                               subtitle="jobs that succeeded in the range: finish − submit"), lg=6),
        dbc.Col(common.section("Queueing delay (CDF)", common.graph("jobs-queue", 300),
                               subtitle="jobs first started in the range: first start − submit"), lg=6),
    ], className="g-3"),
    common.section("When will they start", html.Div(id="jobs-waiting"),
                   subtitle="waiting jobs by estimated start, from the latest forecast"),
    common.section("Timeline of allocations", common.graph("jobs-gantt", 520),
                   subtitle=f"the {GANTT_ROWS} most recently active jobs; bar colour: GPUs held; markers: starts, "
                            "rescales, preemptions and finishes — hover for the scheduler's reason"),
    common.section("Goodput vs GPUs", dbc.Select(id="jobs-job", size="sm", options=[], className="mb-2"),
                   common.graph("jobs-goodput", 320),
                   subtitle="speed the scheduler expects at each GPU count: the profile's model and, once the job "
                            "reported enough, its own refitted model"),
)


@app.callback([Output("jobs-range", "options"), Output("jobs-range", "value")], Input("jobs-init", "data"))
def range_options(_: int, **__: object) -> tuple[list[dict[str, str]], str]:
    return common.range_choices(timezone.now())


def _window(range_value: str | None) -> tuple[datetime, datetime]:
    end = timezone.now()
    return end - common.time_range(range_value, end), end


def _tenant(value: str | None) -> str | None:
    return None if value in (None, "", ALL) else value


@app.callback(Output("jobs-tenant", "options"), Input("jobs-init", "data"))
def tenant_options(_: int, *, user: Viewer, **__: object) -> list[dict[str, str]]:
    names = Tenant.objects.visible_to(user).values_list("name", flat=True)
    return [{"label": "all tenants you see", "value": ALL}] + [{"label": name, "value": name} for name in names]


@app.callback([Output("jobs-jct", "figure"), Output("jobs-queue", "figure")],
              Input("jobs-range", "value"), Input("jobs-tenant", "value"))
def cdfs(range_value: str, tenant: str | None, *, user: Viewer, **_: object) -> tuple[go.Figure, go.Figure]:
    times = completion_times(user, *_window(range_value), _tenant(tenant))
    return (cdf_figure(times.jct, "JCT", "No job succeeded in this range."),
            cdf_figure(times.queueing, "queueing delay", "No job started in this range."))


def cdf_figure(data: Distribution, what: str, empty: str) -> go.Figure:
    if not data.values:
        return common.empty_figure(empty)
    unit, scale = ("h", 3600.0) if (data.p50 or 0) >= 2 * 3600 else ("min", 60.0)
    n = len(data.values)
    fig = go.Figure(go.Scatter(
        x=[v / scale for v in data.values], y=[100 * (i + 1) / n for i in range(n)], mode="lines",
        line={"shape": "hv", "color": COLOURS["allocated"]}, name=what,
        hovertemplate=f"%{{x:.1f}} {unit}: %{{y:.0f}} % of jobs<extra></extra>",
    ))
    for q, value in (("p50", data.p50), ("p99", data.p99)):
        if value is not None:
            fig.add_vline(x=value / scale, line_dash="dot", line_color="#52606d",
                          annotation_text=f"{q} {value / scale:.1f} {unit}", annotation_position="bottom right")
    fig = common.styled(fig, x_title=f"{what} ({unit})", y_title="jobs at or below (%)", height=300, legend=False)
    fig.update_layout(hovermode="closest")
    fig.update_yaxes(range=[0, 101])
    return fig


@app.callback([Output("jobs-gantt", "figure"), Output("jobs-gantt", "style")],
              Input("jobs-range", "value"), Input("jobs-tenant", "value"))
def gantt(range_value: str, tenant: str | None, *, user: Viewer,
          **_: object) -> tuple[go.Figure, dict[str, str]]:
    fig = gantt_figure(timeline(user, *_window(range_value), _tenant(tenant), limit=GANTT_ROWS))
    return fig, {"height": f"{fig.layout.height or 320}px"}  # the chart's box grows with its rows


def gantt_figure(data: Timeline) -> go.Figure:
    if not data.rows:
        return common.empty_figure("No job held GPUs in this range.", height=320)
    low, high = 1, max(max(s.gpus for s in data.segments), 2)
    fig = go.Figure(go.Bar(
        base=[timezone.localtime(s.start) for s in data.segments],
        x=[(s.end - s.start).total_seconds() * 1000 for s in data.segments],
        y=[data.rows[s.job_id] for s in data.segments], orientation="h", name="GPUs held",
        # Each bar's colour is picked here from the scale: plotly.js 4 warns once per bar ("Invalid color
        # specifier") when a bar's colour is a number for it to map, though it maps it.
        marker={"color": sample_colorscale(GPU_SCALE, [(s.gpus - low) / (high - low) for s in data.segments]),
                "colorscale": GPU_SCALE, "cmin": low, "cmax": high, "showscale": True,
                "colorbar": {"title": {"text": "GPUs", "side": "right"}, "thickness": 10}},
        customdata=[[s.gpus, timezone.localtime(s.start).strftime("%m-%d %H:%M"),
                     timezone.localtime(s.end).strftime("%m-%d %H:%M")] for s in data.segments],
        hovertemplate="%{y}<br>%{customdata[0]} GPUs, %{customdata[1]} → %{customdata[2]}<extra></extra>",
    ))
    for kind, (symbol, colour) in MARKERS.items():
        marks = [m for m in data.markers if m.kind == kind]
        if marks:
            fig.add_trace(go.Scatter(
                x=[timezone.localtime(m.at) for m in marks], y=[data.rows[m.job_id] for m in marks], mode="markers",
                name=RescaleKind(kind).label, marker={"symbol": symbol, "color": colour, "size": 9,
                                                      "line": {"width": 1, "color": "#fff"}},
                hovertext=[f"{m.from_gpus}→{m.to_gpus} GPUs: {m.reason}" for m in marks],
                hovertemplate="%{y}<br>%{x|%m-%d %H:%M}<br>%{hovertext}<extra>" + RescaleKind(kind).label
                              + "</extra>",
            ))
    height = max(260, 22 * len(data.rows) + 110)
    fig = common.styled(fig, x_title=f"time ({settings.TIME_ZONE})", y_title="job", height=height)
    fig.update_layout(hovermode="closest", barmode="overlay")
    fig.update_xaxes(type="date")
    fig.update_yaxes(autorange="reversed", rangemode="normal", categoryorder="array",
                     categoryarray=list(data.rows.values()))
    if data.left_out:
        fig.add_annotation(xref="paper", yref="paper", x=1, y=-0.08, showarrow=False, xanchor="right",
                           text=f"{data.left_out} more jobs active in this range not shown", font={"size": 11})
    return fig


@app.callback([Output("jobs-job", "options"), Output("jobs-job", "value")], Input("jobs-tenant", "value"))
def job_options(tenant: str | None, *, user: Viewer, **_: object) -> tuple[list[dict[str, Any]], int | None]:
    choices = job_choices(user, _tenant(tenant))
    return [{"label": label, "value": pk} for pk, label in choices], (choices[0][0] if choices else None)


@app.callback(Output("jobs-goodput", "figure"), Input("jobs-job", "value"))
def goodput_chart(job_id: Any, *, user: Viewer, **_: object) -> go.Figure:
    if job_id in (None, ""):
        return common.empty_figure("No job to show: none of yours in this selection.")
    chosen = common.record_id(job_id)
    if chosen is None:
        return common.empty_figure("No such job: choose one from the list.")
    data = goodput(user, chosen, timezone.now())
    return goodput_figure(data) if data else common.empty_figure("That job is not yours to see.")


def goodput_figure(data: Goodput) -> go.Figure:
    fig = go.Figure()
    fig.add_vrect(x0=data.min_gpus - 0.5, x1=data.max_gpus + 0.5, fillcolor="rgba(47,111,222,0.07)", line_width=0,
                  annotation_text="allowed GPUs", annotation_position="top left")
    for curve, dash in zip(data.curves, ("solid", "dash", "dot"), strict=False):
        fig.add_trace(go.Scatter(x=list(range(len(curve.speeds))), y=curve.speeds, name=curve.label,
                                 mode="lines+markers", line={"dash": dash}, marker={"size": 5},
                                 hovertemplate=f"%{{x}} GPUs: %{{y:,.2f}} {data.unit}"))
    if data.gpus_now:
        fig.add_vline(x=data.gpus_now, line_dash="dot", line_color=COLOURS["busy"],
                      annotation_text=f"holds {data.gpus_now} now", annotation_position="bottom right")
    fig = common.styled(fig, x_title="GPUs", y_title=f"goodput ({data.unit})", height=320)
    fig.update_layout(title={"text": data.title, "font": {"size": 13}, "x": 0.01, "y": 0.98}, margin={"t": 60})
    fig.update_xaxes(dtick=1 if len(data.curves[0].speeds) <= 17 else None, rangemode="tozero")
    return fig


@app.callback(Output("jobs-waiting", "children"), Input("jobs-init", "data"))
def waiting(_: int, *, user: Viewer, **__: object) -> Any:
    return next_to_start(waiting_forecast(user, timezone.now(), limit=30))
