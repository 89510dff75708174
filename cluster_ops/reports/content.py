"""What a report says: ``build_content(period, tenant, now) -> ReportContent``, read from the database once.

Every figure comes from its single home; this module only chooses, scopes and compares them:

* **Coverage**: the part of the period with data, from the first data (a job submitted, a minute of telemetry) or
  the period's start, to the period's end or ``now``. A period still running or without data for part of it is
  *incomplete*, said on every format; rates (allocated share, GPUs held per hour, hours over or under quota) are
  over the covered hours, and recommendations come only from complete periods with telemetry for at least
  ``MIN_TELEMETRY_SHARE`` of their hours (``recommendation_gate``).
* GPU-hours allocated, idle-allocated and energy over time: ``telemetry.queries.series`` by the hour over the
  covered part (hour rollups for the cluster, job hours for a tenant, the running hour from its minutes).
  **Used** GPU-hours = allocated − idle-allocated (held while utilisation was at or above ``TELEMETRY_IDLE_UTIL``).
  **Allocation** = allocated ÷ (GPUs × hours covered) for the cluster, ÷ (quota × hours covered) for a tenant.
  **Utilisation** = the mean of the hourly mean GPU utilisation (cluster only: not kept per job).
* JCT (jobs that succeeded in the period) and queueing delay (jobs first started in it):
  ``cluster_ops.dashboards.jobs_data.completion_times``; percentiles: ``scheduler.sim.metrics.percentile``.
* Held GPUs per tenant and hour, borrowing (held above quota): ``dashboards.fairness_data.shares_over_time``;
  finish-time fairness ρ: ``dashboards.fairness_data.finish_time_fairness``.
* **Jain's index** over the period, as the simulator defines it for a run (``scheduler.sim.metrics``): share of
  GPU-hours ÷ entitlement (quota-proportional, ``entitlements``) over the tenants with demand — GPU time in the
  period or a job submitted before its end and unfinished at its start — then ``jain_index``.
* Energy per tenant: ``telemetry.queries.energy_kwh_by_tenant``; facility energy, CO₂ and cost: ``telemetry.power``'s
  ``PowerModel`` defaults (PUE 1.58, 475 g/kWh, 0.10 per kWh).
* Top users, GPU failures and node downtime: ``telemetry.queries`` (``gpu_hours_by_owner``, ``gpu_failures``,
  ``node_downtime``); idle jobs: ``idle_allocated_by_job``. Recommendations: ``recommend``.
* **Accounting** (``accounting``): exact GPU-hours per tenant and owner, from the allocations' own intervals clipped
  to the covered part (not from rollups), as Slurm's ``sreport`` reports accounts.

A tenant's report holds only that tenant: its own rows, its users and jobs; cluster-wide sections (other tenants,
GPU failures, downtime, fairness across tenants, what-if runs) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, Min, Q
from django.utils import timezone

from cluster_ops.dashboards.fairness_data import Shares, finish_time_fairness, shares_over_time
from cluster_ops.dashboards.jobs_data import completion_times
from scheduler.live.config import scheduler_settings
from scheduler.models import Allocation, ExecutorKind, Gpu, Job, JobState, Tenant
from scheduler.sim.metrics import entitlements, jain_index, percentile
from scheduler.slurm.accounting import sacct_comparison
from telemetry import queries
from telemetry.models import GpuHour, ScopeMinute
from telemetry.power import PowerModel
from telemetry.rollups import CLUSTER_SCOPE, HOURS

from . import recommend
from .periods import Period

# The dashboards' data functions scope by viewer; a report reads as an operator (this unsaved user) and narrows
# to its tenant itself.
REPORT_VIEWER = User(username="cluster-ops-reports", is_staff=True)
TOP = 10  # rows in the top-users, idle-jobs and failed-jobs tables
EMPTY_NOTE = "Nothing happened in this period: no GPU time was allocated and no job was submitted, started or finished."
MIN_TELEMETRY_SHARE = 0.9  # of a period's hours with telemetry, for its figures to carry a recommendation


@dataclass(frozen=True)
class Coverage:
    """The part [start, end) of ``period`` the report's figures cover, and the hours of it with telemetry."""

    period: Period
    start: datetime
    end: datetime
    telemetry_hours: float

    @property
    def hours(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds() / 3600)

    @property
    def complete(self) -> bool:
        return self.start <= self.period.start and self.end >= self.period.end

    @property
    def covered(self) -> Period:
        """The covered part as a period (for the figures' queries); the whole period when nothing is covered."""
        return Period(self.period.kind, self.start, self.end) if self.end > self.start else self.period

    def note(self, now: datetime) -> str | None:
        """What every format says of an incomplete period; None for a complete one."""
        if self.complete:
            return None
        span = f"{_local(self.start)} – {_local(self.end)} ({self.hours:.1f} of {self.period.hours:.0f} hours)"
        if self.end < self.period.end:
            return (f"Incomplete: the period runs until {_local(self.period.end)} and this report was made at "
                    f"{_local(now)}; its figures cover {span}.")
        return f"Incomplete: the cluster has data only from {_local(self.start)}; the figures cover {span}."


