"""Recommendations a report makes from its own figures and from finished what-if runs.

* **Power-cap candidates** (cluster reports; runs finished before the report is made, the latest
  ``WHATIF_RUNS_READ``): a succeeded what-if run under a power cap whose scenario is otherwise
  identical to a succeeded uncapped run (same trace, policy, cluster, load, power-down…): the pair is compared with
  the Energy page's ``trade_off``. A cap is recommended when it saved at least ``POWER_CAP_MIN_SAVING`` of the
  facility energy for at most ``POWER_CAP_MAX_SLOWDOWN`` more average JCT; the best saving per scenario, at most
  ``POWER_CAP_LIMIT`` of them.
* **Idle-timeout candidates**: a job that held GPUs idle (``TELEMETRY_IDLE_UTIL``) for at least
  ``IDLE_JOB_MIN_GPU_HOURS`` and ``IDLE_JOB_SHARE`` of its GPU-hours; a tenant whose idle-allocated share of its
  GPU-hours is at least ``IDLE_TENANT_SHARE`` (and at least ``IDLE_JOB_MIN_GPU_HOURS``).
* **Quota**: a tenant holding more than its quota in at least ``OVER_QUOTA_HOURS`` of the period's hours is
  persistently over (borrowing: its quota is too small for its demand, or it is exposed to reclaim preemptions);
  one holding less than half its quota in at least ``UNDER_QUOTA_HOURS`` of the hours is persistently under (its
  guarantee is larger than its use).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.models import WhatIfRun, WhatIfStatus
from scheduler.sim.metrics import SimulationSummary
from scheduler.whatif.views import trade_off
from telemetry.ledger import JobLine

if TYPE_CHECKING:
    from .content import TenantRow

POWER_CAP_MIN_SAVING = 0.05  # 5 % less facility energy: below that, noise between runs and not worth a change
POWER_CAP_MAX_SLOWDOWN = 0.05  # at most 5 % longer average JCT: what users would barely notice
POWER_CAP_LIMIT = 3
WHATIF_RUNS_READ = 500  # the most recent finished runs considered
IDLE_JOB_MIN_GPU_HOURS = 1.0
IDLE_JOB_SHARE = 0.25
IDLE_JOBS_NAMED = 5  # the most idle candidates are named; the others are counted in one more line
IDLE_TENANT_SHARE = 0.15
OVER_QUOTA_HOURS = 0.5
UNDER_QUOTA_HOURS = 0.75


@dataclass(frozen=True)
class Recommendation:
    kind: str  # power cap | idle timeout | quota
    subject: str
    text: str


def recommendations(rows: Sequence[TenantRow], idle_jobs: Sequence[JobLine],
                    whatif_until: datetime | None, hours: float) -> list[Recommendation]:
    """Every recommendation, power caps first; ``whatif_until`` None leaves out what-if runs (tenant reports);
    ``hours``: the period's, which the quota figures are fractions of."""
    found = power_cap_candidates(whatif_until) if whatif_until is not None else []
    return found + idle_timeout_candidates(rows, idle_jobs) + quota_candidates(rows, hours)


def power_cap_candidates(until: datetime) -> list[Recommendation]:
    runs = WhatIfRun.objects.filter(status=WhatIfStatus.SUCCEEDED, finished_at__lt=until, summary__isnull=False)
    uncapped: dict[str, WhatIfRun] = {}
    capped: list[tuple[str, WhatIfRun]] = []
    for run in runs.select_related("sweep").order_by("-finished_at", "-id")[:WHATIF_RUNS_READ]:
        key = _scenario_key(run.scenario)
        if not _capped(run.scenario):
            uncapped.setdefault(key, run)  # the most recent one
        else:
            capped.append((key, run))
    best: dict[str, tuple[float, Recommendation]] = {}
    for key, run in capped:
        base = uncapped.get(key)
        found = _compare(base, run) if base is not None else None
        if found and (key not in best or found[0] < best[key][0]):
            best[key] = found
    return [rec for _, rec in sorted(best.values(), key=lambda item: item[0])][:POWER_CAP_LIMIT]


CAP_FIELDS = ("power_cap_fraction", "power_caps_by_type")


