"""The figures of the seeded week (``week.py``), worked out by hand."""

from __future__ import annotations

from datetime import datetime

import pytest

from cluster_ops.reports.content import build_content

from .week import Week

PUE, GRID_KG, PRICE = 1.58, 0.475, 0.10


def test_cluster_kpis_equal_the_hand_computed_values(week: Week, made_at: datetime) -> None:
    c = build_content(week.period, None, made_at)
    k = {kpi.key: kpi.value for kpi in c.kpis}
    # r1 2 GPUs × 168 h + v1 4 × 10 + l1 4 × 5 + v2 2 × 5
    assert k["gpu_hours"] == pytest.approx(336 + 40 + 20 + 10)
    assert k["idle_gpu_hours"] == pytest.approx(10)  # v1's g3, 10 h
    assert k["used_gpu_hours"] == pytest.approx(396)
    assert k["allocation"] == pytest.approx(100 * 406 / (12 * 168))  # % of 12 GPUs × 168 h
    # Hourly means: 80 % everywhere except v1's hours with its idle GPU: 2 h of 5/6 busy GPUs (r1 + v1),
    # 5 h of 9/10 (+ l1) and 3 h of 5/6 again → (168·80 − 5·(80 − 66.67) − 5·(80 − 72)) / 168.
    assert k["utilisation"] == pytest.approx((168 * 80 - 5 * (80 - 400 / 6) - 5 * (80 - 72)) / 168)
    assert (k["succeeded"], k["failed"], k["cancelled"]) == (2, 1, 0)
    assert k["avg_jct_h"] == pytest.approx((11 + 8) / 2)  # v1 11 h, l1 8 h (v2 failed: no JCT)
    assert k["p99_jct_h"] == pytest.approx(8 + 0.99 * 3)  # linear between the two
    # Waits of the jobs first started in the week: v2 0 h, v1 1 h, l1 3 h.
    assert k["wait_p50_min"] == pytest.approx(60)
    assert k["wait_p90_min"] == pytest.approx((1 + 0.8 * 2) * 60)
    assert k["wait_p99_min"] == pytest.approx((1 + 0.98 * 2) * 60)
    it_kwh = 396 * 0.3 + 10 * 0.1  # busy and idle GPU-hours
    assert k["it_kwh"] == pytest.approx(it_kwh)
    assert k["facility_kwh"] == pytest.approx(it_kwh * PUE)
    assert k["co2_kg"] == pytest.approx(it_kwh * PUE * GRID_KG)
    assert k["cost"] == pytest.approx(it_kwh * PUE * PRICE)
    # Jain over vision, language, research (all with demand): GPU-hours 50, 20, 336 over entitlements 0.4, 0.4, 0.2.
    x = [50 / 0.4, 20 / 0.4, 336 / 0.2]
    assert k["jain"] == pytest.approx(sum(x) ** 2 / (3 * sum(v * v for v in x)))
    # ρ: v1 lived 11 h beside r1 (11 h) and l1 (8 h): N = 30/11, share 12/N = 4.4 → its 4 GPUs, fair time 10 h,
    # ρ = 11/10; l1 lived 8 h beside r1 and v1: N = 3, share 4, fair time 5 h, ρ = 8/5.
    assert k["ftf_p50"] == pytest.approx((1.1 + 1.6) / 2)
    assert k["ftf_p99"] == pytest.approx(1.1 + 0.99 * 0.5)
    assert (k["lost_events"], k["xid_events"]) == (2, 1)
    # n3/gpu0 down 6 h (lost → recovered), n3/gpu1 from T+3d to the end: 96 h; one node, disjoint stretches.
    assert k["lost_gpu_hours"] == pytest.approx(102)
    assert k["node_down_hours"] == pytest.approx(102)


def test_previous_week_is_compared(week: Week, made_at: datetime) -> None:
    c = build_content(week.period, None, made_at)
    before = {kpi.key: kpi.previous for kpi in c.kpis}
    assert before["gpu_hours"] == pytest.approx(20 + 48)  # p1, and r1's first day
    assert before["succeeded"] == 1 and before["avg_jct_h"] == pytest.approx(10)
    assert before["it_kwh"] == pytest.approx(68 * 0.3)
    x = [20 / (2 / 3), 48 / (1 / 3)]  # vision and research had demand; language had none
    assert before["jain"] == pytest.approx(sum(x) ** 2 / (2 * sum(v * v for v in x)))
    assert (before["lost_events"], before["node_down_hours"]) == (1, pytest.approx(2))
    assert c.kpi("gpu_hours").change == pytest.approx(406 / 68 - 1)


