"""What a report says: ``build_content(period, tenant, now) -> ReportContent``, read from the database once.

Every figure comes from its single home; this module only chooses, scopes and compares them:

* **Coverage**: the part of the period with data, from the cluster's first data (its first allocation or
  telemetry minute: ``telemetry.ledger.first_data_at``) or the period's start, to the period's end or ``now``. A
  period still running or without data for part of it is *incomplete*, said on every format; rates (allocated
  share, average GPUs held) are over the covered hours, and recommendations come only from complete periods with
  telemetry for at least ``MIN_TELEMETRY_SHARE`` of their hours (``recommendation_gate``).
* **Every GPU-hour and energy figure** — the summary, the tenant rows, the top users, the idle jobs, the accounting
  rows — is a sum over one ``telemetry.ledger.Ledger`` of the covered part: held time from the allocations'
  intervals clipped to it, idle time and energy from the telemetry minutes. So summary = tenants = users =
  accounting CSV, to the GPU-second. **Used** = held − idle-held (held while utilisation was below
  ``TELEMETRY_IDLE_UTIL``). **Allocation** = held ÷ (GPUs × hours covered) for the cluster, ÷ (quota × hours
  covered) for a tenant, = average GPUs held ÷ capacity. Borrowed GPU-hours and the time over or under quota:
  ``ledger.held_over_time``, exact. Cluster energy = tenants' + GPUs held by no job (``unheld_kwh``), marked
  modelled where simulated samples supplied it; costs in ``CURRENCY``.
* **Utilisation** = the mean of the hourly mean GPU utilisation (cluster only: not kept per job), and the usage
  chart: ``telemetry.queries.series`` by the hour over the covered part.
* JCT (jobs that succeeded in the period) and queueing delay (jobs first started in it):
  ``cluster_ops.dashboards.jobs_data.completion_times``; percentiles: ``scheduler.sim.metrics.percentile``.
* Finish-time fairness ρ: ``dashboards.fairness_data.finish_time_fairness``.
* **Jain's index** over the period, as the simulator defines it for a run (``scheduler.sim.metrics``): share of
  GPU-hours (the ledger's) ÷ entitlement (quota-proportional, ``entitlements``) over the tenants with demand — GPU
  time in the period or a job submitted before its end and unfinished at its start — then ``jain_index``.
* Facility energy, CO₂ and cost: ``scheduler.core.power``'s ``PowerModel`` (PUE 1.58, 475 g/kWh, 0.10 per kWh).
* GPU failures and node downtime: ``telemetry.queries`` (``gpu_failures``, ``node_downtime``). Recommendations:
  ``recommend``. On a Slurm cluster, the accounting rows beside ``sacct``'s (``cluster_accounting_notes``).

A tenant's report holds only that tenant: its own rows, its users and jobs; cluster-wide sections (other tenants,
GPU failures, downtime, fairness across tenants, what-if runs) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Count, Q
from django.utils import timezone

from cluster_ops.dashboards.fairness_data import finish_time_fairness
from cluster_ops.dashboards.jobs_data import completion_times
from scheduler.backends import BACKENDS
from scheduler.core.power import PowerModel
from scheduler.live.config import scheduler_settings
from scheduler.models import Gpu, Job, JobState, Tenant
from scheduler.sim.metrics import entitlements, jain_index, percentile
from telemetry import ledger, queries
from telemetry.rollups import HOURS

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
        if self.end <= self.start:  # nothing of the period is covered: say why, not "00:00 – 00:00 (0.0 hours)"
            if self.start >= self.period.end:
                return (f"No data: the cluster has none from this period ({_local(self.period.start)} – "
                        f"{_local(self.period.end)}); its data starts later.")
            return f"No data yet: this report was made at {_local(now)}, before the period's first data."
        span = f"{_local(self.start)} – {_local(self.end)} ({self.hours:.1f} of {self.period.hours:.0f} hours)"
        if self.end < self.period.end:
            return (f"Incomplete: the period runs until {_local(self.period.end)} and this report was made at "
                    f"{_local(now)}; its figures cover {span}.")
        return f"Incomplete: the cluster has data only from {_local(self.start)}; the figures cover {span}."


def _local(at: datetime) -> str:
    return f"{timezone.localtime(at):%Y-%m-%d %H:%M}"


def coverage_of(period: Period, now: datetime) -> Coverage:
    """From the cluster's first data (``ledger.first_data_at``: its first allocation or telemetry minute) or the
    period's start, to its end or ``now``, whichever is first; with the seconds of that part with telemetry."""
    first = ledger.first_data_at()
    end = min(period.end, max(now, period.start))
    start = min(max(period.start, first), end) if first is not None else end
    return Coverage(period, start, end, ledger.telemetry_seconds(start, end) / 3600)


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
class OwnerUsage:
    """GPU time of one owner's jobs in one tenant (``owner`` "" for jobs without an owner)."""

    owner: str
    tenant: str
    jobs: int
    gpu_hours: float
    idle_gpu_hours: float


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
    top_users: list[OwnerUsage]
    idle_jobs: list[ledger.JobLine]
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
    unheld_kwh: float | None = None  # energy of GPUs no job held (cluster reports)
    energy_modelled: bool = False  # some energy came from the power model (simulated samples), not a counter
    currency: str = "EUR"  # of every cost

    @property
    def scope(self) -> str:
        return f"tenant {self.tenant}" if self.tenant else "whole cluster"

    def kpi(self, key: str) -> Kpi:
        return next(k for k in self.kpis if k.key == key)


