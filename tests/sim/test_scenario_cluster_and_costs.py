"""Scenario: a mixed cluster with tenant quotas, the site's PUE, grid and price, and per-tenant figures."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scheduler.sim.metrics import fair_share_seconds
from scheduler.sim.runner import Scenario, cluster_for, run_scenario

NATIVE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "native" / "workload.csv"


def test_node_groups_and_quotas_make_a_mixed_cluster_with_tenants(tmp_path: Path) -> None:
    scenario = Scenario(trace=str(NATIVE), node_groups=[["a100", 8, 2], ["v100", 4, 1]],
                        tenant_quotas={"vision": 8, "language": 4})
    nodes, tenants = cluster_for(scenario, tmp_path)
    assert [(n.gpu_type, len(n.gpus)) for n in nodes] == [("a100", 8), ("a100", 8), ("v100", 4)]
    assert [(t.name, t.quota) for t in tenants] == [("language", 4), ("vision", 8)]
    assert scenario.as_dict()["node_groups"] == [["a100", 8, 2], ["v100", 4, 1]]


def test_quotas_override_a_presets_and_none_keep_it(tmp_path: Path) -> None:
    assert cluster_for(Scenario(trace="t.csv", preset="demo"), tmp_path)[1] == ()
    _, tenants = cluster_for(Scenario(trace="t.csv", preset="demo", tenant_quotas={"a": 3}), tmp_path)
    assert [(t.name, t.quota) for t in tenants] == [("a", 3)]


def test_pue_grid_and_price_price_the_same_energy(tmp_path: Path) -> None:
    base = Scenario(trace=str(NATIVE), policy="fifo", node_groups=[["a100", 8, 2]])
    _, default = run_scenario(base, tmp_path)
    _, site = run_scenario(Scenario(**{**base.as_dict(), "pue": 1.2, "grid_g_co2_per_kwh": 50.0,
                                       "price_per_kwh": 0.3}), tmp_path)
    assert site["energy_kwh"] == pytest.approx(default["energy_kwh"])
    assert site["facility_kwh"] == pytest.approx(default["energy_kwh"] * 1.2)
    assert site["co2_kg"] == pytest.approx(default["energy_kwh"] * 1.2 * 0.05)
    assert site["cost"] == pytest.approx(default["energy_kwh"] * 1.2 * 0.3)


def test_the_summary_breaks_times_down_per_tenant(tmp_path: Path) -> None:
    _, summary = run_scenario(Scenario(trace=str(NATIVE), policy="fifo", node_groups=[["a100", 8, 2]]), tmp_path)
    tenants = summary["tenants"]
    assert sorted(tenants) == ["default", "language", "vision"]
    assert sum(t["jobs"] for t in tenants.values()) == summary["jobs"]
    assert tenants["vision"]["avg_jct_s"] == pytest.approx(3600, rel=0.05)  # the rigid one-hour job
    assert tenants["vision"]["gpu_hours"] == pytest.approx(4.0, rel=0.05)


def test_fair_share_seconds_is_work_over_speed_on_one_nth_of_the_cluster() -> None:
    linear = lambda gpus: float(gpus)  # noqa: E731
    assert fair_share_seconds(100.0, linear, 16, 4.0, 1, 8) == 25.0  # 4 GPUs each
    assert fair_share_seconds(100.0, linear, 16, 4.0, 1, 2) == 50.0  # capped at max_gpus
    assert fair_share_seconds(100.0, linear, 16, 32.0, 1, 8) == 200.0  # half a GPU: time-shared
    assert fair_share_seconds(100.0, linear, 16, 0.5, 1, 32) == pytest.approx(100 / 16)  # N is at least 1
    assert math.isinf(fair_share_seconds(100.0, lambda gpus: 0.0, 16, 1.0, 1, 8))
