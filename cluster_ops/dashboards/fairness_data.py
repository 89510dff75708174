"""Data of the Fairness page: tenants' shares over time, borrowing, Jain's index, finish-time fairness, and why a
pending job waits.

Definitions, each from its single home:

* **GPUs held** per tenant and hour: its jobs' GPU-seconds in ``JobUsageHour`` ÷ 3,600
  (``telemetry.queries.utilisation(tenant=…)``); for the hour still running, which has no job hours yet, the GPUs
  its jobs hold now (open allocations), so shares, borrowing and Jain's index show from the first minute.
  **Borrowed** per hour: the GPU-hours the tenant's jobs held above its quota in that hour (the running hour: so
  far), from the allocations, by the ledger's sweep (``telemetry.ledger.borrowed_by_span``) — the reports' own
  figure, so an hour's bars add up to what a report of the same minutes says.
* **Fair share** of a tenant in an hour: the cluster's GPUs × its ``fair_share_weight`` ÷ the weights of the tenants
  with demand (a job submitted and not finished during the hour) — the weighted slice Themis gives each tenant
  (``scheduler.core.policies.themis.private_slices``).
* **Jain's index** per hour over the tenants with demand, of share ÷ entitlement (quota-proportional), exactly as
  the simulator and ``/metrics`` compute it (``scheduler.sim.metrics.entitlements`` and ``jain_index``).
* **Finish-time fairness** ρ = JCT ÷ fair-share time of each job that succeeded in the range
  (``scheduler.sim.metrics.fair_share_seconds`` and ``ftf_values``, as in the simulator), N = the average number of
  jobs submitted and unfinished over the job's life, speeds from ``scheduler.core.speed.job_speed``.

Tenant users see their own tenants' series and jobs; Jain's index is a cluster-wide number and shown to everyone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Q
from django.utils import timezone

from scheduler.core.gpu_types import gpu_type_key
from scheduler.core.types import JobInfo
from scheduler.forecasting.forecasts import frees_text, latest_for, starts_in, visible_tenant_ids
from scheduler.models import ACTIVE_STATES, QUEUED_STATES, Allocation, ClusterFairness, Gpu, Job, JobState, Tenant
from scheduler.sim.metrics import entitlements, fair_share_seconds, ftf_values, jain_index, percentile
from scheduler.sim.records import JobOutcome
from telemetry.ledger import borrowed_by_span
from telemetry.queries import gpus_held_by_tenant, utilisation
from telemetry.rollups import HOURS, floor

from .jobs_data import INFO_FIELDS, job_info, speed_memo, speed_snapshot, visible_jobs

Viewer = User | AnonymousUser
HOUR = HOURS.width


# --- shares over time ------------------------------------------------------------------------


@dataclass(frozen=True)
class TenantShares:
    tenant: str
    quota: int
    held: list[float]  # average GPUs held per hour
    fair_share: list[float]  # GPUs
    borrowed: list[float]  # GPU-hours held above quota, per hour


@dataclass(frozen=True)
class Shares:
    starts: list[datetime]  # hour buckets; the last ends at ``starts[-1] + HOUR``
    total_gpus: int
    tenants: list[TenantShares]  # those the user may see
    jain: list[float | None]  # cluster-wide, None for an hour without demand


def shares_over_time(user: Viewer, start: datetime, end: datetime, now: datetime | None = None) -> Shares:
    """Per hour of [start, end); when the last hour is the one running at ``now`` (default: the clock), its GPUs
    held are those held at ``now``."""
    starts = hour_starts(start, end)
    total = Gpu.objects.count()
    tenants = list(Tenant.objects.order_by("name"))
    held = {t.name: _held_by_hour(t, start, end, starts) for t in tenants}
    now = now or timezone.now()
    if starts[-1] <= now < starts[-1] + HOUR and end >= now - timedelta(minutes=1):
        holding = gpus_held_by_tenant()
        for name, hourly in held.items():
            hourly[-1] = float(holding.get(name, 0))
    demand = _demand_by_hour(starts, held)
    quotas = {t.name: t.gpu_quota for t in tenants}
    borrowed = _borrowed_by_hour(starts, start, min(end, now), quotas)
    weights = {t.name: t.fair_share_weight for t in tenants}
    jain = [_jain(held, wanting, quotas, total, i) for i, wanting in enumerate(demand)]
    visible = set(Tenant.objects.visible_to(user).values_list("name", flat=True))
    series = [
        TenantShares(
            t.name, t.gpu_quota, held[t.name],
            [total * weights[t.name] / sum(weights[w] for w in wanting) if t.name in wanting else 0.0
             for wanting in demand],
            borrowed[t.name],
        )
        for t in tenants if t.name in visible
    ]
    return Shares(starts, total, series, jain)


def hour_starts(start: datetime, end: datetime) -> list[datetime]:
    first = floor(start, HOUR)
    return [first + i * HOUR for i in range(max(1, -(-(end - first) // HOUR)))]


def _borrowed_by_hour(starts: list[datetime], start: datetime, end: datetime,
                      quotas: dict[str, int]) -> dict[str, list[float]]:
    """GPU-hours above quota per tenant and hour, counted over the part of each hour inside [start, end)."""
    bounds = [min(max(at, start), max(start, end)) for at in [*starts, starts[-1] + HOUR]]
    return {name: [seconds / HOUR.total_seconds() for seconds in spans]
            for name, spans in borrowed_by_span(bounds, quotas).items()}


def _held_by_hour(tenant: Tenant, start: datetime, end: datetime, starts: list[datetime]) -> list[float]:
    by_start = {point.start: point.allocated_gpus for point in utilisation(start, end, tenant=tenant)}
    return [by_start.get(at, 0.0) for at in starts]


def _demand_by_hour(starts: list[datetime], held: dict[str, list[float]]) -> list[set[str]]:
    """Per hour, the tenants that held GPUs or had a job submitted and unfinished during it."""
    demand = [{name for name, gpus in held.items() if gpus[i] > 0} for i in range(len(starts))]
    end = starts[-1] + HOUR
    alive = Job.objects.filter(submitted_at__lt=end).filter(Q(finished_at__isnull=True) | Q(finished_at__gt=starts[0]))
    for name, submitted, finished in alive.order_by().values_list("tenant__name", "submitted_at", "finished_at"):
        first = max(0, int((submitted - starts[0]) // HOUR))
        last = min(len(starts) - 1, int(((finished or end) - starts[0]) // HOUR))
        for i in range(first, last + 1):
            demand[i].add(name)
    return demand


def _jain(held: dict[str, list[float]], wanting: set[str], quotas: dict[str, int], total: int,
          hour: int) -> float | None:
    if not wanting or total <= 0:
        return None
    entitled = entitlements(wanting, quotas)
    return jain_index([held[name][hour] / total / share for name, share in entitled.items()])


# --- finish-time fairness --------------------------------------------------------------------


@dataclass(frozen=True)
class FinishTimeFairness:
    rhos: list[float]  # one per job that succeeded in the range
    p50: float | None
    p99: float | None
    unfair_fraction: float | None  # of jobs with ρ > 1


def finish_time_fairness(user: Viewer, start: datetime, end: datetime, limit: int = 5000,
                         tenant: str | None = None) -> FinishTimeFairness:
    """ρ of the jobs ``user`` sees (of one tenant if given) that succeeded in [start, end), the latest ``limit``."""
    done = list(
        visible_jobs(user, tenant).filter(state=JobState.SUCCEEDED, finished_at__gte=start, finished_at__lt=end)
        .order_by("-finished_at", "-id").values(*INFO_FIELDS, "started_at", "finished_at", "attained_gpu_seconds",
                                         "restarts")[:limit]
    )
    if not done:
        return FinishTimeFairness([], None, None, None)
    contention = active_jobs_integral(min(j["submitted_at"] for j in done), max(j["finished_at"] for j in done))
    snap = speed_snapshot(end)
    speed = speed_memo(snap)
    outcomes = [_outcome(job, snap.total_gpus, speed, contention) for job in done]
    rhos = ftf_values(outcomes)
    unfair = sum(rho > 1 for rho in rhos) / len(rhos) if rhos else None
    return FinishTimeFairness(rhos, percentile(rhos, 50), percentile(rhos, 99), unfair)


def _outcome(job: dict[str, Any], total_gpus: int, speed: Callable[[JobInfo, int], float],
             integral: Callable[[float], float]) -> JobOutcome:
    submit, finish = job["submitted_at"].timestamp(), job["finished_at"].timestamp()
    lived = finish - submit
    contention = (integral(finish) - integral(submit)) / lived if lived > 0 else 1.0
    info = job_info(job)
    fair = fair_share_seconds(job["total_work"], lambda gpus: speed(info, gpus), total_gpus, contention,
                              job["min_gpus"], job["max_gpus"])
    started = job["started_at"]
    return JobOutcome(
        id=str(job["pk"]), tenant=job["tenant__name"], submit_time=submit,
        start_time=started.timestamp() if started else None, finish_time=finish, min_gpus=job["min_gpus"],
        max_gpus=job["max_gpus"], profile=info.profile, gpu_seconds=job["attained_gpu_seconds"],
        restarts=job["restarts"], rescales=0, preemptions=0, fair_share_seconds=fair,
    )


def active_jobs_integral(start: datetime, end: datetime) -> Callable[[float], float]:
    """t ↦ ∫ (jobs submitted and not finished) dt from the first event, over every tenant's jobs overlapping
    [start, end]: its difference over a job's life ÷ the life is the job's N (the simulator's contention)."""
    rows = Job.objects.filter(submitted_at__lte=end).filter(Q(finished_at__isnull=True) | Q(finished_at__gte=start))
    return step_integral((s.timestamp(), (f or end).timestamp()) for s, f in
                         rows.order_by().values_list("submitted_at", "finished_at"))


def step_integral(intervals: Iterable[tuple[float, float]]) -> Callable[[float], float]:
    """The running integral of the number of open intervals, as a function of time (exact: piecewise linear)."""
    events = sorted((t, d) for a, b in intervals for t, d in ((a, 1), (b, -1)))
    if not events:
        return lambda t: 0.0
    times = np.array([t for t, _ in events])
    open_after = np.cumsum([d for _, d in events])
    integral = np.concatenate([[0.0], np.cumsum(open_after[:-1] * np.diff(times))])
    return lambda t: float(np.interp(t, times, integral))


# --- why is it pending ---------------------------------------------------------------------


@dataclass(frozen=True)
class Holder:
    """A running job holding GPUs a pending job could use."""

    job: str  # "name #id", or "another tenant's job" for a tenant the viewer may not see
    tenant: str
    gpus: int  # of the type the pending job needs
    priority: int
    shrinkable: int  # GPUs it could give up and keep running (above its min_gpus)
    since: datetime | None


@dataclass(frozen=True)
class PendingExplanation:
    job_id: int
    job: str
    tenant: str
    state: str
    wants: str  # "2–8 a100 GPUs"
    waited: timedelta
    position: int  # 1 = next in line
    queued: int
    reason: str  # Job.pending_reason, set by the last round
    holders: list[Holder]
    forecast: str = ""  # "starts in ~12 min (p90 25 min)", from the latest forecast
    frees: str = ""  # "24 A100s free at ~10:40, when job X finishes"
    moved: str = ""  # why the estimate moved since the last forecast


def pending_choices(user: Viewer) -> list[tuple[int, str]]:
    """(id, label) of the queued jobs the user sees, in queue order."""
    jobs = Job.objects.visible_to(user).filter(state__in=QUEUED_STATES).select_related("tenant")
    return [(j.pk, f"{j.name} #{j.pk} ({j.tenant.name}, {j.state})") for j in jobs.order_by(*QUEUE_ORDER)]


QUEUE_ORDER = ("-priority", "submitted_at", "id")  # the order quota reclaim serves waiting jobs (core/quota.py)


def explain_pending(user: Viewer, job_id: int, now: datetime, limit: int = 10) -> PendingExplanation | None:
    """Why a queued job the user sees is waiting; None if it is not queued or not the user's to see."""
    job = Job.objects.visible_to(user).filter(pk=job_id, state__in=QUEUED_STATES).select_related("tenant").first()
    if job is None:
        return None
    queue = list(Job.objects.filter(state__in=QUEUED_STATES).order_by(*QUEUE_ORDER).values_list("pk", flat=True))
    visible = set(Tenant.objects.visible_to(user).values_list("name", flat=True))
    estimate = latest_for([job.pk]).get(job.pk)
    return PendingExplanation(
        job.pk, f"{job.name} #{job.pk}", job.tenant.name, job.state, _wants(job), now - job.submitted_at,
        queue.index(job.pk) + 1, len(queue), job.pending_reason or "not considered by a round yet",
        holders_of(job.gpu_type, visible, limit), starts_in(estimate, now),
        frees_text(estimate, visible_tenant_ids(user)) if estimate else "", estimate.moved_because if estimate else "",
    )


def _wants(job: Job) -> str:
    count = f"{job.min_gpus}" if job.min_gpus == job.max_gpus else f"{job.min_gpus}–{job.max_gpus}"
    kind = f" {job.gpu_type}" if job.gpu_type else ""
    return f"{count}{kind} GPU{'' if job.max_gpus == 1 else 's'}"


def holders_of(gpu_type: str, visible: set[str], limit: int) -> list[Holder]:
    """Running jobs on GPUs of ``gpu_type`` (any type if empty), largest first, then lowest priority."""
    held: dict[int, int] = {}
    rows = Allocation.objects.filter(ended_at__isnull=True, job__state__in=ACTIVE_STATES).order_by()
    for job_id, model in rows.values_list("job_id", "gpu__model"):
        if not gpu_type or gpu_type_key(model) == gpu_type_key(gpu_type):
            held[job_id] = held.get(job_id, 0) + 1
    jobs = {j.pk: j for j in Job.objects.filter(pk__in=held).select_related("tenant")}
    ranked = sorted(jobs.values(), key=lambda j: (-held[j.pk], j.priority, -j.submitted_at.timestamp(), j.pk))
    return [_holder(j, held[j.pk], j.tenant.name in visible) for j in ranked[:limit]]


def _holder(job: Job, gpus: int, visible: bool) -> Holder:
    return Holder(
        f"{job.name} #{job.pk}" if visible else "another tenant's job", job.tenant.name if visible else "—",
        gpus, job.priority, max(0, gpus - job.min_gpus), job.started_at if visible else None,
    )


# --- the cluster manager's own fairness (an observed Slurm) ----------------------------------------------------


FACTORS = ("age", "fair_share", "job_size", "partition", "qos")  # sprio's weighted factors, as stored


@dataclass(frozen=True)
class SlurmShareRow:
    """One Slurm user in one account: ``sshare``'s numbers, the mean ``sprio`` factors of its waiting jobs, and the
    console's measures beside them (its GPUs held now; the account's fair share of the cluster now)."""

    account: str
    user: str
    fair_share_factor: float | None  # Slurm's, 0–1: 1 = used nothing, 0.5 = used exactly its share
    norm_shares: float | None
    effective_usage: float | None
    waiting: int
    priority: float | None  # mean over its waiting jobs
    factors: dict[str, float | None]  # FACTORS → mean weighted factor over its waiting jobs
    gpus_held: int  # the console's: GPUs its jobs in this account hold now
    account_fair_share: float  # the console's: GPUs the account is due now by fair-share weight (0: no demand)


@dataclass(frozen=True)
class SlurmFairnessView:
    read_at: datetime
    rows: list[SlurmShareRow]


def slurm_fairness(user: Viewer) -> SlurmFairnessView | None:
    """The last reading of Slurm's ``sshare`` and ``sprio`` (an observer round's), per user and account the viewer
    may see (accounts are tenants); None when the console has not read one (it observes no Slurm cluster)."""
    reading = ClusterFairness.objects.first()
    if reading is None:
        return None
    visible = set(Tenant.objects.visible_to(user).values_list("name", flat=True))
    priorities = _priorities_by_user(reading.data.get("priorities") or [])
    held = _held_by_cluster_user()
    fair = _fair_share_now()
    rows = [
        _share_row(share, priorities.get((share["account"], share["user"]), []),
                   held.get((share["account"], share["user"]), 0), fair.get(share["account"], 0.0))
        for share in reading.data.get("shares") or []
        if share.get("user") and share.get("account") in visible
    ]
    return SlurmFairnessView(reading.read_at, rows)


def _priorities_by_user(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    by_user: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        by_user.setdefault((row.get("account", ""), row.get("user", "")), []).append(row)
    return by_user


def _mean(values: list[Any]) -> float | None:
    numbers = [float(value) for value in values if isinstance(value, int | float)]
    return sum(numbers) / len(numbers) if numbers else None


def _share_row(share: dict[str, Any], waiting: list[dict[str, Any]], held: int, fair: float) -> SlurmShareRow:
    return SlurmShareRow(
        account=share["account"], user=share["user"], fair_share_factor=share.get("fair_share"),
        norm_shares=share.get("norm_shares"), effective_usage=share.get("effective_usage"), waiting=len(waiting),
        priority=_mean([row.get("priority") for row in waiting]),
        factors={name: _mean([row.get(name) for row in waiting]) for name in FACTORS},
        gpus_held=held, account_fair_share=fair,
    )


def _held_by_cluster_user() -> dict[tuple[str, str], int]:
    """GPUs held now by the jobs of each (tenant, cluster user)."""
    rows = (Allocation.objects.filter(ended_at__isnull=True).order_by()
            .values_list("job__tenant__name", "job__cluster_user").annotate(n=Count("id")))
    return {(tenant, user): count for tenant, user, count in rows}


def _fair_share_now() -> dict[str, float]:
    """GPUs each tenant with demand now (a job waiting or running) is due by its fair-share weight."""
    wanting = set(Job.objects.filter(state__in=[*QUEUED_STATES, *ACTIVE_STATES]).order_by()
                  .values_list("tenant__name", flat=True).distinct())
    weights = dict(Tenant.objects.filter(name__in=wanting).values_list("name", "fair_share_weight"))
    total, weight_sum = Gpu.objects.count(), sum(weights.values())
    return {name: total * weight / weight_sum for name, weight in weights.items()} if weight_sum else {}
