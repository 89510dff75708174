"""The Fairness page: tenants' GPUs against quota and fair share, borrowing, Jain's index, finish-time fairness, and
why a pending job waits (data and definitions: ``fairness_data``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import dash_bootstrap_components as dbc
import plotly.graph_objects as go
from dash import Input, Output, dcc, html
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone
from plotly.subplots import make_subplots

from . import common
from .common import COLOURS, SEQUENCE
from .fairness_data import (
    FACTORS,
    HOUR,
    FinishTimeFairness,
    PendingExplanation,
    Shares,
    explain_pending,
    finish_time_fairness,
    pending_choices,
    shares_over_time,
    slurm_fairness,
)

Viewer = User | AnonymousUser
NO_TENANT = "You belong to no tenant yet: ask an operator to add you."
HOUR_MS = HOUR.total_seconds() * 1000  # a date axis counts in milliseconds

app = common.new_app("fairness")
app.layout = common.page_layout(
    dcc.Store(id="fair-init", data=0),
    common.controls(("Time range", common.time_range_dropdown("fair-range"))),
    common.section("GPUs held vs quota and fair share", common.graph("fair-shares", 360),
                   subtitle="held: hourly average from job usage, the hour running: held now; quota: guaranteed GPUs; "
                            "fair share: the cluster split by fair-share weight among tenants with jobs waiting or "
                            "running"),
    dbc.Row([
        dbc.Col(common.section("Borrowed GPU-hours (held above quota)", common.graph("fair-borrowed", 280)), lg=6),
        dbc.Col(common.section("Jain's fairness index over tenants", common.graph("fair-jain", 280),
                               subtitle="of share ÷ quota-proportional entitlement; 1 = every tenant got its due"),
                lg=6),
    ], className="g-3"),
    dbc.Row([
        dbc.Col(common.section("Finish-time fairness ρ of jobs finished in the range", common.graph("fair-rho", 320),
                               subtitle="ρ = JCT ÷ time alone on a 1/N share of the cluster; ρ > 1: worse than "
                                        "its fair share"), lg=6),
        dbc.Col(common.section(
            "Why is it pending?",
            dbc.Select(id="fair-pending-job", size="sm", options=[], className="mb-2"),
            html.Div(id="fair-pending-detail"),
        ), lg=6),
    ], className="g-3"),
    common.section("Slurm's own fair share and priority factors", html.Div(id="fair-slurm"),
                   subtitle="on an observed Slurm cluster: sshare's fair-share factor (1 = used nothing, 0.5 = used "
                            "its share) and the mean of sprio's weighted factors over each user's waiting jobs, "
                            "beside the console's GPUs held now and the account's fair share now"),
)


@app.callback([Output("fair-range", "options"), Output("fair-range", "value")], Input("fair-init", "data"))
def range_options(_: int, **__: object) -> tuple[list[dict[str, str]], str]:
    return common.range_choices(timezone.now())


def _window(range_value: str | None) -> tuple[datetime, datetime]:
    end = timezone.now()
    return end - common.time_range(range_value, end), end


def _time_title() -> str:
    return f"time ({settings.TIME_ZONE})"


@app.callback([Output("fair-shares", "figure"), Output("fair-shares", "style"), Output("fair-borrowed", "figure"),
               Output("fair-jain", "figure")],
              Input("fair-range", "value"))
def shares(range_value: str, *, user: Viewer, **_: object) -> tuple[go.Figure, dict[str, str], go.Figure, go.Figure]:
    data = shares_over_time(user, *_window(range_value))
    fig = shares_figure(data)
    return fig, {"height": f"{fig.layout.height or 360}px"}, borrowed_figure(data), jain_figure(data)


def shares_figure(data: Shares) -> go.Figure:
    if not data.tenants:
        return common.empty_figure(NO_TENANT, height=360)
    if not any(any(t.held) for t in data.tenants):
        return common.empty_figure("No GPU time recorded for these tenants in this range (hourly job usage).",
                                   height=360)
    rows = len(data.tenants)
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=min(0.12, 0.3 / rows),
                        subplot_titles=[f"{t.tenant} (quota {t.quota} GPUs)" for t in data.tenants])
    fig.update_annotations(font={"size": 12}, x=0, xanchor="left")  # subplot titles, above each tenant's plot
    # Each step holds its hour: the last one is drawn to the end of its hour (or now), not as a bare edge.
    last = min(data.starts[-1] + HOUR, timezone.now())
    times = [timezone.localtime(s) for s in [*data.starts, last]]
    for row, tenant in enumerate(data.tenants, start=1):
        colour, first = SEQUENCE[(row - 1) % len(SEQUENCE)], row == 1
        fig.add_trace(go.Scatter(name="held", x=times, y=[*tenant.held, tenant.held[-1]],
                                 line={"color": colour, "shape": "hv"}, fill="tozeroy", legendgroup="held",
                                 showlegend=first), row=row, col=1)
        fig.add_trace(go.Scatter(name="fair share", x=times, y=[*tenant.fair_share, tenant.fair_share[-1]],
                                 legendgroup="fair",
                                 line={"color": "#52606d", "dash": "dash", "shape": "hv"}, showlegend=first),
                      row=row, col=1)
        fig.add_trace(go.Scatter(name="quota", x=times, y=[tenant.quota] * len(times), legendgroup="quota",
                                 line={"color": COLOURS["down"], "dash": "dot"}, showlegend=first), row=row, col=1)
        fig.update_yaxes(title_text="GPUs", row=row, col=1)
    fig.update_traces(hovertemplate="%{y:.1f} GPUs", mode="lines")
    fig = common.styled(fig, x_title="", y_title="GPUs", height=max(300, 160 * rows + 90))
    fig.update_layout(legend={"x": 1, "xanchor": "right"})
    fig.update_xaxes(title_text=_time_title(), row=rows, col=1)
    return fig


def borrowed_figure(data: Shares) -> go.Figure:
    if not data.tenants:
        return common.empty_figure(NO_TENANT)
    if not any(any(t.borrowed) for t in data.tenants):
        return common.empty_figure("No tenant held more than its quota in this range.")
    times = [timezone.localtime(s) for s in data.starts]
    # Each bar spans its hour: plotly.js gives a lone bar on a date axis a width of one millisecond.
    fig = go.Figure([go.Bar(name=t.tenant, x=times, y=t.borrowed, width=HOUR_MS * 0.95, offset=0,
                            hovertemplate="%{y:.2f} GPU-h") for t in data.tenants if any(t.borrowed)])
    fig.update_layout(barmode="stack")
    return _hours_axis(common.styled(fig, x_title=_time_title(), y_title="GPU-hours above quota", height=280), data)


def jain_figure(data: Shares) -> go.Figure:
    if all(value is None for value in data.jain):
        return common.empty_figure("No tenant had jobs waiting or running in this range.")
    times = [timezone.localtime(s) for s in data.starts]
    fig = go.Figure(go.Scatter(name="Jain's index", x=times, y=data.jain, mode="lines+markers", connectgaps=False,
                               line={"color": COLOURS["allocated"], "shape": "hv"}, marker={"size": 4},
                               hovertemplate="%{y:.3f}"))
    fig = common.styled(fig, x_title=_time_title(), y_title="Jain's index (1 = fair)", height=280, legend=False)
    fig.update_yaxes(range=[0, 1.05])
    return _hours_axis(fig, data)


def _hours_axis(fig: go.Figure, data: Shares) -> go.Figure:
    """The time axis spans the hours shown, however few have a value (one point alone got a 1-ms-wide axis)."""
    fig.update_xaxes(type="date", range=[timezone.localtime(data.starts[0]),
                                         timezone.localtime(data.starts[-1] + HOUR)])
    return fig


@app.callback(Output("fair-rho", "figure"), Input("fair-range", "value"))
def rho(range_value: str, *, user: Viewer, **_: object) -> go.Figure:
    return rho_figure(finish_time_fairness(user, *_window(range_value)))


def rho_figure(data: FinishTimeFairness) -> go.Figure:
    if not data.rhos:
        return common.empty_figure("No job you can see finished in this range.")
    shown = [min(value, 10.0) for value in data.rhos]  # one runaway job must not squash the rest
    fig = go.Figure(go.Histogram(x=shown, xbins={"start": 0, "size": 0.25}, marker_color=COLOURS["allocated"],
                                 hovertemplate="ρ %{x}: %{y} jobs<extra></extra>", name="jobs"))
    fig.add_vline(x=1, line_dash="dash", line_color=COLOURS["down"], annotation_text="ρ = 1 (fair)",
                  annotation_position="top right")
    unfair = f"{data.unfair_fraction:.0%}" if data.unfair_fraction is not None else "–"
    fig.add_annotation(xref="paper", yref="paper", x=1, y=1.12, showarrow=False, xanchor="right",
                       text=f"{len(data.rhos)} jobs · p50 {data.p50:.2f} · p99 {data.p99:.2f} · {unfair} with ρ > 1")
    fig = common.styled(fig, x_title="finish-time fairness ρ (values above 10 shown at 10)", y_title="jobs",
                        height=320, legend=False)
    fig.update_layout(hovermode="closest", margin={"t": 40})
    return fig


@app.callback([Output("fair-pending-job", "options"), Output("fair-pending-job", "value")],
              Input("fair-init", "data"))
def pending_options(_: int, *, user: Viewer, **__: object) -> tuple[list[dict[str, Any]], int | None]:
    choices = pending_choices(user)
    return [{"label": label, "value": pk} for pk, label in choices], (choices[0][0] if choices else None)


@app.callback(Output("fair-pending-detail", "children"), Input("fair-pending-job", "value"))
def pending_detail(job_id: Any, *, user: Viewer, **_: object) -> Any:
    if job_id in (None, ""):
        return html.Div("No job of yours is waiting for GPUs.", className="text-muted small p-2")
    chosen = common.record_id(job_id)
    if chosen is None:
        return html.Div("No such job: choose one from the list.", className="text-muted small p-2")
    why = explain_pending(user, chosen, timezone.now())
    if why is None:
        return html.Div("That job is no longer waiting.", className="text-muted small p-2")
    return explanation(why)


def explanation(why: PendingExplanation) -> Any:
    facts = dbc.Row([
        dbc.Col(common.stat("Queue position", f"{why.position} of {why.queued}", "by priority, then submission"),
                xs=6, md=4),
        dbc.Col(common.stat("Waiting", _duration(why.waited), f"{why.state} since submission"), xs=6, md=4),
        dbc.Col(common.stat("Wants", why.wants, f"tenant {why.tenant}"), xs=12, md=4),
    ], className="g-2 mb-2")
    reason = dbc.Alert([html.Strong("Last round: "), why.reason], color="light", className="small py-2 mb-2 border")
    if why.forecast:
        told = "; ".join(part for part in (why.forecast, why.frees, f"moved {why.moved}" if why.moved else "") if part)
        reason = html.Div([reason, dbc.Alert([html.Strong("Forecast: "), told], color="info",
                                             className="small py-2 mb-2", id="fair-pending-forecast")])
    rows = [(h.job, h.tenant, h.gpus, h.shrinkable, h.priority,
             timezone.localtime(h.since).strftime("%Y-%m-%d %H:%M") if h.since else "—") for h in why.holders]
    holders = common.table(["job holding its GPUs", "tenant", "GPUs", "could give back", "priority", "since"], rows,
                           empty="No running job holds GPUs of the type it needs.", table_id="fair-holders")
    return html.Div([facts, reason, html.Div("Who holds the GPUs it needs (largest first, then lowest priority)",
                                             className="small text-muted mb-1"), holders])


def _duration(delta: timedelta) -> str:
    minutes = delta.total_seconds() / 60
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


@app.callback(Output("fair-slurm", "children"), Input("fair-init", "data"))
def slurm_shares(_: int, *, user: Viewer, **__: object) -> Any:
    view = slurm_fairness(user)
    if view is None:
        return html.Div("Shown when the console observes a Slurm cluster (back-end slurm-observer): no reading yet.",
                        className="text-muted small p-2")
    rows = [(row.account, row.user, _number(row.fair_share_factor, 3), _number(row.norm_shares, 3),
             _number(row.effective_usage, 3), row.waiting, _number(row.priority, 0),
             *(_number(row.factors[name], 0) for name in FACTORS), row.gpus_held, _number(row.account_fair_share, 1))
            for row in view.rows]
    read = timezone.localtime(view.read_at).strftime("%Y-%m-%d %H:%M:%S")
    return html.Div([
        common.table(["account", "user", "fair-share factor", "shares", "effective usage", "waiting jobs",
                      "priority", "age", "fair share", "job size", "partition", "QOS", "GPUs held (console)",
                      "account's fair share, GPUs (console)"], rows,
                     empty="No Slurm user of your accounts.", table_id="fair-slurm-table"),
        html.Div(f"read from sshare and sprio at {read}", className="small text-muted mt-1"),
    ])


def _number(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"