def build_content(period: Period, tenant: Tenant | None, now: datetime) -> ReportContent:
    power, total_gpus = PowerModel(), Gpu.objects.count()
    coverage, before = coverage_of(period, now), coverage_of(period.previous, now)
    covered = coverage.covered
    books, earlier_books = read_ledger(coverage, tenant, now), read_ledger(before, tenant, now)
    usage = usage_of(covered, tenant)
    figures = period_figures(covered, tenant, power, total_gpus, books, usage)
    previous = period_figures(before.covered, tenant, power, total_gpus, earlier_books)
    rows = [row for row in tenant_rows(books, earlier_books, power) if tenant is None or row.name == tenant.name]
    idle_jobs = books.idle_jobs()
    cluster = tenant is None
    gate = recommendation_gate(coverage)
    accounts = accounting(books)
    notes = [note for note in (coverage.note(now), ledger_note(books)) if note]
    notes += cluster_accounting_notes(covered, tenant, accounts, now)
    content = ReportContent(
        period=period, tenant=tenant.name if tenant else None, generated_at=now, total_gpus=total_gpus,
        quota=tenant.gpu_quota if tenant else None, coverage=coverage, kpis=kpis(figures, previous, cluster),
        usage=usage, tenants=rows, top_users=top_users(books)[:TOP],
        idle_jobs=idle_jobs[:TOP], failed_jobs=failed_jobs(period, tenant), waits_h=figures["waits_h"],
        failures=queries.gpu_failures(period.start, period.end) if cluster else None,
        downtime=queries.node_downtime(period.start, period.end) if cluster else [],
        accounts=accounts,
        recommendations=[] if gate else recommend.recommendations(rows, idle_jobs, now if cluster else None,
                                                                    hours=coverage.hours),
        power=power, empty=is_empty(period, tenant, figures), notes=notes, withheld=gate,
        unheld_kwh=books.unheld_energy_j / ledger.JOULES_PER_KWH if cluster else None,
        energy_modelled=books.energy_modelled, currency=settings.CURRENCY,
    )
    return content


def read_ledger(coverage: Coverage, tenant: Tenant | None, now: datetime) -> ledger.Ledger:
    """The ledger of the covered part of a period (nothing when none of it is covered)."""
    end = min(coverage.end, now)
    return ledger.read(coverage.start, max(coverage.start, end), tenant=tenant)


def ledger_note(books: ledger.Ledger) -> str | None:
    if books.hour_resolution_before is None:
        return None
    return (f"Idle GPU-hours and energy before {_local(books.hour_resolution_before)} are counted in whole hours "
            "(minute rollups are no longer kept there); GPU-hours held are exact throughout.")


