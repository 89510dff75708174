"""What a simulation run achieved: job times, utilisation, fairness, energy. Pure; dashboards and reports reuse it.

Definitions (a value that cannot be computed, e.g. a JCT with no completed job, is None — never 0 or NaN):

* **JCT** (job completion time) = finish − submit, over completed jobs; **makespan** = last finish − first submit.
* **Queueing delay** = first start − submit, over jobs that started.
* **Utilisation** = allocated GPU-seconds ÷ (cluster GPUs × span), span = first usage start to last usage end;
  powered-down GPUs still count as capacity. **Effective utilisation** counts busy (training) GPUs only, not
  those paying a restart delay.
* **Jain's fairness index** over tenants of x_t = allocated share_t ÷ entitlement_t, J = (Σx)² ÷ (n·Σx²): 1 when every
  tenant got its entitlement in proportion, 1/n when one tenant got everything. The share is GPU-seconds over the
  whole span (we do not know when each tenant had demand, so a tenant with little work looks under-served). Tenants
  counted: those that submitted a job. Entitlement: quota ÷ the sum of those tenants' quotas; tenants with quota 0
  are left out when others have one; all quotas 0 means equal entitlements.
* **Finish-time fairness** ρ = JCT ÷ fair-share time (Themis, NSDI'20: the time the job would take alone on its 1/N
  of the cluster), per completed job; ρ > 1 means the job did worse than its fair share. Reported: p50, p99 and the
  fraction of jobs with ρ > 1.
* **Energy**: busy GPUs at full-utilisation draw, restarting and idle GPUs at idle draw, powered-down GPUs at 0, all
  under the run's power caps (one for every GPU type, or one per type; ``scheduler.core.power``); facility energy =
  × PUE; CO₂ and cost from facility energy. A **tenant's energy** is that of the GPUs its jobs held, training or
  restarting; powered GPUs nobody held are the cluster's **unallocated energy**, no tenant's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from scheduler.core.power import PowerModel

from .records import JobOutcome, SimulationResult, UsageInterval

JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True)
class SimulationSummary:
    """One run in numbers; times in seconds, energy in kWh, CO₂ in kg, cost in the power model's currency."""

    policy: str
    jobs: int
    completed: int
    avg_jct_s: float | None
    p50_jct_s: float | None
    p99_jct_s: float | None
    makespan_s: float | None
    avg_queue_s: float | None
    p50_queue_s: float | None
    p99_queue_s: float | None
    utilization: float | None
    effective_utilization: float | None
    jain: float | None
    ftf_p50: float | None
    ftf_p99: float | None
    unfair_fraction: float | None
    rescales: int
    preemptions: int
    restarts: int
    energy_kwh: float
    facility_kwh: float
    co2_kg: float
    cost: float
    power_cap_fraction: float
    power_caps_by_type: dict[str, float]  # GPU types with a cap of their own (the others: power_cap_fraction)
    unallocated_energy_kwh: float | None  # powered GPUs that no job held (None: not this viewer's to see)
    rounds: int
    wall_s: float
    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)  # tenant → ``tenant_breakdown`` figures

    def as_dict(self) -> dict[str, Any]:
        """The summary as a flat dict, keyed by field name (JSON-serialisable)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SimulationSummary:
        """A stored summary (``as_dict``) read back typed; a figure an older run did not record is None, a key this
        version does not know is left out."""
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls)}
        values["tenants"] = dict(data.get("tenants") or {})
        values["power_caps_by_type"] = dict(data.get("power_caps_by_type") or {})
        return cls(**values)


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100, linear interpolation between order statistics); None for no values."""
    data = list(values)
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {q!r}")
    return float(np.percentile(data, q)) if data else None


