"""The Overview page: the cluster right now, refreshed every 30 s (data: ``overview_data.overview``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import dash_bootstrap_components as dbc
import plotly.graph_objects as go
from dash import Input, Output, dcc, html
from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone

from . import common
from .common import COLOURS
from .forecast_data import WaitingForecast, waiting_forecast
from .overview_data import Alert, Overview, RoundSummary, overview

REFRESH_MS = 30_000
OUTPUTS = ["overview-stats", "overview-gpus", "overview-tenant-jobs", "overview-waits", "overview-alerts",
           "overview-next", "overview-tenants", "overview-round"]

app = common.new_app("overview")
app.layout = common.page_layout(
    dcc.Interval(id="overview-tick", interval=REFRESH_MS),
    html.Div(id="overview-stats", className="mb-3"),
    dbc.Row([
        dbc.Col(common.section("GPUs now", common.graph("overview-gpus", 220),
                               subtitle="allocated GPUs by their latest utilisation sample"), lg=5),
        dbc.Col(common.section("Jobs per tenant", common.graph("overview-tenant-jobs", 220)), lg=7),
    ], className="g-3"),
    dbc.Row([
        dbc.Col(common.section("Alerts", html.Div(id="overview-alerts", className="alert-list")), lg=5),
        dbc.Col(common.section("Queue: how long pending jobs have waited", common.graph("overview-waits", 240)), lg=7),
    ], className="g-3"),
    common.section("Next to start", html.Div(id="overview-next"),
                   subtitle="the latest forecast: the live queue run forward through the simulator under the live "
                            "policy"),
    common.section("Tenants", html.Div(id="overview-tenants")),
    common.section("Scheduler", html.Div(id="overview-round")),
)


@app.callback([Output(name, "figure" if name in ("overview-gpus", "overview-tenant-jobs", "overview-waits")
                      else "children") for name in OUTPUTS],
              Input("overview-tick", "n_intervals"))
def refresh(_tick: int | None, *, user: User | AnonymousUser, **_: object) -> list[Any]:
    data = overview(user, timezone.now())
    return [stats(data), gpus_figure(data, user.is_staff), tenant_jobs_figure(data), waits_figure(data),
            alert_list(data.alerts), next_to_start(waiting_forecast(user, data.now)), tenants_table(data),
            round_panel(data.round)]


def next_to_start(forecast: WaitingForecast) -> Any:
    """The viewer's waiting jobs by estimated start, with what frees their GPUs and why an estimate moved."""
    if forecast.as_of is None:
        return html.Div("No forecast yet: the background worker makes one within a round of jobs waiting.",
                        className="text-muted small p-2")
    rows = [(w.job, w.tenant, w.gpus, w.starts, w.frees, w.moved) for w in forecast.jobs]
    return html.Div([
        html.P(f"As of {timezone.localtime(forecast.as_of):%H:%M:%S}, under {forecast.policy}.",
               className="small text-muted mb-1"),
        common.table(["job", "tenant", "GPUs", "estimate", "what frees its GPUs", "moved since the last forecast"],
                     rows, empty="None of your jobs is waiting.", table_id="overview-next-table"),
    ])


def stats(data: Overview) -> dbc.Row:
    inv, use, q = data.inventory, data.usage, data.queue
    down = inv.gpus_lost + inv.gpus_cordoned
    cards = [
        common.stat("Nodes ready", f"{inv.nodes_ready} / {inv.nodes}",
                    f"{inv.nodes - inv.nodes_ready} cordoned", "danger" if inv.nodes_ready < inv.nodes else ""),
        common.stat("GPUs ready", f"{inv.gpus_ready} / {inv.gpus}",
                    f"{inv.gpus_degraded} degraded · {down} down", "danger" if inv.gpus_lost else ""),
        common.stat("GPUs allocated", str(use.allocated), f"of {inv.gpus_ready} ready"),
        common.stat("Busy now", str(use.busy) if use.telemetry else "–",
                    f"{use.idle} idle · {use.unreported} without telemetry" if use.telemetry else common.NO_TELEMETRY,
                    "warning" if use.idle else ""),
        common.stat("Queue", f"{q.pending} job{'s' if q.pending != 1 else ''}",
                    f"wait p50 {_minutes(q.p50_min)} · p90 {_minutes(q.p90_min)} · p99 {_minutes(q.p99_min)}"
                    if q.pending else "nothing waiting"),
        common.stat("Worker", _ago(data.heartbeat.last_seen_at, data.now) if data.heartbeat else "never",
                    f"last heartbeat from {data.heartbeat.worker}" if data.heartbeat else "no worker heartbeat yet",
                    "" if data.heartbeat else "danger"),
    ]
    return dbc.Row([dbc.Col(card, xs=6, md=4, xl=2) for card in cards], className="g-2")


def _minutes(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f} min" if value < 120 else f"{value / 60:.1f} h"