def accounting(books: ledger.Ledger) -> list[Account]:
    """Per tenant (its total first) and owner: the jobs that held GPUs in the covered part and their GPU-seconds
    there (the ledger's held time: each allocation's interval clipped to it)."""
    held = [line for line in books.lines if line.usage.gpu_seconds > 0]
    by_tenant = ledger.grouped(held, lambda line: line.tenant)
    by_owner = ledger.grouped(held, lambda line: (line.tenant, line.owner))
    accounts = [Account(name, "", len(u.jobs), u.gpu_seconds) for name, u in by_tenant.items()]
    accounts += [Account(name, owner, len(u.jobs), u.gpu_seconds) for (name, owner), u in by_owner.items()]
    return sorted(accounts, key=lambda a: (a.tenant, a.owner != "", -a.gpu_seconds, a.owner))


def top_users(books: ledger.Ledger) -> list[OwnerUsage]:
    """Owners by GPU-hours held in the span (the ledger's), most first."""
    rows = [OwnerUsage("" if owner == ledger.NO_OWNER else owner, name, len(u.jobs), u.gpu_hours, u.idle_gpu_hours)
            for (name, owner), u in books.by_owner().items()]
    return sorted(rows, key=lambda row: (-row.gpu_hours, row.owner, row.tenant))


def cluster_accounting_notes(covered: Period, tenant: Tenant | None, accounts: list[Account],
                             now: datetime) -> list[str]:
    """On a Slurm cluster: the report's GPU-hours per tenant beside sacct's for the same period (a tenant's
    report: its own line only)."""
    backend = BACKENDS.get(scheduler_settings().executor)
    if backend is None or backend.compare_accounting is None:
        return []
    totals = {account.tenant: account.gpu_seconds for account in accounts if not account.owner}
    return backend.compare_accounting(totals, covered.start, min(covered.end, now), tenant.name if tenant else None)


def usage_of(covered: Period, tenant: Tenant | None) -> list[queries.UtilisationPoint]:
    """The scope's hours over the covered part, the running hour from its minutes (``queries.series``)."""
    return queries.series(covered.start, covered.end, tenant=tenant, step=HOURS)


def period_figures(period: Period, tenant: Tenant | None, power: PowerModel, total_gpus: int, books: ledger.Ledger,
                   usage: list[queries.UtilisationPoint] | None = None) -> dict[str, Any]:
    """The KPI values of one period (module docstring), keyed as ``kpis`` reads them; every GPU-hour and energy
    figure from ``books``, the ledger of the period's covered part."""
    start, end, name = period.start, period.end, tenant.name if tenant else None
    points = usage if usage is not None else usage_of(period, tenant)
    total = books.total()
    hours = (books.end - books.start).total_seconds() / 3600
    capacity = (tenant.gpu_quota if tenant else total_gpus) * hours
    util = [p.gpu_util for p in points if p.gpu_util is not None]
    times = completion_times(REPORT_VIEWER, start, end, tenant=name)
    waits_h = [s / 3600 for s in times.queueing.values]
    it_kwh = total.kwh if tenant else books.gpu_energy_j / ledger.JOULES_PER_KWH
    rho = finish_time_fairness(REPORT_VIEWER, start, end, tenant=name)
    finished = job_counts(period, tenant)
    return {
        "gpu_hours": total.gpu_hours, "used_gpu_hours": total.gpu_hours - total.idle_gpu_hours,
        "idle_gpu_hours": total.idle_gpu_hours,
        "allocation": total.gpu_hours / capacity if capacity > 0 else None,
        "utilisation": sum(util) / len(util) if util else None,
        "succeeded": finished.get(JobState.SUCCEEDED, 0), "failed": finished.get(JobState.FAILED, 0),
        "cancelled": finished.get(JobState.CANCELLED, 0),
        "avg_jct_h": _hours(times.jct.mean), "p99_jct_h": _hours(times.jct.p99),
        "wait_p50_min": _minutes(times.queueing.p50), "wait_p90_min": _minutes(percentile(times.queueing.values, 90)),
        "wait_p99_min": _minutes(times.queueing.p99), "waits_h": waits_h,
        "it_kwh": it_kwh, "facility_kwh": power.facility_kwh(it_kwh), "co2_kg": power.co2_kg(it_kwh),
        "cost": power.cost(it_kwh), "ftf_p50": rho.p50, "ftf_p99": rho.p99, "unfair": rho.unfair_fraction,
        "jain": None if tenant else period_jain(period, books),
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
    ("cost", "Energy cost", "", 2, False),  # its unit: the configured CURRENCY (``kpis``)
    ("lost_events", "GPUs lost (events)", "", 0, True),
    ("xid_events", "XID errors", "", 0, True),
    ("lost_gpu_hours", "GPU-hours lost (GPUs down)", "GPU-h", 1, True),
    ("node_down_hours", "Node downtime (any GPU down)", "h", 1, True),
)


