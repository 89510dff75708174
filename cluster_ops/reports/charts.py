"""The report's charts as PNG images: matplotlib's Agg renderer, no browser, no network, no global pyplot state.

``draw_charts(content)`` draws every chart that applies; a chart that fails becomes a ``Chart`` with its error
instead of its image, so the report is still made and its section says why.
"""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
from matplotlib.figure import Figure

from .content import ReportContent

logger = logging.getLogger(__name__)

# The dashboards' colours (cluster_ops/dashboards/common.py), so "idle" is the same orange everywhere.
COLOURS = {"capacity": "#9aa5b1", "allocated": "#2f6fde", "busy": "#1f9d55", "idle": "#e8833a",
           "previous": "#c3cfe2", "quota": "#cf3a3a"}
WIDTH_IN, HEIGHT_IN, DPI = 7.0, 2.6, 150


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    png: bytes | None
    error: str | None = None

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png or b"").decode("ascii")


def _figure(height: float = HEIGHT_IN) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#e4e7eb", linewidth=0.6)
    ax.tick_params(labelsize=7)
    return fig, ax


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def usage_over_time(content: ReportContent) -> bytes:
    """GPUs held (busy and idle) per hour, against the cluster's GPUs or the tenant's quota."""
    return _png(usage_figure(content))


def usage_figure(content: ReportContent) -> Figure:
    fig, ax = _figure()
    points = content.usage
    # Steps hold each hour's value to the next hour; the last step ends where its bucket does (or the coverage).
    ends = [min(content.coverage.end, p.start + timedelta(seconds=p.covered_seconds or 3600)) for p in points[-1:]]
    times = date2num([p.start for p in points] + ends)
    busy = [p.allocated_gpus - p.idle_allocated_gpus for p in points] + [p.allocated_gpus - p.idle_allocated_gpus
                                                                       for p in points[-1:]]
    idle = [p.idle_allocated_gpus for p in points] + [p.idle_allocated_gpus for p in points[-1:]]
    ax.stackplot(times, busy, idle, labels=["held, busy", "held, idle"], colors=[COLOURS["busy"], COLOURS["idle"]],
                 step="post", alpha=0.85)
    limit, label = (content.quota, "quota") if content.tenant else (content.total_gpus, "GPUs in the cluster")
    if limit:
        ax.axhline(limit, color=COLOURS["quota" if content.tenant else "capacity"], linestyle="--", linewidth=1,
                   label=label)
    # The covered part only (an unfinished period ends now); a second short of its end, so the next day's midnight
    # gets no tick of its own ("Dec-02" under a report of Dec 1).
    coverage = content.coverage
    ax.set_xlim(float(date2num(coverage.start)), float(date2num(coverage.end - timedelta(seconds=1))))
    zone = timezone.get_current_timezone()  # label the hours of TIME_ZONE, as the period is
    locator = AutoDateLocator(tz=zone)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=zone))
    ax.set_ylabel("GPUs", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper left", ncols=3, frameon=False, bbox_to_anchor=(0, 1.18))
    return fig


def tenant_use(content: ReportContent) -> bytes:
    """Average GPUs held per tenant this period and the previous one, with each tenant's quota."""
    fig, ax = _figure(0.5 + 0.45 * max(1, len(content.tenants)))
    names = [row.name for row in content.tenants]
    hours = content.period.hours
    rows = range(len(names))
    ax.barh([r + 0.2 for r in rows], [row.previous_gpu_hours / hours for row in content.tenants], height=0.4,
            color=COLOURS["previous"], label="previous period")
    ax.barh([r - 0.2 for r in rows], [row.avg_gpus for row in content.tenants], height=0.4,
            color=COLOURS["allocated"], label="this period")
    ax.scatter([row.quota for row in content.tenants], list(rows), marker="|", s=300, color=COLOURS["quota"],
               label="quota", zorder=3)
    ax.set_yticks(list(rows), names, fontsize=8)
    ax.invert_yaxis()
    ax.grid(axis="x", color="#e4e7eb", linewidth=0.6)
    ax.set_xlabel("average GPUs held", fontsize=8)
    ax.legend(fontsize=7, loc="lower left", ncols=3, frameon=False, bbox_to_anchor=(0, 1.0))
    return _png(fig)


def energy_by_tenant(content: ReportContent) -> bytes:
    """Facility energy per tenant (kWh) with the CO₂ it stands for."""
    fig, ax = _figure(0.5 + 0.45 * max(1, len(content.tenants)))
    names = [row.name for row in content.tenants]
    values = [row.facility_kwh for row in content.tenants]
    bars = ax.barh(names, values, color=COLOURS["allocated"], height=0.5)
    ax.bar_label(bars, [f"{row.facility_kwh:,.1f} kWh · {row.co2_kg:,.1f} kg CO₂" for row in content.tenants],
                 fontsize=7, padding=3)
    ax.invert_yaxis()
    ax.grid(axis="x", color="#e4e7eb", linewidth=0.6)
    ax.set_xlabel("facility energy (kWh)", fontsize=8)
    ax.set_xlim(0, max(values, default=0) * 1.45 or 1)
    return _png(fig)


def wait_times(content: ReportContent) -> bytes:
    """How long the jobs that started in the period had waited (histogram, hours)."""
    fig, ax = _figure(2.2)
    ax.hist(content.waits_h, bins=min(30, max(5, len(content.waits_h) // 3)), color=COLOURS["allocated"])
    ax.set_xlabel("queue wait before the first start (h)", fontsize=8)
    ax.set_ylabel("jobs", fontsize=8)
    return _png(fig)


# (key, title, function, drawn for: "cluster", "tenant" or "both")
CHARTS: list[tuple[str, str, Callable[[ReportContent], bytes], str]] = [
    ("usage", "GPUs held over the period", usage_over_time, "both"),
    ("tenants", "Quota and use per tenant", tenant_use, "cluster"),
    ("energy", "Energy per tenant", energy_by_tenant, "cluster"),
    ("waits", "Queue waits", wait_times, "both"),
]


def draw_charts(content: ReportContent) -> dict[str, Chart]:
    """Every chart for the report's scope, keyed; a failed one carries its error and no image."""
    scope = "tenant" if content.tenant else "cluster"
    charts = {}
    for key, title, draw, drawn_for in CHARTS:
        if drawn_for not in ("both", scope):
            continue
        try:
            charts[key] = Chart(key, title, draw(content))
        except Exception as error:  # any failure of one chart must not lose the report
            logger.exception("report chart %s failed", key)
            charts[key] = Chart(key, title, None, f"{type(error).__name__}: {error}")
    return charts