def _ago(at: datetime, now: datetime) -> str:
    seconds = max(0, int((now - at).total_seconds()))
    return f"{seconds} s ago" if seconds < 120 else f"{seconds // 60} min ago"


def gpus_figure(data: Overview, staff: bool) -> go.Figure:
    inv, use = data.inventory, data.usage
    if not inv.gpus:
        return common.empty_figure("No GPUs registered yet: node agents register their GPUs when they start.")
    rest = max(0, inv.gpus_ready + inv.gpus_degraded - use.allocated)
    parts = [("busy", use.busy, COLOURS["busy"]), ("idle but allocated", use.idle, COLOURS["idle"]),
             ("allocated, no telemetry", use.unreported, COLOURS["allocated"]),
             ("free" if staff else "free or other tenants'", rest, "#d9e2ec"),
             ("down (lost or cordoned)", inv.gpus_lost + inv.gpus_cordoned, COLOURS["down"])]
    fig = go.Figure([go.Bar(name=name, x=[n], y=["GPUs"], orientation="h", marker_color=colour,
                            text=[n] if n else None, textposition="inside",
                            hovertemplate=f"{name}: %{{x}}<extra></extra>") for name, n, colour in parts if n])
    fig.update_layout(barmode="stack", hovermode="closest")
    fig = common.styled(fig, x_title="GPUs", y_title="cluster", height=220)
    fig.update_layout(legend={"orientation": "h", "y": -0.4, "yanchor": "top"}, margin={"t": 10, "b": 20})
    fig.update_yaxes(showticklabels=False)
    return fig


def tenant_jobs_figure(data: Overview) -> go.Figure:
    if not data.tenants:
        return common.empty_figure("No tenant to show: ask an operator to add you to one.")
    names = [t.name for t in data.tenants]
    fig = go.Figure([
        go.Bar(name="running jobs", x=names, y=[t.running for t in data.tenants], marker_color=COLOURS["running"]),
        go.Bar(name="pending jobs", x=names, y=[t.pending for t in data.tenants], marker_color=COLOURS["pending"]),
    ])
    fig.update_layout(barmode="group", hovermode="x unified")
    return common.styled(fig, x_title="tenant", y_title="jobs", height=220)


def waits_figure(data: Overview) -> go.Figure:
    if not data.queue.pending:
        return common.empty_figure("The queue is empty: no job is waiting.")
    fig = go.Figure(go.Histogram(x=data.queue.waits_min, nbinsx=30, marker_color=COLOURS["pending"],
                                 name="pending jobs", hovertemplate="%{x} min: %{y} jobs<extra></extra>"))
    for label, value in (("p50", data.queue.p50_min), ("p90", data.queue.p90_min)):
        if value is not None:
            fig.add_vline(x=value, line_dash="dot", line_color="#52606d", annotation_text=label)
    fig.update_layout(hovermode="closest")
    return common.styled(fig, x_title="waiting so far (minutes)", y_title="jobs", height=240, legend=False)


def alert_list(alerts: list[Alert]) -> Any:
    if not alerts:
        return dbc.Alert("No alerts: no lost GPU, no idle allocation, no job waiting too long.", color="success",
                         className="mb-0 py-2 small")
    return dbc.ListGroup([dbc.ListGroupItem([dbc.Badge(a.kind, color=a.severity, className="me-2"), a.text])
                          for a in alerts], flush=True)


def tenants_table(data: Overview) -> Any:
    rows = [(t.name, t.quota, t.running, t.gpus_held, t.pending, t.gpus_wanted) for t in data.tenants]
    return common.table(["tenant", "GPU quota", "running jobs", "GPUs held", "pending jobs", "GPUs wanted (min)"],
                        rows, empty="You belong to no tenant yet: ask an operator to add you.",
                        table_id="overview-tenants-table")


def round_panel(summary: RoundSummary) -> Any:
    policy = html.P([
        "Policy ", html.B(summary.policy), f", a round every {summary.round_seconds} s on the ",
        html.B(summary.executor), " executor",
        html.Span(" — paused", className="text-danger") if summary.paused else "", ".",
    ], className="mb-2")
    last = summary.last
    if last is None:
        return html.Div([policy, html.P("No scheduling round has run yet.", className="text-muted small mb-0")])
    took = f", {last.duration_ms:.0f} ms" if last.duration_ms is not None else ""
    head = html.P([f"Last round {timezone.localtime(last.started_at):%Y-%m-%d %H:%M:%S} ({last.status}{took}): "
                   f"{last.jobs_considered} jobs considered, {last.starts} started, {last.rescales} rescaled, "
                   f"{last.preemptions} preempted.", html.Span(f" {last.error}", className="text-danger")
                   if last.error else ""], className="small mb-2")
    rows = [(d.kind, d.job, d.tenant, d.gpus, d.gpu_type, d.reason) for d in summary.decisions]
    return html.Div([policy, head, common.table(["decision", "job", "tenant", "GPUs", "GPU type", "reason"], rows,
                                                empty="No decision about your jobs in that round.")])