def _local(at: datetime) -> str:
    return f"{timezone.localtime(at):%Y-%m-%d %H:%M}"


def first_data_at() -> datetime | None:
    """When the cluster first had anything to report: a job submitted, a minute or an hour of telemetry."""
    firsts = [Job.objects.aggregate(at=Min("submitted_at"))["at"], GpuHour.objects.aggregate(at=Min("start"))["at"],
              ScopeMinute.objects.filter(scope=CLUSTER_SCOPE).aggregate(at=Min("start"))["at"]]
    known = [at for at in firsts if at is not None]
    return min(known) if known else None


def coverage_of(period: Period, now: datetime) -> Coverage:
    """From the first data in the period (or its start) to its end or ``now``, whichever is first."""
    first = first_data_at()
    start = max(period.start, first) if first is not None else period.end
    end = min(period.end, max(now, period.start))
    hours = GpuHour.objects.filter(start__gte=period.start, start__lt=end).values("start").distinct().count()
    running = ScopeMinute.objects.filter(scope=CLUSTER_SCOPE, start__gte=max(period.start, end - HOURS.width),
                                         start__lt=end).count() if end < period.end else 0
    return Coverage(period, min(start, end), end, hours + running / 60)


def recommendation_gate(coverage: Coverage) -> str | None:
    """Why the report makes no recommendation (None: it may): only complete periods with enough telemetry."""
    if not coverage.complete:
        return "No recommendation: the period is incomplete, and a part of a period is no ground for a change."
    if coverage.telemetry_hours < MIN_TELEMETRY_SHARE * coverage.period.hours:
        return (f"No recommendation: telemetry covers {coverage.telemetry_hours:.0f} of the period's "
                f"{coverage.period.hours:.0f} hours (at least {MIN_TELEMETRY_SHARE:.0%} needed).")
    return None


@dataclass(frozen=True)
class Kpi:
    key: str
    label: str
    unit: str
    value: float | None
    previous: float | None
    digits: int = 1

    @property
    def change(self) -> float | None:
        """Relative change from the previous period; None without both values or with a zero previous value."""
        if self.value is None or self.previous is None or self.previous == 0:
            return None
        return self.value / self.previous - 1


@dataclass(frozen=True)
class TenantRow:
    name: str
    quota: int
    gpu_hours: float
    previous_gpu_hours: float
    avg_gpus: float
    quota_use: float | None  # average GPUs held ÷ quota
    borrowed_gpu_hours: float  # held above quota
    over_quota_hours: float  # fraction of the period's hours with more GPUs held than the quota
    under_quota_hours: float  # fraction with fewer than half the quota held
    idle_gpu_hours: float
    it_kwh: float
    facility_kwh: float
    co2_kg: float
    cost: float
    jobs_succeeded: int
    jobs_failed: int

    @property
    def idle_share(self) -> float | None:
        return self.idle_gpu_hours / self.gpu_hours if self.gpu_hours > 0 else None


