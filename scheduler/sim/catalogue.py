"""The metric catalogue: every figure a simulation summary holds, with its label, unit and better direction.

The one home of those words. ``manage.py simulate``'s table, a sweep's comparison, the Energy page's trade-off,
admin's summary tables and the reports' power-cap recommendations read it, so "average JCT" is written once.
Pure (no Django); keys are ``metrics.SimulationSummary``'s fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Better = Literal["min", "max"] | None  # which way is better; None: neither (a count, a setting)


@dataclass(frozen=True)
class Metric:
    key: str  # the SimulationSummary field
    label: str
    unit: str  # the unit as shown, after ``scale``
    better: Better = None
    scale: float = 1.0  # stored value × scale = shown value (seconds → hours for JCT on the Energy page)
    compared: bool = False  # a column of a sweep's comparison

    def shown(self, value: float | None) -> float | None:
        return None if value is None else float(value) * self.scale


CATALOGUE: tuple[Metric, ...] = (
    Metric("policy", "policy", ""),
    Metric("jobs", "jobs", ""),
    Metric("completed", "completed", "", "max", compared=True),
    Metric("avg_jct_s", "average JCT", "s", "min", compared=True),
    Metric("p50_jct_s", "median JCT", "s", "min"),
    Metric("p99_jct_s", "p99 JCT", "s", "min", compared=True),
    Metric("makespan_s", "makespan", "s", "min", compared=True),
    Metric("avg_queue_s", "average queueing", "s", "min", compared=True),
    Metric("p50_queue_s", "median queueing", "s", "min"),
    Metric("p99_queue_s", "p99 queueing", "s", "min"),
    Metric("utilization", "GPU utilisation (allocated)", "", "max", compared=True),
    Metric("effective_utilization", "GPU utilisation (training)", "", "max"),
    Metric("jain", "Jain's index (tenants)", "", "max", compared=True),
    Metric("ftf_p50", "finish-time fairness p50", "", "min"),
    Metric("ftf_p99", "finish-time fairness p99", "", "min", compared=True),
    Metric("unfair_fraction", "jobs worse than their fair share", "", "min"),
    Metric("rescales", "rescales", "", "min", compared=True),
    Metric("preemptions", "preemptions", "", "min"),
    Metric("restarts", "restarts", "", "min"),
    Metric("energy_kwh", "GPU energy", "kWh", "min", compared=True),
    Metric("facility_kwh", "facility energy", "kWh", "min"),
    Metric("unallocated_energy_kwh", "energy of GPUs no job held", "kWh", "min"),
    Metric("co2_kg", "CO₂", "kg", "min", compared=True),
    Metric("cost", "energy cost", "", "min", compared=True),  # in the currency of the price per kWh
    Metric("rounds", "scheduling rounds", ""),
    Metric("wall_s", "simulation wall time", "s"),
)
BY_KEY = {metric.key: metric for metric in CATALOGUE}
COMPARED = tuple(metric for metric in CATALOGUE if metric.compared)


def metric(key: str) -> Metric:
    """The catalogue's entry for ``key``; ``KeyError`` for a figure it does not know."""
    return BY_KEY[key]


def in_hours(key: str) -> Metric:
    """``key``'s entry shown in hours rather than seconds (the Energy page's JCT)."""
    base = BY_KEY[key]
    return Metric(base.key, base.label, "h", base.better, 1 / 3600, base.compared)


# What the Energy page and the reports' power-cap recommendation trade against each other, in display units.
TRADE_OFF: tuple[Metric, ...] = (metric("facility_kwh"), metric("co2_kg"), metric("cost"), in_hours("avg_jct_s"),
                                 in_hours("p99_jct_s"))
