"""A small seeded week whose report can be worked out by hand (the numbers are in ``tests/reports/test_content.py``).

The week is the last complete Monday-to-Sunday week before today (UTC), so ``--period weekly`` finds it; ``T`` is its
Monday 00:00. Rows are written directly, as history (each job's allocations too).

Inventory: 3 nodes × 4 GPUs = 12 GPUs (n1, n2, n3). Tenants: vision (quota 2), language (quota 2), research
(quota 1). Every held GPU-hour is one ``GpuHour`` row and part of its job's ``JobUsageHour``: a busy GPU-hour runs
at 80 % utilisation and uses 0.3 kWh, an idle one (held, 0 %) 0.1 kWh.

Jobs (rigid: profile "rigid", total work = seconds at its GPUs, so its speed is 1 at ``min_gpus``):

========  ========  =====  =================================  ==============================  ==========
job       tenant    owner  submitted → started → finished     GPUs                            state
========  ========  =====  =================================  ==============================  ==========
p1        vision    alice  T−6d 00:00 → 00:00 → 10:00         2 (n1 g0,g1) 10 h = 20 GPU-h    succeeded
r1        research  dave   T−1d 00:00 → 00:00 → (running)     2 (n3 g2,g3): 48 before T,      running
                                                              336 in the week
v1        vision    alice  T 00:00 → 01:00 → 11:00            4 (n1 g0..g3) 10 h = 40 GPU-h,  succeeded
                                                              g3 idle: 10 idle GPU-h
l1        language  bob    T 00:00 → 03:00 → 08:00            4 (n2 g0..g3) 5 h = 20 GPU-h    succeeded
v2        vision    carol  T+1d 00:00 → 00:00 → 05:00         2 (n1 g0,g1) 5 h = 10 GPU-h     failed
========  ========  =====  =================================  ==============================  ==========

GPU events: n3/gpu0 lost T+2d 12:00, recovered 18:00 (degraded since); n3/gpu1 lost T+3d 00:00 and still lost;
an XID 48 on n1/gpu2 at T+1d 10:00; in the previous week n2/gpu0 lost T−4d 00:00, recovered 02:00.

What-if: a sweep with the same scenario at caps 1.0 (1,000 facility kWh, 475 kg CO₂, average JCT 10 h), 0.8 (900 kWh,
427.5 kg, 10.3 h: −10 % energy, +3 % JCT) and 0.6 (810 kWh, 11.2 h: +12 % JCT, over the 5 % limit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from cluster_ops.reports import periods
from scheduler import inventory
from scheduler.models import (
    Allocation,
    Gpu,
    GpuHealth,
    Job,
    JobState,
    Tenant,
    WhatIfRun,
    WhatIfStatus,
    WhatIfSweep,
)
from telemetry.models import GpuEvent, GpuHour, JobUsageHour, Severity
from telemetry.readings import EventKind

H = timedelta(hours=1)
D = timedelta(days=1)
BUSY_J, IDLE_J = 0.3 * 3.6e6, 0.1 * 3.6e6  # per GPU-hour


def last_week_monday() -> datetime:
    today = timezone.now().astimezone(UTC).date()
    monday = today - timedelta(days=today.weekday() + 7)
    return datetime(monday.year, monday.month, monday.day, tzinfo=UTC)


@dataclass
class Week:
    T: datetime
    period: periods.Period
    vision: Tenant
    language: Tenant
    research: Tenant
    gpus: dict[str, list[Gpu]]
    users: dict[str, User] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)


def seed_week() -> Week:
    T = last_week_monday()
    nodes = {name: inventory.register_node(name, [inventory.GpuSpec(i, f"GPU-{name}-{i}", "NVIDIA A100-SXM4-80GB",
                                                                  81920, 400) for i in range(4)])
             for name in ("n1", "n2", "n3")}
    gpus = {name: list(node.gpus.order_by("index")) for name, node in nodes.items()}
    week = Week(T, periods.days(periods.WEEKLY, T.date(), (T + 6 * D).date()),
                Tenant.objects.create(name="vision", gpu_quota=2), Tenant.objects.create(name="language", gpu_quota=2),
                Tenant.objects.create(name="research", gpu_quota=1), gpus)
    for name, tenant in (("alice", week.vision), ("carol", week.vision), ("bob", week.language),
                         ("dave", week.research)):
        week.users[name] = User.objects.create_user(name, password=f"pw-{name}-12345")
        tenant.members.add(week.users[name])
    n1, n2, n3 = gpus["n1"], gpus["n2"], gpus["n3"]
    week.jobs["p1"] = job(week.vision, "alice", "p1", T - 6 * D, T - 6 * D, T - 6 * D + 10 * H, 2, n1[:2], 10)
    week.jobs["r1"] = job(week.research, "dave", "r1", T - D, T - D, None, 2, n3[2:], 24 + 168)
    week.jobs["v1"] = job(week.vision, "alice", "v1", T, T + H, T + 11 * H, 4, n1, 10, idle=[n1[3]])
    week.jobs["l1"] = job(week.language, "bob", "l1", T, T + 3 * H, T + 8 * H, 4, n2, 5)
    error = "Traceback …\nRuntimeError: CUDA error: an illegal memory access"
    week.jobs["v2"] = job(week.vision, "carol", "v2", T + D, T + D, T + D + 5 * H, 2, n1[:2], 5,
                          state=JobState.FAILED, error=error)
    events(week)
    whatif(T + 4 * D)
    return week


def job(tenant: Tenant, owner: str, name: str, submitted: datetime, started: datetime, finished: datetime | None,
        width: int, gpus: list[Gpu], hours: int, *, idle: list[Gpu] = (), state: str = JobState.SUCCEEDED,
        error: str = "") -> Job:
    row = Job.objects.create(
        tenant=tenant, owner=User.objects.get(username=owner), name=name, workload_profile="rigid",
        total_work=hours * 3600.0, min_gpus=width, max_gpus=width, submitted_at=submitted, started_at=started,
        finished_at=finished, state=state if finished else JobState.RUNNING, error=error,
        progress=hours * 3600.0 if state == JobState.SUCCEEDED else 0.0,
    )
    gpu_hours, job_hours = [], []
    for i in range(hours):
        at = started + i * H
        for gpu in gpus:
            busy = gpu not in idle
            gpu_hours.append(GpuHour(gpu=gpu, start=at, samples=360, gpu_util_avg=80.0 if busy else 0.0,
                                     gpu_util_max=80.0 if busy else 0.0, energy_j=BUSY_J if busy else IDLE_J,
                                     allocated_seconds=3600, idle_allocated_seconds=0 if busy else 3600))
        job_hours.append(JobUsageHour(job=row, start=at, allocated_seconds=3600 * len(gpus),
                                      idle_allocated_seconds=3600 * len(idle),
                                      energy_j=BUSY_J * (len(gpus) - len(idle)) + IDLE_J * len(idle)))
    GpuHour.objects.bulk_create(gpu_hours)
    JobUsageHour.objects.bulk_create(job_hours)
    Allocation.objects.bulk_create(Allocation(job=row, gpu=gpu, started_at=started, ended_at=finished) for gpu in gpus)
    return row


def events(week: Week) -> None:
    T, n1, n2, n3 = week.T, week.gpus["n1"], week.gpus["n2"], week.gpus["n3"]
    for gpu, at, kind, code in (
        (n3[0], T + 2 * D + 12 * H, EventKind.LOST, None), (n3[0], T + 2 * D + 18 * H, EventKind.RECOVERED, None),
        (n3[1], T + 3 * D, EventKind.LOST, None), (n1[2], T + D + 10 * H, EventKind.XID, 48),
        (n2[0], T - 4 * D, EventKind.LOST, None), (n2[0], T - 4 * D + 2 * H, EventKind.RECOVERED, None),
    ):
        severity = {EventKind.LOST: Severity.CRITICAL, EventKind.XID: Severity.WARNING}.get(kind, Severity.INFO)
        GpuEvent.objects.create(gpu=gpu, at=at, kind=kind, code=code, severity=severity, message=f"{kind} event")
    Gpu.objects.filter(pk=n3[0].pk).update(health=GpuHealth.DEGRADED, health_changed_at=T + 2 * D + 18 * H)
    Gpu.objects.filter(pk=n3[1].pk).update(health=GpuHealth.LOST, health_changed_at=T + 3 * D)


def whatif(finished: datetime) -> None:
    sweep = WhatIfSweep.objects.create(name="caps on last week")
    scenario = {"trace": "history.csv", "policy": "tiresias", "round_seconds": 60.0, "load_factor": 1.0}
    for cap, kwh, jct_h in ((1.0, 1000.0, 10.0), (0.8, 900.0, 10.3), (0.6, 810.0, 11.2)):
        WhatIfRun.objects.create(
            sweep=sweep, scenario={**scenario, "power_cap_fraction": cap}, status=WhatIfStatus.SUCCEEDED,
            progress=1.0, started_at=finished - H, finished_at=finished,
            summary={"facility_kwh": kwh, "co2_kg": kwh * 0.475, "cost": kwh * 0.1, "avg_jct_s": jct_h * 3600,
                     "p99_jct_s": jct_h * 7200, "power_cap_fraction": cap},
        )