@dataclass(frozen=True)
class Account:
    """Exact GPU time of one owner's jobs in one tenant (``owner`` "": the tenant's total)."""

    tenant: str
    owner: str
    jobs: int
    gpu_seconds: float

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600


@dataclass(frozen=True)
class FailedJob:
    job_id: int
    name: str
    tenant: str
    finished_at: datetime
    error: str


@dataclass(frozen=True)
class ReportContent:
    period: Period
    tenant: str | None  # None: the whole cluster
    generated_at: datetime
    total_gpus: int
    quota: int | None  # the tenant's
    coverage: Coverage
    kpis: list[Kpi]
    usage: list[queries.UtilisationPoint]  # hourly, over the covered part
    tenants: list[TenantRow]
    top_users: list[queries.OwnerUsage]
    idle_jobs: list[queries.JobIdle]
    failed_jobs: list[FailedJob]
    waits_h: list[float]  # queueing delays of the jobs first started in the period
    failures: queries.GpuFailures | None  # cluster reports only
    downtime: list[queries.NodeDowntime]
    recommendations: list[recommend.Recommendation]
    accounts: list[Account]
    power: PowerModel
    empty: bool
    notes: list[str] = field(default_factory=list)
    withheld: str | None = None  # why there are no recommendations, when they were not looked for

    @property
    def scope(self) -> str:
        return f"tenant {self.tenant}" if self.tenant else "whole cluster"

    def kpi(self, key: str) -> Kpi:
        return next(k for k in self.kpis if k.key == key)


def build_content(period: Period, tenant: Tenant | None, now: datetime) -> ReportContent:
    power, total_gpus = PowerModel(), Gpu.objects.count()
    coverage, before = coverage_of(period, now), coverage_of(period.previous, now)
    covered = coverage.covered
    usage = usage_of(covered, tenant)
    shares = shares_over_time(REPORT_VIEWER, covered.start, covered.end, now=now)
    earlier = shares_over_time(REPORT_VIEWER, before.covered.start, before.covered.end, now=now)
    figures = period_figures(covered, tenant, power, total_gpus, shares, usage)
    previous = period_figures(before.covered, tenant, power, total_gpus, earlier)
    rows = [row for row in tenant_rows(covered, shares, earlier, power) if tenant is None or row.name == tenant.name]
    idle_jobs = [job for job in queries.idle_allocated_by_job(period.start, period.end, tenant=tenant)
                 if job.idle_allocated_gpu_hours > 0]
    cluster = tenant is None
    gate = recommendation_gate(coverage)
    accounts = accounting(covered, tenant, now)
    notes = [note for note in (coverage.note(now),) if note] + cluster_accounting_notes(covered, tenant, accounts,
                                                                                              now)
    content = ReportContent(
        period=period, tenant=tenant.name if tenant else None, generated_at=now, total_gpus=total_gpus,
        quota=tenant.gpu_quota if tenant else None, coverage=coverage, kpis=kpis(figures, previous, cluster),
        usage=usage,
        tenants=rows, top_users=queries.gpu_hours_by_owner(period.start, period.end, tenant=tenant, limit=TOP),
        idle_jobs=idle_jobs[:TOP], failed_jobs=failed_jobs(period, tenant), waits_h=figures["waits_h"],
        failures=queries.gpu_failures(period.start, period.end) if cluster else None,
        downtime=queries.node_downtime(period.start, period.end) if cluster else [],
        accounts=accounts,
        recommendations=[] if gate else recommend.recommendations(rows, idle_jobs, now if cluster else None,
                                                                    hours=coverage.hours),
        power=power, empty=is_empty(period, tenant, figures), notes=notes, withheld=gate,
    )
    return content


