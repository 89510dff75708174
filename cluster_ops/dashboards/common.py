"""What every dashboard page shares: the app factory, layout pieces, figure styling, empty states, time ranges.

Styling is Bootstrap (dash-bootstrap-components) from our own static files, plotly's
``plotly_white`` template with the colours below, and a title with its unit on every axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import dash_bootstrap_components as dbc
import plotly.graph_objects as go
from dash import dcc, html
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone
from django_plotly_dash import DjangoDash

from telemetry.ledger import first_data_at

NO_TELEMETRY = "No telemetry yet — the collector starts within a minute."
NO_DATA = "Nothing to show for this selection."
# The colours of the things every page talks about, so that "busy" is one green everywhere.
COLOURS = {
    "capacity": "#9aa5b1",
    "allocated": "#2f6fde",
    "busy": "#1f9d55",
    "idle": "#e8833a",
    "down": "#cf3a3a",
    "pending": "#8e6bd1",
    "running": "#2f6fde",
}
SEQUENCE = ["#2f6fde", "#e8833a", "#1f9d55", "#8e6bd1", "#cf3a3a", "#14a3b8", "#b7791f", "#6c757d"]
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"


def static_url(path: str) -> str:
    """A static file's plain URL. Not ``static()``: apps are built at import time, before ``collectstatic``
    has written the manifest that the hashed names need; WhiteNoise serves the plain names too."""
    return f"/{settings.STATIC_URL.strip('/')}/{path}"


STYLESHEETS = [static_url("vendor/bootstrap/bootstrap.min.css"), static_url("cluster_ops/site.css")]
# plotly.js's cartesian bundle (1.5 MB) instead of the full one dcc.Graph would load (4.8 MB): every chart here is a
# bar, scatter, histogram or heatmap. dcc.Graph uses ``window.Plotly`` when a script has set it, and compiling the
# smaller bundle is most of what a page's first load in a browser costs (scripts/bench_dashboards.py).
SCRIPTS = [static_url("vendor/plotly/plotly-cartesian.min.js")]


@dataclass(frozen=True)
class Action:
    """A control whose callback starts or changes something, and who may use it: the API's permission for it."""

    allowed: Callable[[Any], bool]  # of the request's user
    what: str  # "start what-ifs"


# (app name, "component-id.property") → its Action. The callback checks it too and explains a refusal on the page,
# where the control is greyed out for those who may not use it; a request that fires it anyway is refused with a
# 403 before the callback runs (cluster_ops.middleware.DashCallbacksRefuseCraftedRequests).
ACTIONS: dict[tuple[str, str], Action] = {}


def action(app_name: str, trigger: str, allowed: Callable[[Any], bool], what: str) -> None:
    """Declare ``trigger`` (a callback input, "id.property") of ``app_name`` as an action only ``allowed`` users
    may fire."""
    ACTIONS[(app_name, trigger)] = Action(allowed, what)


def new_app(name: str) -> DjangoDash:
    """The DjangoDash of one page: local JavaScript and CSS only, callbacks may add components."""
    return DjangoDash(name, serve_locally=True, external_stylesheets=STYLESHEETS, external_scripts=SCRIPTS,
                      suppress_callback_exceptions=True)


# --- time ranges ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeRange:
    value: str
    label: str
    span: timedelta


TIME_RANGES = [
    TimeRange("1h", "last hour", timedelta(hours=1)),
    TimeRange("6h", "last 6 hours", timedelta(hours=6)),
    TimeRange("24h", "last 24 hours", timedelta(hours=24)),
    TimeRange("48h", "last 48 hours", timedelta(hours=48)),
    TimeRange("7d", "last 7 days", timedelta(days=7)),
    TimeRange("30d", "last 30 days", timedelta(days=30)),
]
DEFAULT_RANGE = "24h"
SINCE_FIRST_DATA = "data"  # from the cluster's first data to now: a young cluster's default
YOUNG = timedelta(hours=24)  # a cluster with less history than this opens on all of it
MIN_SPAN = timedelta(minutes=10)  # "since the first data" never draws less than this


def time_range(value: str | None, now: datetime | None = None) -> timedelta:
    """The span of a time-range option; an unknown value is the default (a crafted request must not fail)."""
    if value == SINCE_FIRST_DATA:
        age = history(now or timezone.now())
        return max(MIN_SPAN, age) if age is not None else time_range(DEFAULT_RANGE)
    for option in TIME_RANGES:
        if option.value == value:
            return option.span
    return time_range(DEFAULT_RANGE)


def history(now: datetime) -> timedelta | None:
    """How long the cluster has had data (``telemetry.ledger.first_data_at``); None before any."""
    first = first_data_at()
    return max(timedelta(0), now - first) if first is not None else None


def range_choices(now: datetime) -> tuple[list[dict[str, str]], str]:
    """The time-range options, saying how much history exists, and the one a page opens on: all of it for a
    cluster younger than ``YOUNG`` (never a day of empty axis), else ``DEFAULT_RANGE``."""
    age = history(now)
    options = [] if age is None else [{"label": f"since the first data ({_age(age)})", "value": SINCE_FIRST_DATA}]
    for option in TIME_RANGES:
        short = age is not None and age < option.span
        options.append({"label": f"{option.label} (data for {_age(age)})" if short and age is not None
                        else option.label, "value": option.value})
    return options, SINCE_FIRST_DATA if age is not None and age < YOUNG else DEFAULT_RANGE


