"""Fairness page data: shares over time, Jain's index, finish-time fairness, why a job is pending."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from cluster_ops.dashboards import fairness_data
from cluster_ops.dashboards.fairness_data import explain_pending, finish_time_fairness, shares_over_time, step_integral
from scheduler.models import Allocation, Tenant
from telemetry.ledger import held_over_time
from telemetry.rollups import HOURS, floor

from .history import History, hold

pytestmark = pytest.mark.django_db


def test_shares_follow_usage_hours_with_quota_fair_share_and_borrowing(history: History, staff: User) -> None:
    Tenant.objects.filter(name="vision").update(gpu_quota=4)
    shares = shares_over_time(staff, history.now - timedelta(hours=24), history.now)
    assert shares.total_gpus == 16
    assert [s.tenant for s in shares.tenants] == ["language", "vision"]
    vision = next(s for s in shares.tenants if s.tenant == "vision")
    assert len(vision.held) == len(shares.starts) == len(shares.jain)
    assert vision.held[-2] == pytest.approx(6.0)  # only big-vision, 6 GPUs, in the last whole hour
    assert vision.borrowed[-2] == pytest.approx(2.0)  # GPU-hours above its quota of 4 in that hour
    # The hours add up to the ledger's (the reports') borrowed GPU-hours of the same minutes.
    ledger = held_over_time(history.now - timedelta(hours=24), history.now, {"vision": 4})["vision"]
    assert sum(vision.borrowed) * 3600 == pytest.approx(ledger.borrowed_gpu_seconds) and sum(vision.borrowed) > 2
    # Both tenants want GPUs in the last hour: weights 1 and 2 of 16 GPUs.
    language = next(s for s in shares.tenants if s.tenant == "language")
    assert (vision.fair_share[-1], language.fair_share[-1]) == (pytest.approx(16 / 3), pytest.approx(32 / 3))
    assert all(j is None or 0 < j <= 1 for j in shares.jain)
    assert any(j is not None and j < 1 for j in shares.jain)


def test_a_tenant_user_sees_only_their_tenants_share_but_the_cluster_index(history: History,
                                                                           vision_user: User, staff: User) -> None:
    start, end = history.now - timedelta(hours=24), history.now
    mine = shares_over_time(vision_user, start, end)
    assert [s.tenant for s in mine.tenants] == ["vision"]
    assert mine.jain == shares_over_time(staff, start, end).jain


def test_finish_time_fairness_of_recent_jobs_is_scoped(history: History, staff: User, vision_user: User) -> None:
    everyone = finish_time_fairness(staff, history.now - timedelta(days=1), history.now)
    assert len(everyone.rhos) == len(history.finished) == 12
    assert all(rho > 0 for rho in everyone.rhos)
    assert everyone.p50 is not None and everyone.p99 is not None and everyone.p50 <= everyone.p99
    assert 0 <= everyone.unfair_fraction <= 1  # type: ignore[operator]
    assert len(finish_time_fairness(vision_user, history.now - timedelta(days=1), history.now).rhos) == 6
    assert finish_time_fairness(staff, history.now + timedelta(hours=1), history.now + timedelta(hours=2)).rhos == []


def test_step_integral_counts_open_intervals_over_time() -> None:
    integral = step_integral([(0, 10), (5, 15)])
    assert [integral(t) for t in (0, 5, 10, 15, 20)] == [0, 5, 15, 20, 20]
    assert step_integral([])(3.0) == 0.0


def test_a_pending_job_shows_its_position_reason_and_who_holds_its_gpus(history: History,
                                                                         language_user: User) -> None:
    pending = history.pending
    assert pending is not None
    why = explain_pending(language_user, pending.pk, history.now)
    assert why is not None
    assert (why.position, why.queued, why.wants) == (1, 1, "4–8 a100 GPUs")
    assert why.reason.startswith("waiting: needs 4 a100 GPUs")
    assert why.waited >= timedelta(minutes=40)
    # Holders of A100s, largest first: vision's 6-GPU job (hidden from a language user), then language's own.
    holders = [(h.job, h.gpus) for h in why.holders]
    assert holders == [("another tenant's job", 6), (f"lang-train #{history.running[1].pk}", 2)]
    assert why.holders[0].tenant == "—" and why.holders[1].shrinkable == 1


def test_another_tenants_pending_job_is_not_explained(history: History, vision_user: User, staff: User) -> None:
    pending = history.pending
    assert pending is not None
    assert explain_pending(vision_user, pending.pk, history.now) is None
    assert fairness_data.pending_choices(vision_user) == []
    assert [pk for pk, _ in fairness_data.pending_choices(staff)] == [pending.pk]
    assert explain_pending(staff, history.finished[0].pk, history.now) is None  # not queued


def test_the_running_hour_is_read_from_open_allocations(history: History, staff: User) -> None:
    """The first hour of a cluster has no job hours yet: shares, borrowing and Jain come from what is held now."""
    from telemetry.models import JobUsageHour
    JobUsageHour.objects.all().delete()
    Tenant.objects.filter(name="language").update(gpu_quota=4)  # lang-train holds 6 GPUs: it borrows 2
    shares = shares_over_time(staff, history.now - timedelta(hours=24), history.now, now=history.now)
    held = {s.tenant: s.held[-1] for s in shares.tenants}
    borrowed = {s.tenant: s.borrowed[-1] for s in shares.tenants}
    so_far = (history.now - floor(history.now, HOURS.width)).total_seconds() / 3600  # of the running hour
    assert held == {"vision": 6, "language": 6}
    assert borrowed == {"vision": 0, "language": pytest.approx(2 * so_far)}  # 2 GPUs above quota since it began
    assert shares.jain[-1] is not None and 0 < shares.jain[-1] <= 1
    # A range that ended in the past is not given today's allocations.
    past = shares_over_time(staff, history.now - timedelta(hours=30), history.now - timedelta(hours=6),
                            now=history.now)
    assert all(s.held[-1] == 0 for s in past.tenants)


def test_borrowing_earlier_in_the_hour_shows_though_nothing_is_borrowed_now(history: History, staff: User) -> None:
    """The page said "No tenant held more than its quota" for the running hour while a report of the same minutes
    gave 1.14 GPU-hours borrowed: it compared the GPUs held at this instant (or an hour's average) with the quota,
    the report integrates the GPUs held above it."""
    hour = floor(history.now, HOURS.width)
    now = hour + timedelta(minutes=40)
    Allocation.objects.filter(ended_at__isnull=True).update(ended_at=hour)  # the running jobs stopped at the hour
    burst = history.finished[0]
    hold(burst, history.a100[:4], hour + timedelta(minutes=5), hour + timedelta(minutes=25))  # 4 GPUs, 20 minutes
    Tenant.objects.filter(name="vision").update(gpu_quota=2)
    shares = shares_over_time(staff, hour - timedelta(hours=5), now, now=now)
    vision = next(s for s in shares.tenants if s.tenant == "vision")
    assert vision.held[-1] == 0  # nothing held at this instant
    assert vision.borrowed[-1] == pytest.approx(2 * 20 / 60)  # 2 GPUs above quota for 20 minutes
    report = held_over_time(hour, now, {"vision": 2})["vision"].borrowed_gpu_seconds / 3600
    assert vision.borrowed[-1] == pytest.approx(report)


def test_the_ledger_cuts_borrowing_at_each_bound_and_adds_up(history: History) -> None:
    from telemetry.ledger import borrowed_by_span

    start = floor(history.now, HOURS.width) - timedelta(hours=6)
    bounds = [start, start, *(start + timedelta(minutes=25 * i) for i in range(1, 15)), history.now]  # one empty
    quotas = {"vision": 1, "language": 3}
    spans = borrowed_by_span(bounds, quotas)
    whole = held_over_time(start, history.now, quotas)
    for name in quotas:
        assert len(spans[name]) == len(bounds) - 1 and spans[name][0] == 0
        assert sum(spans[name]) == pytest.approx(whole[name].borrowed_gpu_seconds) and sum(spans[name]) > 0
        for low, high, seconds in zip(bounds[:-1], bounds[1:], spans[name], strict=True):
            assert seconds == pytest.approx(held_over_time(low, high, quotas)[name].borrowed_gpu_seconds)


def test_a_clusters_first_hour_is_drawn_on_an_hour_wide_axis(history: History, staff: User) -> None:
    """A cluster minutes old opens on "since the first data": one hour bucket, which plotly drew on a 1-ms axis."""
    from cluster_ops.dashboards.fairness import borrowed_figure, jain_figure

    Tenant.objects.filter(name="language").update(gpu_quota=4)
    since = max(floor(history.now, HOURS.width), history.now - timedelta(minutes=20))  # within the running hour
    shares = shares_over_time(staff, since, history.now, now=history.now)
    assert len(shares.starts) == 1
    for figure in (borrowed_figure(shares), jain_figure(shares)):
        low, high = figure.layout.xaxis.range
        assert figure.layout.meta == "drawn" and high - low == timedelta(hours=1)
    bar = borrowed_figure(shares).data[0]
    assert bar.width == pytest.approx(0.95 * 3_600_000) and bar.offset == 0  # the hour, in a date axis's ms


def test_slurms_own_fair_share_is_shown_per_user_beside_the_consoles_measures(history: History, staff: User,
                                                                              vision_user: User) -> None:
    from scheduler.models import ClusterFairness

    assert fairness_data.slurm_fairness(staff) is None  # not observing Slurm: nothing read
    Job = history.running[0].__class__
    Job.objects.filter(pk__in=[job.pk for job in history.running]).update(cluster_user="alice")
    ClusterFairness.objects.create(read_at=history.now, data={
        "shares": [
            {"account": "vision", "user": "", "fair_share": None, "norm_shares": 0.5, "effective_usage": 0.7},
            {"account": "vision", "user": "alice", "fair_share": 0.25, "norm_shares": 1.0, "effective_usage": 1.0},
            {"account": "language", "user": "bob", "fair_share": 0.9, "norm_shares": 1.0, "effective_usage": 0.1},
        ],
        "priorities": [
            {"job_id": 1, "user": "alice", "account": "vision", "priority": 1000, "age": 100, "fair_share": 900,
             "job_size": 0, "partition": 0, "qos": 0},
            {"job_id": 2, "user": "alice", "account": "vision", "priority": 2000, "age": 300, "fair_share": 900,
             "job_size": 800, "partition": 0, "qos": 0},
        ],
    })
    seen = fairness_data.slurm_fairness(staff)
    assert seen is not None and [(row.account, row.user) for row in seen.rows] == [("vision", "alice"),
                                                                                    ("language", "bob")]
    alice = seen.rows[0]
    assert (alice.fair_share_factor, alice.waiting, alice.priority) == (0.25, 2, 1500)
    assert alice.factors == {"age": 200, "fair_share": 900, "job_size": 400, "partition": 0, "qos": 0}
    vision_running = next(job for job in history.running if job.tenant == history.vision)
    assert alice.gpus_held == Allocation.objects.filter(job=vision_running, ended_at__isnull=True).count() > 0
    assert alice.account_fair_share == pytest.approx(16 / 3)  # weights 1 and 2 of 16 GPUs, both tenants wanting
    mine = fairness_data.slurm_fairness(vision_user)
    assert mine is not None and [row.user for row in mine.rows] == ["alice"]  # not another tenant's users