def accounting(covered: Period, tenant: Tenant | None, now: datetime) -> list[Account]:
    """Per tenant (its total first) and owner: the jobs that held GPUs in the covered part and their GPU-seconds
    there, each allocation's interval clipped to it (an open one runs to ``now``)."""
    start, end = covered.start, min(covered.end, now)
    held = Allocation.objects.filter(started_at__lt=end).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
    if tenant is not None:
        held = held.filter(job__tenant=tenant)
    seconds: dict[tuple[str, str], float] = {}
    jobs: dict[tuple[str, str], set[int]] = {}
    rows = held.order_by().values_list("job__tenant__name", "job__owner__username", "job_id", "started_at", "ended_at")
    for name, owner, job_id, began, ended in rows.iterator(chunk_size=5000):
        overlap = (min(end, ended or end) - max(start, began)).total_seconds()
        for key in ((name, ""), (name, owner or "(no owner)")):
            seconds[key] = seconds.get(key, 0.0) + max(0.0, overlap)
            jobs.setdefault(key, set()).add(job_id)
    return [Account(name, owner, len(jobs[(name, owner)]), seconds[(name, owner)])
            for name, owner in sorted(seconds, key=lambda key: (key[0], key[1] != "", -seconds[key], key[1]))]


def cluster_accounting_notes(covered: Period, tenant: Tenant | None, accounts: list[Account],
                             now: datetime) -> list[str]:
    """On a Slurm cluster: the report's GPU-hours per tenant beside sacct's for the same period (a tenant's
    report: its own line only)."""
    if scheduler_settings().executor not in {ExecutorKind.SLURM, ExecutorKind.SLURM_OBSERVER}:
        return []
    totals = {account.tenant: account.gpu_seconds for account in accounts if not account.owner}
    return sacct_comparison(totals, covered.start, min(covered.end, now), only=tenant.name if tenant else None)


def usage_of(covered: Period, tenant: Tenant | None) -> list[queries.UtilisationPoint]:
    """The scope's hours over the covered part, the running hour from its minutes (``queries.series``)."""
    return queries.series(covered.start, covered.end, tenant=tenant, step=HOURS)


def period_figures(period: Period, tenant: Tenant | None, power: PowerModel, total_gpus: int, shares: Shares,
                   usage: list[queries.UtilisationPoint] | None = None) -> dict[str, Any]:
    """The KPI values of one period (module docstring), keyed as ``kpis`` reads them."""
    start, end, name = period.start, period.end, tenant.name if tenant else None
    points = usage if usage is not None else usage_of(period, tenant)
    allocated = sum(p.gpu_hours(HOURS.width) for p in points)
    idle = sum(p.idle_gpu_hours(HOURS.width) for p in points)
    capacity = (tenant.gpu_quota if tenant else total_gpus) * period.hours
    util = [p.gpu_util for p in points if p.gpu_util is not None]
    times = completion_times(REPORT_VIEWER, start, end, tenant=name)
    waits_h = [s / 3600 for s in times.queueing.values]
    it_kwh = (queries.energy_kwh_by_tenant(start, end).get(tenant.name, 0.0) if tenant
              else sum(p.energy_kwh for p in points))
    rho = finish_time_fairness(REPORT_VIEWER, start, end, tenant=name)
    finished = job_counts(period, tenant)
    return {
        "gpu_hours": allocated, "used_gpu_hours": allocated - idle, "idle_gpu_hours": idle,
        "allocation": allocated / capacity if capacity > 0 else None,
        "utilisation": sum(util) / len(util) if util else None,
        "succeeded": finished.get(JobState.SUCCEEDED, 0), "failed": finished.get(JobState.FAILED, 0),
        "cancelled": finished.get(JobState.CANCELLED, 0),
        "avg_jct_h": _hours(times.jct.mean), "p99_jct_h": _hours(times.jct.p99),
        "wait_p50_min": _minutes(times.queueing.p50), "wait_p90_min": _minutes(percentile(times.queueing.values, 90)),
        "wait_p99_min": _minutes(times.queueing.p99), "waits_h": waits_h,
        "it_kwh": it_kwh, "facility_kwh": power.facility_kwh(it_kwh), "co2_kg": power.co2_kg(it_kwh),
        "cost": power.cost(it_kwh), "ftf_p50": rho.p50, "ftf_p99": rho.p99, "unfair": rho.unfair_fraction,
        "jain": None if tenant else period_jain(period, shares),
        **(cluster_failure_figures(period) if tenant is None else {}),
    }