def mean(values: Iterable[float]) -> float | None:
    """The arithmetic mean; None for no values."""
    data = list(values)
    return sum(data) / len(data) if data else None


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index (Σx)² ÷ (n·Σx²) of non-negative values: 1 if all equal, 1/n if one has everything.

    None for no values or all zero (nobody got anything: fairness is undefined). Scale-invariant.
    """
    if any(v < 0 for v in values):
        raise ValueError(f"Jain's index needs non-negative values, got {list(values)}")
    squares = sum(v * v for v in values)
    return sum(values) ** 2 / (len(values) * squares) if squares > 0 else None


def ftf_values(jobs: Iterable[JobOutcome]) -> list[float]:
    """Finish-time fairness ρ = JCT ÷ fair-share time of each completed job (jobs without a fair-share time skipped)."""
    return [job.jct / job.fair_share_seconds for job in jobs if job.jct is not None and job.fair_share_seconds > 0]


def fair_share_seconds(
    total_work: float, speed_at: Callable[[int], float], total_gpus: int, contention: float, min_gpus: int,
    max_gpus: int,
) -> float:
    """Themis' fair-share time: ``total_work`` done alone on 1/N of the cluster's ``total_gpus``.

    N is ``contention``, the average number of jobs active (submitted, unfinished) in the job's life, at least 1.
    The share is rounded down to whole GPUs within [``min_gpus``, ``max_gpus``]; a share below ``min_gpus``
    time-shares them. ``speed_at(gpus)`` is the job's speed (work units/s); inf when it makes no progress there.
    """
    share = total_gpus / max(contention, 1.0)
    gpus = min(max_gpus, max(min_gpus, math.floor(share)))
    speed = speed_at(gpus) * min(1.0, share / gpus)
    return total_work / speed if speed > 0 else math.inf


def usage_span(usage: Sequence[UsageInterval]) -> float:
    """Seconds from the first interval's start to the last one's end; 0 for no usage."""
    return max(u.end for u in usage) - min(u.start for u in usage) if usage else 0.0


def utilisation(result: SimulationResult, busy_only: bool = False) -> float | None:
    """Allocated (or, with ``busy_only``, training) GPU-seconds ÷ (cluster GPUs × span); None with no capacity."""
    capacity = result.total_gpus * usage_span(result.usage)
    if capacity <= 0:
        return None
    used = sum((sum(u.busy.values()) if busy_only else u.allocated) * u.seconds for u in result.usage)
    return used / capacity


def tenant_gpu_seconds(usage: Iterable[UsageInterval]) -> dict[str, float]:
    """GPU-seconds allocated to each tenant over the run."""
    totals: dict[str, float] = {}
    for interval in usage:
        for tenant, gpus in interval.by_tenant.items():
            totals[tenant] = totals.get(tenant, 0.0) + gpus * interval.seconds
    return totals


def entitlements(tenants: Iterable[str], quotas: Mapping[str, int]) -> dict[str, float]:
    """Each tenant's entitled share: its quota over the sum of theirs, leaving out quota-0 tenants when others have
    one; equal shares when nobody has a quota."""
    names = sorted(set(tenants))
    with_quota = [t for t in names if quotas.get(t, 0) > 0]
    if not with_quota:
        return {t: 1 / len(names) for t in names}
    total = sum(quotas[t] for t in with_quota)
    return {t: quotas[t] / total for t in with_quota}


def tenant_fairness(result: SimulationResult) -> float | None:
    """Jain's index over tenants with jobs of (allocated share of the cluster ÷ entitlement); see the module doc."""
    capacity = result.total_gpus * usage_span(result.usage)
    entitled = entitlements((job.tenant for job in result.jobs), result.tenant_quotas)
    if capacity <= 0 or not entitled:
        return None
    used = tenant_gpu_seconds(result.usage)
    return jain_index([used.get(t, 0.0) / capacity / share for t, share in entitled.items()])


def energy_kwh(usage: Sequence[UsageInterval], power: PowerModel) -> float:
    """GPU (IT) energy of the usage: busy at full-utilisation draw, restarting and idle at idle draw, off at 0."""
    types = {t for u in usage for counts in (u.busy, u.restarting, u.idle) for t in counts}
    busy_w = {t: power.busy_gpu_power_w(t) for t in types}
    idle_w = {t: power.idle_gpu_power_w(t) for t in types}
    joules = 0.0
    for u in usage:
        waiting = [*u.restarting.items(), *u.idle.items()]
        watts = sum(n * busy_w[t] for t, n in u.busy.items()) + sum(n * idle_w[t] for t, n in waiting)
        joules += watts * u.seconds
    return joules / JOULES_PER_KWH


def unallocated_energy_kwh(usage: Sequence[UsageInterval], power: PowerModel) -> float:
    """GPU (IT) energy of powered GPUs that no job held, at idle draw."""
    idle_w = {t: power.idle_gpu_power_w(t) for t in {t for u in usage for t in u.idle}}
    return sum(sum(n * idle_w[t] for t, n in u.idle.items()) * u.seconds for u in usage) / JOULES_PER_KWH


