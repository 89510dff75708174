"""The Energy what-if page: replay the cluster's recent history (or a trace) under a power cap, idle-node
power-down, another policy or load, against the live baseline, through the simulator on Celery; then the trade-off
of energy, CO₂ and cost against average and p99 JCT, overall and per tenant. Past sweeps stay to compare.

Data, scenarios and the launch: the what-if domain (``scheduler.whatif``: ``history``, ``views``). Only staff start
what-ifs; everyone sees past ones, with the per-tenant figures of their own tenants and no error texts.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import dash_bootstrap_components as dbc
import plotly.graph_objects as go
from dash import Input, Output, State, dcc, html
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.utils import timezone

from scheduler.api.throttles import WhatIfStartThrottle
from scheduler.core.config import policy_label, policy_summary
from scheduler.core.power import DEFAULT_GRID_G_CO2_PER_KWH, DEFAULT_PRICE_PER_KWH, DEFAULT_PUE, DEFAULT_SPECS
from scheduler.live.config import scheduler_settings
from scheduler.sim.catalogue import metric
from scheduler.sim.metrics import SimulationSummary
from scheduler.sim.presets import PRESET_LOADERS
from scheduler.sim.scenario import number_error
from scheduler.whatif.history import (
    HISTORY,
    LIVE_CLUSTER,
    Choices,
    cluster_gpu_types,
    history_span,
    policy_options,
    span_text,
    start_whatif,
)
from scheduler.whatif.traces import trace_files
from scheduler.whatif.views import (
    SweepView,
    past_sweeps,
    sweep_view,
    tenant_energy,
    tenant_times,
    trade_off,
    visible_tenant_names,
)

from . import common
from .common import COLOURS

Viewer = User | AnonymousUser
TICK_MS = 1000
MAX_DAYS = 90  # of history to replay
DEFAULT_DAYS = 7
COST_LABEL = metric("cost").label  # its figures are in settings.CURRENCY
START_PERMISSION = "scheduler.add_whatifrun"
NO_RUN = "No what-if yet: choose the settings above and press “Run what-if”."


def _number(component_id: str, value: float | None, step: float, low: float, high: float,
            placeholder: str = "") -> dbc.Input:
    return dbc.Input(id=component_id, type="number", value=value, step=step, min=low, max=high, size="sm",
                     placeholder=placeholder)


def _field(label: str, control: Any, width: int = 3) -> dbc.Col:
    return dbc.Col([dbc.Label(label, className="small text-muted mb-0"), control], xs=12, sm=6, lg=width)


CAP_TYPES = sorted(DEFAULT_SPECS)  # a slider each; the chosen cluster's types are shown
DEFAULT_CAP = 0.8


def _cap_slider(gpu_type: str) -> dbc.Col:
    slider = dcc.Slider(id=f"energy-cap-{gpu_type}", min=0.5, max=1.0, step=0.05, value=DEFAULT_CAP,
                        marks={v / 100: f"{v / 100:g}" for v in range(50, 101, 10)})
    return dbc.Col([html.Span(gpu_type.upper(), className="small fw-semibold"), slider],
                   id=f"energy-cap-col-{gpu_type}", xs=12, md=6, lg=3, style={"display": "none"})


app = common.new_app("energy")
app.layout = common.page_layout(
    dcc.Store(id="energy-init", data=0),
    dcc.Interval(id="energy-tick", interval=TICK_MS, disabled=True),
    common.section("Scenario", dbc.Row([
        _field("Replay", dbc.Select(id="energy-source", size="sm", value=HISTORY, options=[
            {"label": "this cluster's recent history", "value": HISTORY}])),
        _field("History of the last (days)", html.Div([_number("energy-days", DEFAULT_DAYS, 1, 1, MAX_DAYS),
                                                        html.Div(id="energy-history", className="small text-muted")]),
               2),
        _field("Cluster", dbc.Select(id="energy-cluster", size="sm", value=LIVE_CLUSTER, options=[
            {"label": "this cluster (inventory)", "value": LIVE_CLUSTER},
            *({"label": f"preset {name}", "value": name} for name in PRESET_LOADERS)])),
        _field("Jobs (first N; empty: all)", _number("energy-max-jobs", None, 1, 1, 100_000, "all"), 2),
        _field("Policy", dbc.Select(id="energy-policy", size="sm", options=[], value="pollux"), 2),
        dbc.Col([dbc.Label("Power cap per GPU type (fraction of its board power)", className="small text-muted mb-0"),
                 dbc.Row([_cap_slider(gpu_type) for gpu_type in CAP_TYPES], className="g-2"),
                 html.Div(id="energy-cap-watts", className="small text-muted")], xs=12),
        _field("Idle nodes", dbc.Checklist(id="energy-powerdown", switch=True, value=[],
                                           options=[{"label": "power down", "value": "on"}]), 2),
        _field("Spare nodes kept on", _number("energy-spares", 1, 1, 0, 10_000), 2),
        _field("Least time off (min)", _number("energy-min-off", 10, 1, 0, 1440), 2),
        _field("Load factor (× arrival rate)", _number("energy-load", 1.0, 0.1, 0.1, 10), 2),
        _field("PUE (facility ÷ IT energy)", _number("energy-pue", DEFAULT_PUE, 0.01, 1, 5), 2),
        _field("Grid intensity (g CO₂/kWh)", _number("energy-grid", DEFAULT_GRID_G_CO2_PER_KWH, 1, 0, 5000), 2),
        _field(f"Price ({settings.CURRENCY} per kWh)", _number("energy-price", DEFAULT_PRICE_PER_KWH, 0.01, 0, 1000),
               2),
        dbc.Col(dbc.Button("Run what-if", id="energy-run", color="primary", size="sm", className="w-100"),
                xs=12, sm=6, lg=2, className="d-flex align-items-end"),
    ], className="g-2"), html.Div(id="energy-message", className="mt-2"),
        subtitle="the baseline replays the same jobs under the live policy, uncapped, with every node on"),
    common.section("Progress", html.Div(id="energy-progress"),
                   dbc.Row([dbc.Col(dbc.Label("Showing", html_for="energy-sweep", className="small text-muted mb-0"),
                                    width="auto"),
                            dbc.Col(dbc.Select(id="energy-sweep", size="sm", options=[]))],
                           className="g-2 align-items-center mt-2")),
    html.Div(id="energy-stats", className="mb-3"),
    dbc.Row([
        dbc.Col(common.section("Change against the baseline", common.graph("energy-tradeoff", 300),
                               subtitle="negative is better for every one of these"), lg=6),
        dbc.Col(common.section("Energy vs job completion time", common.graph("energy-scatter", 300),
                               subtitle="each run: average JCT (filled) and p99 JCT (open)"), lg=6),
    ], className="g-3"),
    dbc.Row([
        dbc.Col(common.section("Per tenant: job completion time", common.graph("energy-tenants", 300),
                               subtitle="JCT of each tenant's jobs in each run: bar = average, whisker = p99"), lg=6),
        dbc.Col(common.section("Per tenant: energy", common.graph("energy-tenant-energy", 300),
                               subtitle="facility energy of the GPUs each tenant's jobs held, in each run"), lg=6),
    ], className="g-3"),
    common.section("Past what-ifs", html.Div(id="energy-past")),
)


# --- controls -----------------------------------------------------------------------------------


@app.callback([Output("energy-source", "options"), Output("energy-policy", "options"),
               Output("energy-policy", "value"), Output("energy-run", "disabled"), Output("energy-days", "max"),
               Output("energy-days", "value"), Output("energy-history", "children")],
              Input("energy-init", "data"))
def init(_: int, *, user: Viewer, **__: object) -> tuple[Any, ...]:
    """The choices start from the live settings (the what-if's policy is the live one: change one thing at a time)
    and offer no more history than the cluster has."""
    sources = [{"label": "this cluster's recent history", "value": HISTORY}] + [
        {"label": f"trace {path} ({fmt})", "value": path} for path, fmt in trace_files(str(settings.TRACES_DIR))]
    live = scheduler_settings().policy
    policies = [{"label": f"{policy_label(name)} (live)" if name == live else policy_label(name), "value": name,
                 "title": policy_summary(name)}
                for name in policy_options()]
    span = history_span(timezone.now())
    days = MAX_DAYS if span is None else max(1, min(MAX_DAYS, -(-span // timedelta(days=1))))
    said = "no job has started yet" if span is None else f"history recorded: {span_text(span)}"
    return sources, policies, live, not may_start_whatifs(user), days, min(DEFAULT_DAYS, days), said


@app.callback([*(Output(f"energy-cap-col-{t}", "style") for t in CAP_TYPES), Output("energy-cap-watts", "children")],
              Input("energy-cluster", "value"), Input("energy-init", "data"),
              *(Input(f"energy-cap-{t}", "value") for t in CAP_TYPES))
def cap_controls(cluster: str | None, _: int, *caps: float | None, **__: object) -> list[Any]:
    """Show a cap slider for each GPU type of the chosen cluster, and each type's power limit under its cap."""
    chosen = cluster if isinstance(cluster, str) and (cluster == LIVE_CLUSTER or cluster in PRESET_LOADERS) else None
    present = set(cluster_gpu_types(chosen or LIVE_CLUSTER, timezone.now()))
    styles = [{} if gpu_type in present else {"display": "none"} for gpu_type in CAP_TYPES]
    limits = [f"{t} {DEFAULT_SPECS[t].tdp_w:.0f} → {_cap_or_one(cap) * DEFAULT_SPECS[t].tdp_w:.0f} W"
              for t, cap in zip(CAP_TYPES, caps, strict=True) if t in present]
    if not limits:
        return [*styles, "No GPUs in this cluster yet: nothing to cap."]
    return [*styles, f"Power limit per GPU: {', '.join(limits)}."]


def _cap_or_one(cap: Any) -> float:
    try:
        return common.number(cap, "cap", 0.1, 1.0, 1.0)
    except ValidationError:
        return 1.0  # only a label here; the what-if itself refuses the value


CONTROLS = ["energy-source", "energy-days", "energy-cluster", "energy-max-jobs", "energy-policy",
            "energy-powerdown", "energy-spares", "energy-min-off", "energy-load", "energy-pue", "energy-grid",
            "energy-price", *(f"energy-cap-{gpu_type}" for gpu_type in CAP_TYPES)]


def choices_from(values: list[Any]) -> Choices:
    """The controls' values (``CONTROLS`` order) as ``Choices``. Each number is checked by the scenario's own rule
    for its field (``scenario.number_error``: the API's limits and message); an empty box is refused by name, never
    replaced by a default behind the operator's back — only "Jobs" may be empty (all of them)."""
    if len(values) != len(CONTROLS):
        raise ValidationError({"controls": "The page sent a different set of settings; reload it."})
    source, days, cluster, max_jobs, policy, down, spares, min_off, load, pue, grid, price = values[:12]
    texts = {"source": source, "cluster": cluster, "policy": policy}
    if not all(value is None or (isinstance(value, str) and len(value) <= 1000) for value in texts.values()):
        raise ValidationError({name: "Expected a choice from the list." for name, value in texts.items()})
    minutes_off = _whole(min_off)
    numbers = {"max_jobs": _whole(max_jobs) if max_jobs not in (None, "") else None,
               "power_down_spares": _whole(spares) if down else None,
               "min_off_seconds": 60 * minutes_off if _is_number(minutes_off) else minutes_off,
               "load_factor": load, "pue": pue, "grid_g_co2_per_kwh": grid, "price_per_kwh": price}
    errors = {name: problem for name, value in numbers.items() if (problem := number_error(name, value))}
    if (problem := _days_error(days)) is not None:
        errors["days"] = problem
    caps = dict(zip(CAP_TYPES, values[12:], strict=True))
    errors |= {f"power_caps_by_type ({t})": problem for t, cap in caps.items()
               if cap is not None and (problem := number_error("power_cap_fraction", cap))}
    if errors:
        raise ValidationError(errors)
    default = Choices()
    return Choices(
        source=source or HISTORY, days=_whole(days), cluster=cluster or LIVE_CLUSTER, policy=policy or default.policy,
        max_jobs=numbers["max_jobs"], power_caps={t: float(cap) if cap is not None else 1.0 for t, cap in caps.items()},
        power_down_spares=numbers["power_down_spares"], min_off_seconds=float(numbers["min_off_seconds"]),
        load_factor=float(load), pue=float(pue), grid_g_co2_per_kwh=float(grid), price_per_kwh=float(price),
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value: Any) -> Any:
    """A control's whole number as an ``int`` (a browser sends 7.0 for 7); anything else as it came, for the rule
    to name."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _days_error(days: Any) -> str | None:
    days = _whole(days)
    if not isinstance(days, int) or isinstance(days, bool):
        return f"Expected a whole number of days, got {str(days)[:40]!r}."
    return None if 1 <= days <= MAX_DAYS else f"Must be between 1 and {MAX_DAYS}, got {str(days)[:40]}."


def may_start_whatifs(user: Viewer) -> bool:
    """The permission the API asks for the same start (``POST /api/whatif/``)."""
    return bool(user.is_authenticated and user.is_staff and user.has_perm(START_PERMISSION))


common.action("energy", "energy-run.n_clicks", may_start_whatifs, "start what-ifs")


@app.callback([Output("energy-sweep", "options"), Output("energy-sweep", "value"),
               Output("energy-message", "children")],
              Input("energy-run", "n_clicks"), Input("energy-init", "data"), *[State(c, "value") for c in CONTROLS])
def run_or_list(clicks: int | None, _: int, *values: Any, user: Viewer, **__: object) -> tuple[Any, Any, Any]:
    """On load: the past sweeps, the newest shown. On "Run what-if": start one and show it."""
    message, chosen = None, None
    if not may_start_whatifs(user):
        message = html.Div("Operators with the permission to add what-if runs start what-ifs; you see past ones, "
                           "with your tenants' own figures.", className="small text-muted")
    if clicks:
        if not may_start_whatifs(user):
            message = dbc.Alert("Only operators with the permission to add what-if runs start what-ifs.",
                                color="warning", className="small py-2 mb-0")
        else:
            try:
                choices = choices_from(list(values))
                if (throttled := WhatIfStartThrottle().refused(user)) is not None:
                    raise ValueError(throttled)
                sweep = start_whatif(user, choices, timezone.now())
                chosen = sweep.pk
                message = dbc.Alert(f"Started “{sweep.name}”.", color="success", className="small py-2 mb-0")
            except ValidationError as error:
                problems = "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in error.message_dict.items())
                message = dbc.Alert(f"Not started — {problems}", color="danger", className="small py-2 mb-0")
            except ValueError as error:
                message = dbc.Alert(f"Not started — {error}", color="danger", className="small py-2 mb-0")
    past = past_sweeps()
    options = [{"label": f"#{p.sweep_id} · {timezone.localtime(p.created_at):%Y-%m-%d %H:%M} · {p.name}",
                "value": p.sweep_id} for p in past]
    return options, chosen or (past[0].sweep_id if past else None), message


# --- results ------------------------------------------------------------------------------------


@app.callback([Output("energy-progress", "children"), Output("energy-tick", "disabled"),
               Output("energy-stats", "children"), Output("energy-tradeoff", "figure"),
               Output("energy-scatter", "figure"), Output("energy-tenants", "figure"),
               Output("energy-tenant-energy", "figure"), Output("energy-past", "children")],
              Input("energy-sweep", "value"), Input("energy-tick", "n_intervals"))
def show(sweep_id: Any, _: int | None, *, user: Viewer, **__: object) -> tuple[Any, ...]:
    chosen = common.record_id(sweep_id)
    view = sweep_view(chosen, user) if chosen is not None else None
    past = past_table()
    if view is None:
        said = NO_RUN if sweep_id in (None, "") else "No such what-if: choose one from the list."
        empty = common.empty_figure(said)
        return (html.Div(said, className="text-muted small"), True, None, empty, empty, empty, empty, past)
    if not view.finished:
        waiting = common.empty_figure("Simulating… the comparison appears when every run has finished.")
        return progress_bars(view), False, None, waiting, waiting, waiting, waiting, past
    visible = visible_tenant_names(user)
    return (progress_bars(view), True, stats(view), change_figure(view), scatter_figure(view),
            tenants_figure(view, visible), tenant_energy_figure(view, visible), past)


def progress_bars(view: SweepView) -> Any:
    rows = []
    for run in view.runs:
        colour = {"failed": "danger", "succeeded": "success"}.get(run.status, "primary")
        bar = dbc.Progress(value=round(100 * run.progress), label=f"{run.progress:.0%}", color=colour,
                           striped=run.status == "running", animated=run.status == "running",
                           style={"height": "1.1rem"})
        rows.append(dbc.Row([dbc.Col(html.Span(run.label, className="small"), md=4),
                             dbc.Col(bar, md=6), dbc.Col(html.Span(run.status, className="small text-muted"), md=2)],
                            className="g-2 align-items-center mb-1"))
        if run.error:
            rows.append(dbc.Alert(run.error, color="danger", className="small py-1 mb-1"))
    state = "sweep-finished" if view.finished else "sweep-running"
    return html.Div([html.Div(view.name, className="small fw-semibold mb-1"), *rows], className=state)


def _succeeded(view: SweepView) -> list[tuple[str, SimulationSummary]]:
    return [(run.label, run.summary) for run in view.runs if run.status == "succeeded" and run.summary]


def stats(view: SweepView) -> Any:
    done = _succeeded(view)
    if len(done) < 2 or view.runs[0].summary is None:
        return dbc.Alert("The baseline or the what-if failed: nothing to compare.", color="warning", className="small")
    cards = []
    for row in trade_off(done[0][1], done[-1][1]):
        change = f"{row.change:+.1%} vs baseline" if row.change is not None else "no baseline figure"
        tone = "" if row.change is None or abs(row.change) < 0.005 else ("success" if row.change < 0 else "danger")
        unit = settings.CURRENCY if row.metric == COST_LABEL else row.unit
        value, base = _amount(row.value, unit), _amount(row.baseline, unit)
        cards.append(common.stat(row.metric, value, f"{change} ({base})", tone))
    return dbc.Row([dbc.Col(card, xs=6, md=4, xl=True) for card in cards], className="g-2")


def _amount(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f} {unit}".rstrip() if abs(value) >= 100 else f"{value:,.2f} {unit}".rstrip()


def change_figure(view: SweepView) -> go.Figure:
    done = _succeeded(view)
    if len(done) < 2:
        return common.empty_figure("Nothing to compare: a run failed.")
    fig = go.Figure()
    for label, summary in done[1:]:
        rows = trade_off(done[0][1], summary)
        changes = [100 * r.change if r.change is not None else None for r in rows]
        fig.add_trace(go.Bar(
            name=label, y=[r.metric for r in rows], x=changes, orientation="h",
            marker_color=[COLOURS["busy"] if (c or 0) <= 0 else COLOURS["down"] for c in changes],
            text=[f"{c:+.1f} %" if c is not None else "–" for c in changes], textposition="auto",
            hovertemplate="%{y}: %{x:+.1f} %<extra></extra>",
        ))
    fig.add_vline(x=0, line_color="#52606d")
    fig = common.styled(fig, x_title="change vs baseline (%)", y_title="", height=300, legend=len(done) > 2)
    fig.update_layout(hovermode="closest")
    fig.update_yaxes(autorange="reversed", rangemode="normal")
    return fig


def scatter_figure(view: SweepView) -> go.Figure:
    done = [(label, s, s.avg_jct_s, s.p99_jct_s) for label, s in _succeeded(view)
            if s.avg_jct_s is not None and s.p99_jct_s is not None]
    if not done:
        return common.empty_figure("No run completed a job: no JCT to plot.")
    fig = go.Figure()
    for i, (label, s, average, p99) in enumerate(done):
        colour = _run_colour(i)
        fig.add_trace(go.Scatter(
            name=label, x=[average / 3600, p99 / 3600], y=[s.facility_kwh] * 2,
            mode="lines+markers", marker={"symbol": ["circle", "circle-open"], "size": 12, "color": colour},
            line={"color": colour, "dash": "dot"},
            hovertemplate="%{x:.2f} h JCT, %{y:,.1f} kWh<extra>" + label + "</extra>",
        ))
    fig = common.styled(fig, x_title="job completion time (h): average ● and p99 ○", y_title="facility energy (kWh)",
                        height=300)
    fig.update_layout(hovermode="closest")
    return fig


def tenants_figure(view: SweepView, visible: set[str] | None) -> go.Figure:
    rows = tenant_times(view, visible)
    if not rows:
        return common.empty_figure("No per-tenant figures for your tenants in this what-if.")
    fig = go.Figure()
    for i, run in enumerate(view.runs):
        colour = _run_colour(i)
        averages = [r.avg_jct_h[i] for r in rows]
        whiskers = [None if a is None or p is None else p - a for a, p in zip(averages, [r.p99_jct_h[i] for r in rows],
                                                                               strict=True)]
        fig.add_trace(go.Bar(
            name=run.label, x=[r.tenant for r in rows], y=averages, marker_color=colour,
            error_y={"type": "data", "symmetric": False, "array": whiskers, "arrayminus": [0] * len(rows),
                     "thickness": 1.5, "width": 10, "color": "#323f4b"},
            customdata=[r.p99_jct_h[i] for r in rows],
            hovertemplate="%{x}: average %{y:.2f} h, p99 %{customdata:.2f} h<extra>" + run.label + "</extra>",
        ))
    return _grouped_by_tenant(fig, "JCT (h): bar average, whisker up to p99")


def tenant_energy_figure(view: SweepView, visible: set[str] | None) -> go.Figure:
    rows = tenant_energy(view, visible)
    if not rows:
        return common.empty_figure("No per-tenant energy for your tenants in this what-if.")
    fig = go.Figure()
    for i, run in enumerate(view.runs):
        colour = _run_colour(i)
        fig.add_trace(go.Bar(
            name=run.label, x=[r.tenant for r in rows], y=[r.facility_kwh[i] for r in rows], marker_color=colour,
            customdata=[[r.co2_kg[i], r.cost[i]] for r in rows],
            hovertemplate="%{x}: %{y:,.1f} kWh, %{customdata[0]:,.1f} kg CO₂, cost %{customdata[1]:,.2f} "
                          f"{settings.CURRENCY}<extra>{run.label}</extra>",
        ))
    return _grouped_by_tenant(fig, "facility energy (kWh)")


def _run_colour(index: int) -> str:
    """The baseline (run 0) in the capacity grey, what-ifs in the page sequence."""
    return COLOURS["capacity"] if index == 0 else common.SEQUENCE[(index - 1) % len(common.SEQUENCE)]


def _grouped_by_tenant(fig: go.Figure, y_title: str) -> go.Figure:
    fig.update_layout(barmode="group")
    return common.styled(fig, x_title="tenant", y_title=y_title, height=300)


def past_table() -> Any:
    rows = [(f"#{p.sweep_id}", timezone.localtime(p.created_at).strftime("%Y-%m-%d %H:%M"), p.name, p.runs, p.state)
            for p in past_sweeps()]
    return common.table(["sweep", "started", "what", "runs", "state"], rows,
                        empty="No what-if has been run yet.", table_id="energy-past-table")