def _age(age: timedelta) -> str:
    minutes = int(age.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h" if minutes < 48 * 60 else f"{minutes // 1440} days"


def time_range_dropdown(component_id: str, value: str = DEFAULT_RANGE) -> dbc.Select:
    """The range control; a page's init callback replaces its options and value with ``range_choices``."""
    return dbc.Select(id=component_id, value=value, size="sm",
                      options=[{"label": r.label, "value": r.value} for r in TIME_RANGES])


# --- values sent back by the browser (callbacks trust none of them) -------------------------------------


MAX_ID = 2**63 - 1


def record_id(value: Any) -> int | None:
    """A row id chosen in a control: a positive integer (or its digits); None for anything else a request sent."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        value = int(value)
    return value if isinstance(value, int) and 0 < value <= MAX_ID else None


def number(value: Any, field: str, low: float, high: float, default: float) -> float:
    """A number typed into a control: ``default`` when empty; ``ValidationError`` naming ``field`` when it is not a
    finite number within [low, high]."""
    if value is None or value == "":
        return default
    try:
        parsed = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        parsed = math.nan
    if not (math.isfinite(parsed) and low <= parsed <= high):
        raise ValidationError({field: f"Expected a number between {low:g} and {high:g}."})
    return parsed


# --- layout pieces ---------------------------------------------------------------------------


def page_layout(*children: Any) -> html.Div:
    """The body of a page's app; ``dcc.Location`` is not needed (the Django page owns the URL)."""
    return html.Div(dbc.Container(list(children), fluid=True, className="px-1 py-2"), className="dash-page")


def controls(*items: tuple[str, Any]) -> dbc.Row:
    """A row of labelled controls: ``controls(("Time range", dropdown), ("Node", other))``."""
    return dbc.Row(
        [dbc.Col([dbc.Label(label, html_for=_id_of(control), className="small text-muted mb-0"), control],
                 xs=12, sm=6, md=4, lg=3) for label, control in items],
        className="g-2 mb-3 align-items-end",
    )


def _id_of(component: Any) -> str:
    return str(getattr(component, "id", ""))


def section(title: str, *children: Any, subtitle: str | None = None) -> dbc.Card:
    """A titled card holding charts or tables."""
    header: list[Any] = [html.H2(title, className="h6 mb-0")]
    if subtitle:
        header.append(html.Div(subtitle, className="small text-muted"))
    return dbc.Card([dbc.CardHeader(header, className="bg-white"), dbc.CardBody(list(children), className="p-2")],
                    className="mb-3 shadow-sm")


def graph(component_id: str, height: int = 320) -> dcc.Graph:
    """A chart; it starts as a "pending" figure that browser tests and the benchmark wait to see replaced."""
    return dcc.Graph(id=component_id, figure=pending_figure(height), style={"height": f"{height}px"},
                     config={"displaylogo": False, "responsive": True,
                             "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]})


def stat(title: str, value: str, detail: str = "", tone: str = "") -> dbc.Card:
    """A headline number with a line of detail; ``tone`` is a Bootstrap colour (danger, warning, success)."""
    return dbc.Card(dbc.CardBody([
        html.Div(title, className="small text-uppercase text-muted fw-semibold"),
        html.Div(value, className=f"fs-3 fw-semibold {'text-' + tone if tone else ''}"),
        html.Div(detail, className="small text-muted"),
    ], className="py-2"), className="h-100 shadow-sm stat")


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], empty: str = NO_DATA,
          table_id: str | None = None) -> Any:
    """A small, striped table; ``empty`` in place of a table without rows."""
    if not rows:
        return html.Div(empty, className="text-muted small p-2")
    head = html.Thead(html.Tr([html.Th(c) for c in columns]))
    body = html.Tbody([html.Tr([html.Td(cell) for cell in row]) for row in rows])
    kwargs = {"id": table_id} if table_id else {}
    return dbc.Table([head, body], size="sm", striped=True, hover=True, responsive=True,
                     className="mb-0 small", **kwargs)


# --- figures ---------------------------------------------------------------------------------


def styled(fig: go.Figure, *, x_title: str, y_title: str, height: int | None = None,
           legend: bool = True) -> go.Figure:
    """The house style; both axis titles are required and say their unit ("GPUs", "utilisation (%)")."""
    fig.update_layout(
        template="plotly_white", colorway=SEQUENCE, font={"family": FONT, "size": 12},
        margin={"l": 60, "r": 20, "t": 30 if legend else 10, "b": 50}, hovermode="x unified",
        showlegend=legend, legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        meta="drawn",
    )
    if height:
        fig.update_layout(height=height)
    fig.update_xaxes(title_text=x_title, automargin=True)
    fig.update_yaxes(title_text=y_title, automargin=True, rangemode="tozero")
    return fig


def _message_figure(message: str, height: int | None, meta: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        template="plotly_white", font={"family": FONT, "size": 13}, meta=meta,
        xaxis={"visible": False}, yaxis={"visible": False}, margin={"l": 10, "r": 10, "t": 10, "b": 10},
        annotations=[{"text": message, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
                      "font": {"color": "#52606d", "size": 14}}] if message else [],
    )
    if height:
        fig.update_layout(height=height)
    return fig


def empty_figure(message: str = NO_TELEMETRY, height: int | None = None) -> go.Figure:
    """A drawn figure that says why there is nothing to draw (no telemetry yet, an empty selection)."""
    return _message_figure(message, height, "empty")


def pending_figure(height: int | None = None) -> go.Figure:
    """What a chart shows until its callback answers (``layout.meta == "pending"``)."""
    return _message_figure("", height, "pending")
