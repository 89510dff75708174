"""Fairness page data: shares over time, Jain's index, finish-time fairness, why a job is pending."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from cluster_ops.dashboards import fairness_data
from cluster_ops.dashboards.fairness_data import explain_pending, finish_time_fairness, shares_over_time, step_integral
from scheduler.models import Tenant

from .history import History

pytestmark = pytest.mark.django_db


def test_shares_follow_usage_hours_with_quota_fair_share_and_borrowing(history: History, staff: User) -> None:
    Tenant.objects.filter(name="vision").update(gpu_quota=4)
    shares = shares_over_time(staff, history.now - timedelta(hours=24), history.now)
    assert shares.total_gpus == 16
    assert [s.tenant for s in shares.tenants] == ["language", "vision"]
    vision = next(s for s in shares.tenants if s.tenant == "vision")
    assert len(vision.held) == len(shares.starts) == len(shares.jain)
    assert vision.held[-2] == pytest.approx(6.0)  # only big-vision, 6 GPUs, in the last whole hour
    assert vision.borrowed == [max(0.0, h - 4) for h in vision.held] and vision.borrowed[-2] == pytest.approx(2.0)
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
    assert held == {"vision": 6, "language": 6} and borrowed == {"vision": 0, "language": 2}
    assert shares.jain[-1] is not None and 0 < shares.jain[-1] <= 1
    # A range that ended in the past is not given today's allocations.
    past = shares_over_time(staff, history.now - timedelta(hours=30), history.now - timedelta(hours=6),
                            now=history.now)
    assert all(s.held[-1] == 0 for s in past.tenants)