def test_tenant_rows_quota_borrowing_idle_and_energy(week: Week, made_at: datetime) -> None:
    rows = {row.name: row for row in build_content(week.period, None, made_at).tenants}
    vision, language, research = rows["vision"], rows["language"], rows["research"]
    assert (vision.gpu_hours, vision.previous_gpu_hours) == (pytest.approx(50), pytest.approx(20))
    assert vision.avg_gpus == pytest.approx(50 / 168) and vision.quota_use == pytest.approx(50 / 168 / 2)
    assert vision.borrowed_gpu_hours == pytest.approx(2 * 10)  # v1: 4 GPUs against a quota of 2 for 10 h
    assert vision.over_quota_hours == pytest.approx(10 / 168)
    assert vision.under_quota_hours == pytest.approx((168 - 15) / 168)  # held nothing but in v1's and v2's hours
    assert (vision.idle_gpu_hours, vision.idle_share) == (pytest.approx(10), pytest.approx(0.2))
    assert vision.it_kwh == pytest.approx(30 * 0.3 + 10 * 0.1 + 10 * 0.3)  # v1 busy and idle, v2
    assert vision.co2_kg == pytest.approx(13 * PUE * GRID_KG)
    assert (vision.jobs_succeeded, vision.jobs_failed) == (1, 1)
    assert language.borrowed_gpu_hours == pytest.approx(2 * 5) and language.it_kwh == pytest.approx(6)
    assert research.borrowed_gpu_hours == pytest.approx(168) and research.over_quota_hours == pytest.approx(1)
    assert research.under_quota_hours == 0 and research.previous_gpu_hours == pytest.approx(48)


def test_top_users_failures_and_downtime(week: Week, made_at: datetime) -> None:
    c = build_content(week.period, None, made_at)
    assert [(u.owner, u.tenant, u.gpu_hours) for u in c.top_users] == [
        ("dave", "research", pytest.approx(336)), ("alice", "vision", pytest.approx(40)),
        ("bob", "language", pytest.approx(20)), ("carol", "vision", pytest.approx(10)),
    ]
    assert [(j.job, j.idle_allocated_gpu_hours) for j in c.idle_jobs][0] == ("v1", pytest.approx(10))
    assert [(j.name, j.error) for j in c.failed_jobs] == [("v2", "RuntimeError: CUDA error: an illegal memory access")]
    assert c.failures is not None
    assert (c.failures.xid_codes, c.failures.gpus_lost_now, c.failures.gpus_degraded_now) == ({48: 1}, 1, 1)
    assert [(d.node, d.down_hours, d.lost_gpu_hours, d.gpus_down) for d in c.downtime] == [
        ("n3", pytest.approx(102), pytest.approx(102), 2)]
    assert sorted(c.waits_h) == pytest.approx([0, 1, 3])


def test_recommendations_follow_from_the_data(week: Week, made_at: datetime) -> None:
    recs = build_content(week.period, None, made_at).recommendations
    assert [(r.kind, r.subject) for r in recs] == [
        ("power cap", "80% cap"),  # −10 % energy for +3 % JCT; 60 % is +12 % JCT: over the limit
        ("idle timeout", f"v1 #{week.jobs['v1'].pk}"),  # 10 of 40 GPU-hours idle: 25 %
        ("idle timeout", "vision"),  # 10 of 50: 20 % ≥ 15 %
        ("quota", "language"),  # under half its quota in 163 of 168 hours
        ("quota", "research"),  # over its quota every hour
        ("quota", "vision"),  # under half its quota in 153 of 168 hours
    ]
    assert "10.0% less facility energy (100 kWh, 48 kg CO₂) for +3.0% average JCT" in recs[0].text
    assert "persistently over quota" in recs[4].text and "persistently under quota" in recs[5].text


def test_tenant_report_holds_only_that_tenant(week: Week, made_at: datetime) -> None:
    c = build_content(week.period, week.vision, made_at)
    k = {kpi.key: kpi.value for kpi in c.kpis}
    assert k["gpu_hours"] == pytest.approx(50) and k["idle_gpu_hours"] == pytest.approx(10)
    assert k["allocation"] == pytest.approx(100 * 50 / (2 * 168))  # of its quota
    assert (k["succeeded"], k["failed"]) == (1, 1) and k["avg_jct_h"] == pytest.approx(11)
    assert k["wait_p50_min"] == pytest.approx(30)  # v2 0 min, v1 60 min
    assert k["it_kwh"] == pytest.approx(13) and k["ftf_p50"] == pytest.approx(1.1)
    assert "jain" not in k and "utilisation" not in k and "lost_events" not in k
    assert [row.name for row in c.tenants] == ["vision"]
    assert {u.owner for u in c.top_users} == {"alice", "carol"}
    assert c.failures is None and c.downtime == []
    assert [r.subject for r in c.recommendations] == [f"v1 #{week.jobs['v1'].pk}", "vision", "vision"]


def test_an_empty_period_says_so(week: Week, made_at: datetime) -> None:
    from datetime import timedelta

    from cluster_ops.reports import periods

    long_ago = periods.days(periods.DAILY, (week.T - timedelta(days=60)).date(), (week.T - timedelta(days=60)).date())
    c = build_content(long_ago, None, made_at)
    assert c.empty and c.kpi("gpu_hours").value == 0 and c.kpi("avg_jct_h").value is None
    assert not build_content(week.period, None, made_at).empty