def tenant_energy_kwh(usage: Sequence[UsageInterval], power: PowerModel) -> dict[str, float]:
    """GPU (IT) energy of the GPUs each tenant's jobs held: training at busy draw, restarting at idle draw."""
    joules: dict[str, float] = {}
    watts_of: dict[tuple[str, bool], float] = {}  # (GPU type, training) → watts; few types, many intervals
    for u in usage:
        for held, training in ((u.tenant_busy, True), (u.tenant_restarting, False)):
            for (tenant, gpu_type), gpus in held.items():
                if (gpu_type, training) not in watts_of:
                    watts_of[gpu_type, training] = (power.busy_gpu_power_w(gpu_type) if training
                                                    else power.idle_gpu_power_w(gpu_type))
                joules[tenant] = joules.get(tenant, 0.0) + gpus * watts_of[gpu_type, training] * u.seconds
    return {tenant: j / JOULES_PER_KWH for tenant, j in joules.items()}


def _time_fields(jobs: Sequence[JobOutcome]) -> dict[str, Any]:
    jcts = [j.jct for j in jobs if j.jct is not None]
    queues = [j.queue_seconds for j in jobs if j.queue_seconds is not None]
    finishes = [j.finish_time for j in jobs if j.finish_time is not None]
    return {
        "avg_jct_s": mean(jcts), "p50_jct_s": percentile(jcts, 50), "p99_jct_s": percentile(jcts, 99),
        "makespan_s": max(finishes) - min(j.submit_time for j in jobs) if finishes else None,
        "avg_queue_s": mean(queues), "p50_queue_s": percentile(queues, 50), "p99_queue_s": percentile(queues, 99),
    }


def _fairness_fields(result: SimulationResult) -> dict[str, Any]:
    rhos = ftf_values(result.jobs)
    unfair = sum(rho > 1 for rho in rhos) / len(rhos) if rhos else None
    return {
        "jain": tenant_fairness(result), "ftf_p50": percentile(rhos, 50), "ftf_p99": percentile(rhos, 99),
        "unfair_fraction": unfair,
    }


def _energy_fields(result: SimulationResult, power: PowerModel) -> dict[str, Any]:
    it_kwh = energy_kwh(result.usage, power)
    return {
        **_energy_costs(it_kwh, power), "unallocated_energy_kwh": unallocated_energy_kwh(result.usage, power),
        "power_cap_fraction": power.cap_fraction, "power_caps_by_type": dict(power.type_caps),
    }


def _energy_costs(it_kwh: float, power: PowerModel) -> dict[str, float]:
    return {"energy_kwh": it_kwh, "facility_kwh": power.facility_kwh(it_kwh), "co2_kg": power.co2_kg(it_kwh),
            "cost": power.cost(it_kwh)}


def tenant_breakdown(result: SimulationResult, power: PowerModel) -> dict[str, dict[str, Any]]:
    """Per tenant with jobs: jobs, completed, the JCT and queueing figures of the summary, GPU-hours held, and the
    energy of the GPUs it held with its facility energy, CO₂ and cost."""
    used = tenant_gpu_seconds(result.usage)
    energy = tenant_energy_kwh(result.usage, power)
    jobs_of: dict[str, list[JobOutcome]] = {}
    for job in result.jobs:
        jobs_of.setdefault(job.tenant, []).append(job)
    return {
        tenant: {
            "jobs": len(jobs), "completed": sum(j.finish_time is not None for j in jobs), **_time_fields(jobs),
            "gpu_hours": used.get(tenant, 0.0) / 3600, **_energy_costs(energy.get(tenant, 0.0), power),
        }
        for tenant, jobs in sorted(jobs_of.items())
    }


def summarise(result: SimulationResult, power: PowerModel | None = None) -> SimulationSummary:
    """Summarise a run. Energy uses ``power`` (default ``PowerModel()``) at the run's own power caps, so one model
    (specs, PUE, grid, price) serves every run of a cap sweep."""
    power = (PowerModel() if power is None else power).at_cap(result.power_cap_fraction, result.power_caps_by_type)
    jobs = result.jobs
    return SimulationSummary(
        policy=result.policy, jobs=len(jobs), completed=sum(j.finish_time is not None for j in jobs),
        utilization=utilisation(result), effective_utilization=utilisation(result, busy_only=True),
        rescales=sum(j.rescales for j in jobs), preemptions=sum(j.preemptions for j in jobs),
        restarts=sum(j.restarts for j in jobs), rounds=result.rounds, wall_s=result.wall_seconds,
        **_time_fields(jobs), **_fairness_fields(result), **_energy_fields(result, power),
        tenants=tenant_breakdown(result, power),
    )