def cluster_failure_figures(period: Period) -> dict[str, Any]:
    failures = queries.gpu_failures(period.start, period.end, limit=0)
    downtime = queries.node_downtime(period.start, period.end)
    return {"lost_events": failures.lost_events, "xid_events": failures.xid_events,
            "lost_gpu_hours": sum(row.lost_gpu_hours for row in downtime),
            "node_down_hours": sum(row.down_hours for row in downtime)}


def _hours(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 3600


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 60


# (key, label, unit, digits, cluster only)
KPI_ROWS = (
    ("gpu_hours", "GPU-hours allocated", "GPU-h", 1, False),
    ("used_gpu_hours", "GPU-hours used (busy)", "GPU-h", 1, False),
    ("idle_gpu_hours", "GPU-hours allocated but idle", "GPU-h", 1, False),
    ("allocation", "Allocated share of capacity", "%", 1, False),
    ("utilisation", "Mean GPU utilisation", "%", 1, True),
    ("succeeded", "Jobs succeeded", "", 0, False),
    ("failed", "Jobs failed", "", 0, False),
    ("cancelled", "Jobs cancelled", "", 0, False),
    ("avg_jct_h", "Average JCT", "h", 2, False),
    ("p99_jct_h", "p99 JCT", "h", 2, False),
    ("wait_p50_min", "Queue wait p50", "min", 1, False),
    ("wait_p90_min", "Queue wait p90", "min", 1, False),
    ("wait_p99_min", "Queue wait p99", "min", 1, False),
    ("jain", "Jain's fairness index (tenants)", "", 3, True),
    ("ftf_p50", "Finish-time fairness ρ p50", "", 2, False),
    ("ftf_p99", "Finish-time fairness ρ p99", "", 2, False),
    ("it_kwh", "GPU energy", "kWh", 1, False),
    ("facility_kwh", "Facility energy (× PUE)", "kWh", 1, False),
    ("co2_kg", "CO₂", "kg", 1, False),
    ("cost", "Energy cost", "currency", 2, False),
    ("lost_events", "GPUs lost (events)", "", 0, True),
    ("xid_events", "XID errors", "", 0, True),
    ("lost_gpu_hours", "GPU-hours lost (GPUs down)", "GPU-h", 1, True),
    ("node_down_hours", "Node downtime (any GPU down)", "h", 1, True),
)


def kpis(now: dict[str, Any], before: dict[str, Any], cluster: bool) -> list[Kpi]:
    scale = {"allocation": 100.0}  # fractions shown as percentages
    labels = {} if cluster else {"allocation": "Allocated share of quota"}
    return [
        Kpi(key, labels.get(key, label), unit, _scaled(now.get(key), scale.get(key)),
            _scaled(before.get(key), scale.get(key)), digits)
        for key, label, unit, digits, cluster_only in KPI_ROWS if cluster or not cluster_only
    ]


def _scaled(value: Any, factor: float | None) -> float | None:
    if value is None:
        return None
    return float(value) * factor if factor else float(value)


def job_counts(period: Period, tenant: Tenant | None) -> dict[str, int]:
    """Jobs that finished in the period, by final state."""
    jobs = Job.objects.filter(finished_at__gte=period.start, finished_at__lt=period.end)
    if tenant is not None:
        jobs = jobs.filter(tenant=tenant)
    return dict(jobs.values_list("state").annotate(n=Count("id")).order_by())


def alive(period: Period) -> Any:
    """Jobs submitted before the period ends and not finished before it starts."""
    return Job.objects.filter(submitted_at__lt=period.end).filter(
        Q(finished_at__isnull=True) | Q(finished_at__gte=period.start))


def period_jain(period: Period, shares: Shares) -> float | None:
    """Jain's index of GPU-hours share ÷ entitlement over the tenants with demand (module docstring)."""
    used = {series.tenant: sum(series.held) for series in shares.tenants}
    wanting = {name for name, hours in used.items() if hours > 0}
    wanting |= set(alive(period).values_list("tenant__name", flat=True))
    quotas = dict(Tenant.objects.values_list("name", "gpu_quota"))
    entitled = entitlements(wanting, quotas) if wanting else {}
    return jain_index([used.get(name, 0.0) / share for name, share in entitled.items()]) if entitled else None


def tenant_rows(period: Period, shares: Shares, earlier: Shares, power: PowerModel) -> list[TenantRow]:
    """One row per tenant in ``shares`` (every tenant, for the report's viewer)."""
    energy = queries.energy_kwh_by_tenant(period.start, period.end)
    idle = queries.idle_allocated_by_tenant(period.start, period.end)
    jobs = Job.objects.filter(finished_at__gte=period.start, finished_at__lt=period.end)
    states = {(name, state): n for name, state, n in
              jobs.values_list("tenant__name", "state").annotate(n=Count("id")).order_by()}
    before = {series.tenant: sum(series.held) for series in earlier.tenants}
    rows = []
    for series in shares.tenants:
        held, quota, kwh = series.held, series.quota, energy.get(series.tenant, 0.0)
        hours = len(held) or 1
        gpu_hours = sum(held)
        rows.append(TenantRow(
            name=series.tenant, quota=quota, gpu_hours=gpu_hours,
            previous_gpu_hours=before.get(series.tenant, 0.0),
            avg_gpus=gpu_hours / hours, quota_use=gpu_hours / hours / quota if quota else None,
            borrowed_gpu_hours=sum(series.borrowed), over_quota_hours=sum(h > quota for h in held) / hours,
            under_quota_hours=sum(h < quota / 2 for h in held) / hours if quota else 0.0,
            idle_gpu_hours=idle.get(series.tenant, 0.0), it_kwh=kwh, facility_kwh=power.facility_kwh(kwh),
            co2_kg=power.co2_kg(kwh), cost=power.cost(kwh),
            jobs_succeeded=states.get((series.tenant, JobState.SUCCEEDED), 0),
            jobs_failed=states.get((series.tenant, JobState.FAILED), 0),
        ))
    return rows


def failed_jobs(period: Period, tenant: Tenant | None) -> list[FailedJob]:
    jobs = Job.objects.filter(state=JobState.FAILED, finished_at__gte=period.start, finished_at__lt=period.end)
    if tenant is not None:
        jobs = jobs.filter(tenant=tenant)
    return [FailedJob(job.pk, job.name, job.tenant.name, job.finished_at or period.end,
                      (job.error.strip().splitlines() or [""])[-1][:200])
            for job in jobs.select_related("tenant").order_by("-finished_at", "-id")[:TOP]]


def is_empty(period: Period, tenant: Tenant | None, figures: dict[str, Any]) -> bool:
    """No GPU time allocated and no job submitted, started or finished in the period."""
    jobs = Job.objects.filter(
        Q(submitted_at__gte=period.start, submitted_at__lt=period.end)
        | Q(started_at__gte=period.start, started_at__lt=period.end)
        | Q(finished_at__gte=period.start, finished_at__lt=period.end)
    )
    if tenant is not None:
        jobs = jobs.filter(tenant=tenant)
    return figures["gpu_hours"] == 0 and not jobs.exists()
