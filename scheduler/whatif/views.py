"""What-if runs and sweeps as a viewer may see them, and the trade-off between them.

Staff see everything. Others see every sweep's name, state and cluster-wide figures, but per-tenant figures of
their own tenants only (not the energy of GPUs no tenant held) and never an error's text: an error can name files
and settings. The Energy page, the what-if API and the reports read runs through here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User

from scheduler.models import WHATIF_FINISHED, Tenant, WhatIfRun, WhatIfStatus, WhatIfSweep
from scheduler.sim.catalogue import TRADE_OFF
from scheduler.sim.metrics import SimulationSummary

from . import runs

Viewer = User | AnonymousUser


@dataclass(frozen=True)
class RunView:
    run_id: int
    label: str  # "baseline (tiresias)", "what-if (pollux, cap 0.8)"
    status: str
    progress: float
    summary: SimulationSummary | None  # as the viewer may see it (``shown_summary``)
    error: str


@dataclass(frozen=True)
class SweepView:
    sweep_id: int
    name: str
    created_at: datetime
    runs: list[RunView]  # the baseline first

    @property
    def finished(self) -> bool:
        return all(run.status in WHATIF_FINISHED for run in self.runs)

    @property
    def progress(self) -> float:
        return sum(run.progress for run in self.runs) / len(self.runs) if self.runs else 0.0


def sweep_view(sweep_id: int, viewer: Viewer) -> SweepView | None:
    """The sweep as ``viewer`` may see it (``shown_summary``, ``shown_error``); None if there is no such sweep."""
    sweep = WhatIfSweep.objects.filter(pk=sweep_id).first()
    if sweep is None:
        return None
    visible = visible_tenant_names(viewer)
    runs = list(WhatIfRun.objects.filter(sweep=sweep).order_by("pk"))
    views = [RunView(run.pk, _run_label(run, i), run.status, run.progress, shown_summary(run.summary, visible),
                     shown_error(run, viewer)) for i, run in enumerate(runs)]
    return SweepView(sweep.pk, sweep.name, sweep.created_at, views)


HIDDEN_ERROR = "This run failed; an operator can see why."


def shown_error(run: WhatIfRun, viewer: Viewer) -> str:
    """A failed run's error for staff; others only learn that it failed (errors can name files and settings)."""
    if not run.error:
        return ""
    return run.error if viewer.is_staff else HIDDEN_ERROR


def shown_summary(stored: dict[str, Any] | None, visible: set[str] | None) -> SimulationSummary | None:
    """A run's stored summary, typed, with only the ``visible`` tenants' figures (None: all, and the energy of the
    GPUs no tenant held, which is no tenant's to see)."""
    if stored is None:
        return None
    summary = SimulationSummary.from_dict(stored)
    if visible is None:
        return summary
    tenants = {name: figures for name, figures in summary.tenants.items() if name in visible}
    return dataclasses.replace(summary, tenants=tenants, unallocated_energy_kwh=None)


def _run_label(run: WhatIfRun, index: int) -> str:
    scenario = run.scenario
    if index == 0:
        return f"baseline ({scenario.get('policy')})"
    parts = [str(scenario.get("policy")), runs.caps_label(scenario)]
    if scenario.get("power_down_spares") is not None:
        parts.append(f"power-down {scenario['power_down_spares']}")
    if scenario.get("load_factor", 1.0) != 1.0:
        parts.append(f"load ×{scenario['load_factor']:g}")
    return f"what-if ({', '.join(parts)})"  # named by what it is; the sweep has the number


@dataclass(frozen=True)
class PastSweep:
    sweep_id: int
    name: str
    created_at: datetime
    runs: int
    state: str  # "running 40 %", "done", "failed"


def past_sweeps(limit: int = 50) -> list[PastSweep]:
    sweeps = WhatIfSweep.objects.order_by("-created_at", "-id").prefetch_related("runs")[:limit]
    return [PastSweep(s.pk, s.name, s.created_at, len(s.runs.all()), _state(list(s.runs.all()))) for s in sweeps]