def kpis(now: dict[str, Any], before: dict[str, Any], cluster: bool) -> list[Kpi]:
    scale = {"allocation": 100.0}  # fractions shown as percentages
    labels = {} if cluster else {"allocation": "Allocated share of quota"}
    units = {"cost": settings.CURRENCY}
    return [
        Kpi(key, labels.get(key, label), units.get(key, unit), _scaled(now.get(key), scale.get(key)),
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


def period_jain(period: Period, books: ledger.Ledger) -> float | None:
    """Jain's index of GPU-hours share ÷ entitlement over the tenants with demand (module docstring)."""
    used = {name: usage.gpu_seconds for name, usage in books.by_tenant().items()}
    wanting = {name for name, seconds in used.items() if seconds > 0}
    wanting |= set(alive(period).values_list("tenant__name", flat=True))
    quotas = dict(Tenant.objects.values_list("name", "gpu_quota"))
    entitled = entitlements(wanting, quotas) if wanting else {}
    return jain_index([used.get(name, 0.0) / share for name, share in entitled.items()]) if entitled else None


def tenant_rows(books: ledger.Ledger, earlier: ledger.Ledger, power: PowerModel) -> list[TenantRow]:
    """One row per tenant, every figure from the ledger (held time over the covered part exactly)."""
    usage, before = books.by_tenant(), earlier.by_tenant()
    seconds = (books.end - books.start).total_seconds()
    tenants = list(Tenant.objects.order_by("name"))
    over_time = ledger.held_over_time(books.start, books.end, {t.name: t.gpu_quota for t in tenants})
    jobs = Job.objects.filter(finished_at__gte=books.start, finished_at__lt=books.end)
    states = {(name, state): n for name, state, n in
              jobs.values_list("tenant__name", "state").annotate(n=Count("id")).order_by()}
    rows = []
    for tenant in tenants:
        mine, quota, times = usage.get(tenant.name, ledger.Usage()), tenant.gpu_quota, over_time[tenant.name]
        avg_gpus = mine.gpu_seconds / seconds if seconds > 0 else 0.0
        kwh = mine.kwh
        rows.append(TenantRow(
            name=tenant.name, quota=quota, gpu_hours=mine.gpu_hours,
            previous_gpu_hours=before.get(tenant.name, ledger.Usage()).gpu_hours,
            avg_gpus=avg_gpus, quota_use=avg_gpus / quota if quota else None,
            borrowed_gpu_hours=times.borrowed_gpu_seconds / 3600,
            over_quota_hours=times.over_quota_seconds / seconds if seconds > 0 else 0.0,
            under_quota_hours=times.under_half_seconds / seconds if seconds > 0 and quota else 0.0,
            idle_gpu_hours=mine.idle_gpu_hours, it_kwh=kwh, facility_kwh=power.facility_kwh(kwh),
            co2_kg=power.co2_kg(kwh), cost=power.cost(kwh),
            jobs_succeeded=states.get((tenant.name, JobState.SUCCEEDED), 0),
            jobs_failed=states.get((tenant.name, JobState.FAILED), 0),
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