def _caps(scenario: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """(every type's cap, the types' own caps) of a stored scenario."""
    return float(scenario.get("power_cap_fraction") or 1.0), dict(scenario.get("power_caps_by_type") or {})


def _capped(scenario: dict[str, Any]) -> bool:
    every, by_type = _caps(scenario)
    return min([every, *by_type.values()]) < 1


def _cap_words(scenario: dict[str, Any]) -> tuple[str, str]:
    """(subject, action) of a capped scenario: ("80% cap", "Cap GPU power at 80% of the board limit"), or per type
    ("caps a100 70%, v100 80%", "Cap GPU power per type: a100 at 70%, v100 at 80% of the board limit")."""
    every, by_type = _caps(scenario)
    if not by_type:
        return f"{every:.0%} cap", f"Cap GPU power at {every:.0%} of the board limit"
    subject = "caps " + ", ".join(f"{gpu_type} {cap:.0%}" for gpu_type, cap in sorted(by_type.items()))
    per_type = ", ".join(f"{gpu_type} at {cap:.0%}" for gpu_type, cap in sorted(by_type.items()))
    return subject, f"Cap GPU power per type: {per_type} of the board limit"


def _scenario_key(scenario: dict[str, Any]) -> str:
    """The scenario without its power caps: runs with equal keys differ only by the caps."""
    return json.dumps({k: v for k, v in scenario.items() if k not in CAP_FIELDS}, sort_keys=True, default=str)


def _compare(base: WhatIfRun, run: WhatIfRun) -> tuple[float, Recommendation] | None:
    """(energy change, recommendation) when the capped run meets the thresholds."""
    changes = {c.metric: c for c in trade_off(SimulationSummary.from_dict(base.summary or {}),
                                              SimulationSummary.from_dict(run.summary or {}))}
    energy, jct = changes["facility energy"], changes["average JCT"]
    if energy.change is None or jct.change is None:
        return None
    if energy.change > -POWER_CAP_MIN_SAVING or jct.change > POWER_CAP_MAX_SLOWDOWN:
        return None
    (subject, action), where = _cap_words(run.scenario), (
        f'what-if sweep "{run.sweep.name}"' if run.sweep else f"what-if run #{run.pk}")
    saved = (energy.baseline or 0.0) - (energy.value or 0.0)
    co2 = changes["CO₂"]
    co2_saved = (co2.baseline or 0.0) - (co2.value or 0.0)
    text = (f"{action}: in {where} ({run.policy}) it used {-energy.change:.1%} "
            f"less facility energy ({saved:,.0f} kWh, {co2_saved:,.0f} kg CO₂) for {jct.change:+.1%} average JCT.")
    return energy.change, Recommendation("power cap", subject, text)


def idle_timeout_candidates(rows: Sequence[TenantRow], idle_jobs: Sequence[JobLine]) -> list[Recommendation]:
    """``idle_jobs`` most idle first, as ``telemetry.ledger.Ledger.idle_jobs`` returns them."""
    candidates = [job for job in idle_jobs if job.idle_allocated_gpu_hours >= IDLE_JOB_MIN_GPU_HOURS
                  and job.idle_allocated_gpu_hours >= IDLE_JOB_SHARE * job.allocated_gpu_hours]
    found = []
    for job in candidates[:IDLE_JOBS_NAMED]:
        share = job.idle_allocated_gpu_hours / job.allocated_gpu_hours
        found.append(Recommendation("idle timeout", f"{job.job} #{job.job_id}", (
            f"Job {job.job} #{job.job_id} ({job.tenant}) held GPUs idle for {job.idle_allocated_gpu_hours:,.1f} "
            f"of its {job.allocated_gpu_hours:,.1f} GPU-hours ({share:.0%}): an idle timeout would have "
            f"released them.")))
    if rest := candidates[IDLE_JOBS_NAMED:]:
        hours = sum(job.idle_allocated_gpu_hours for job in rest)
        found.append(Recommendation("idle timeout", f"{len(rest)} more jobs", (
            f"{len(rest)} more job{'s' if len(rest) > 1 else ''} held GPUs idle for at least {IDLE_JOB_SHARE:.0%} of "
            f"their GPU-hours ({hours:,.1f} idle GPU-hours in all).")))
    for row in rows:
        tenant_share = row.idle_share or 0.0
        if tenant_share >= IDLE_TENANT_SHARE and row.idle_gpu_hours >= IDLE_JOB_MIN_GPU_HOURS:
            found.append(Recommendation("idle timeout", row.name, (
                f"Tenant {row.name}: {row.idle_gpu_hours:,.1f} of its {row.gpu_hours:,.1f} GPU-hours "
                f"({tenant_share:.0%}) were held idle; consider an idle timeout for its jobs.")))
    return found


def quota_candidates(rows: Sequence[TenantRow], hours: float) -> list[Recommendation]:
    found = []
    for row in rows:
        if row.over_quota_hours >= OVER_QUOTA_HOURS:
            found.append(Recommendation("quota", row.name, (
                f"Tenant {row.name} held more than its quota of {row.quota} GPUs in {row.over_quota_hours:.0%} of the "
                f"{hours:.0f} hours (borrowed {row.borrowed_gpu_hours:,.1f} GPU-hours, average {row.avg_gpus:,.1f} "
                f"GPUs): persistently over quota — raise its quota, or expect its borrowed GPUs to be reclaimed.")))
        elif row.quota and row.under_quota_hours >= UNDER_QUOTA_HOURS:
            found.append(Recommendation("quota", row.name, (
                f"Tenant {row.name} held less than half its quota of {row.quota} GPUs in {row.under_quota_hours:.0%} "
                f"of the {hours:.0f} hours (average {row.avg_gpus:,.1f} GPUs, {row.gpu_hours:,.1f} GPU-hours): "
                f"persistently under quota — its guarantee could be lowered.")))
    return found