def _state(members: list[WhatIfRun]) -> str:
    if any(run.status == WhatIfStatus.FAILED for run in members):
        return "failed"
    if any(run.status == WhatIfStatus.CANCELLED for run in members):
        return "cancelled"
    if members and all(run.status == WhatIfStatus.SUCCEEDED for run in members):
        return "done"
    done = sum(run.progress for run in members) / len(members) if members else 0.0
    return f"running {done:.0%}"


# --- the trade-off -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    metric: str
    unit: str
    baseline: float | None
    value: float | None

    @property
    def change(self) -> float | None:
        """Relative change from the baseline (0.1 = 10 % more); None without both values or a zero baseline."""
        if self.baseline is None or self.value is None or self.baseline == 0:
            return None
        return self.value / self.baseline - 1


def trade_off(baseline: SimulationSummary, other: SimulationSummary) -> list[Comparison]:
    """The catalogue's trade-off figures (energy, CO₂, cost, JCT) of ``other`` against ``baseline``."""
    return [Comparison(m.label, m.unit, m.shown(getattr(baseline, m.key)), m.shown(getattr(other, m.key)))
            for m in TRADE_OFF]


def _scaled(value: Any, scale: float) -> float | None:
    return None if value is None else float(value) * scale


@dataclass(frozen=True)
class TenantTimes:
    tenant: str
    avg_jct_h: list[float | None]  # per run, baseline first
    p99_jct_h: list[float | None]


def tenant_times(view: SweepView, visible: set[str] | None) -> list[TenantTimes]:
    """Per tenant in ``visible`` (None: all), average and p99 JCT (hours) in each run (``summary["tenants"]``)."""
    summaries = [run.summary for run in view.runs]
    return [
        TenantTimes(name, _per_run(summaries, name, "avg_jct_s", 1 / 3600),
                    _per_run(summaries, name, "p99_jct_s", 1 / 3600))
        for name in _tenant_names(summaries, visible)
    ]


UNALLOCATED = "no tenant (idle GPUs)"


@dataclass(frozen=True)
class TenantEnergy:
    tenant: str  # or UNALLOCATED: powered GPUs that no job held
    facility_kwh: list[float | None]  # per run, baseline first
    co2_kg: list[float | None]
    cost: list[float | None]


def tenant_energy(view: SweepView, visible: set[str] | None) -> list[TenantEnergy]:
    """Per tenant in ``visible``, the facility energy, CO₂ and cost of the GPUs its jobs held in each run; for staff
    (``visible`` None) also the idle GPUs' share, which is no tenant's."""
    summaries = [run.summary for run in view.runs]
    rows = [
        TenantEnergy(name, *(_per_run(summaries, name, key, 1.0) for key in ("facility_kwh", "co2_kg", "cost")))
        for name in _tenant_names(summaries, visible)
    ]
    if visible is None and any(s is not None and s.unallocated_energy_kwh is not None for s in summaries):
        columns = zip(*(_unallocated(s) for s in summaries), strict=True)
        rows.append(TenantEnergy(UNALLOCATED, *(list(column) for column in columns)))
    return rows


def _unallocated(summary: SimulationSummary | None) -> tuple[float | None, float | None, float | None]:
    """(facility kWh, kg CO₂, cost) of the idle GPUs: their share of the run's IT energy, priced like the whole."""
    if summary is None or not summary.energy_kwh or summary.unallocated_energy_kwh is None:
        return None, None, None
    share = summary.unallocated_energy_kwh / summary.energy_kwh
    return summary.facility_kwh * share, summary.co2_kg * share, summary.cost * share


def _tenant_names(summaries: list[SimulationSummary | None], visible: set[str] | None) -> list[str]:
    return sorted(name for name in {n for s in summaries if s is not None for n in s.tenants}
                  if visible is None or name in visible)


def _per_run(summaries: list[SimulationSummary | None], tenant: str, key: str, scale: float) -> list[float | None]:
    return [_scaled(s.tenants.get(tenant, {}).get(key), scale) if s is not None else None for s in summaries]


def visible_tenant_names(user: Viewer) -> set[str] | None:
    """Tenant names the user sees; None for staff, who also see a trace's own tenants (not in the database)."""
    return None if user.is_staff else set(Tenant.objects.visible_to(user).values_list("name", flat=True))
