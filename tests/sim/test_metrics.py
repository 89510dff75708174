"""Run metrics on small hand-worked runs: every expected number is worked out in the comments."""

import math
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.core.power import GpuPowerSpec, PowerModel, power_factor, time_factor
from scheduler.sim import metrics
from scheduler.sim.metrics import (
    energy_kwh,
    entitlements,
    ftf_values,
    jain_index,
    percentile,
    summarise,
    tenant_fairness,
)
from scheduler.sim.records import JobOutcome, SimulationResult, UsageInterval

# Round numbers, not the defaults: V100 idles at 50 W and trains at 250 W (limit 300 W); T4 10 W / 60 W (70 W).
SPECS = {"v100": GpuPowerSpec(idle_w=50, max_w=250, tdp_w=300), "t4": GpuPowerSpec(idle_w=10, max_w=60, tdp_w=70)}
POWER = PowerModel(specs=SPECS, pue=1.5, grid_g_co2_per_kwh=400, price_per_kwh=0.2)


def job(id: str, tenant: str, submit: float, start: float | None, finish: float | None, fair_share: float,
        rescales: int = 0, preemptions: int = 0, restarts: int = 0) -> JobOutcome:
    return JobOutcome(id=id, tenant=tenant, submit_time=submit, start_time=start, finish_time=finish, min_gpus=1,
                      max_gpus=2, profile=None, gpu_seconds=0.0, restarts=restarts, rescales=rescales,
                      preemptions=preemptions, fair_share_seconds=fair_share)


# Cluster: 3 V100 + 1 T4. Job a1 (tenant a) trains on 2 V100 from 0 to 3600 s; job b1 (tenant b) waits until
# 1800 s, restarts on the T4 until 3600 s, then trains on it until 7200 s. The unused V100s idle, then power off.
JOBS = (
    job("a1", "a", submit=0, start=0, finish=3600, fair_share=1800, rescales=1, restarts=1),
    job("b1", "b", submit=0, start=1800, finish=7200, fair_share=7200, preemptions=1, restarts=1),
)
USAGE = (
    UsageInterval(0, 1800, busy={"v100": 2}, restarting={}, idle={"v100": 1, "t4": 1},
                  tenant_busy={("a", "v100"): 2}),
    UsageInterval(1800, 3600, busy={"v100": 2}, restarting={"t4": 1}, idle={"v100": 1},
                  tenant_busy={("a", "v100"): 2}, tenant_restarting={("b", "t4"): 1}),
    UsageInterval(3600, 7200, busy={"t4": 1}, restarting={}, idle={}, off={"v100": 3}, tenant_busy={("b", "t4"): 1}),
)


def run(jobs: tuple[JobOutcome, ...] = JOBS, usage: tuple[UsageInterval, ...] = USAGE,
        quotas: dict[str, int] | None = None, cap: float = 1.0,
        type_caps: dict[str, float] | None = None) -> SimulationResult:
    return SimulationResult(policy="fifo", jobs=jobs, usage=usage, gpus_by_type={"v100": 3, "t4": 1},
                            tenant_quotas={"a": 3, "b": 1} if quotas is None else quotas, rounds=12,
                            wall_seconds=0.5, power_cap_fraction=cap, power_caps_by_type=type_caps or {})


def test_job_times() -> None:
    s = summarise(run(), POWER)
    assert (s.jobs, s.completed) == (2, 2)
    # JCTs 3600 and 7200: mean 5400, p50 5400, p99 = 3600 + 0.99 × 3600 = 7164
    assert (s.avg_jct_s, s.p50_jct_s, s.p99_jct_s) == pytest.approx((5400, 5400, 7164))
    assert s.makespan_s == 7200  # last finish 7200 − first submit 0
    # queueing 0 and 1800: mean 900, p50 900, p99 = 0.99 × 1800 = 1782
    assert (s.avg_queue_s, s.p50_queue_s, s.p99_queue_s) == pytest.approx((900, 900, 1782))
    assert (s.rescales, s.preemptions, s.restarts, s.rounds, s.wall_s) == (1, 1, 2, 12, 0.5)


def test_utilisation() -> None:
    s = summarise(run(), POWER)
    # capacity 4 GPUs × 7200 s = 28800 GPU-s; allocated 2×1800 + 3×1800 + 1×3600 = 12600; busy 10800
    assert s.utilization == pytest.approx(12600 / 28800)  # 0.4375
    assert s.effective_utilization == pytest.approx(10800 / 28800)  # 0.375


def test_energy_co2_and_cost() -> None:
    s = summarise(run(), POWER)
    # 0–1800: 2×250 + 50 + 10 = 560 W; 1800–3600: 2×250 + 10 (restarting T4) + 50 = 560 W; 3600–7200: 60 W (off: 0)
    # 560×1800 + 560×1800 + 60×3600 = 2 232 000 J = 0.62 kWh → ×1.5 = 0.93 kWh → 0.372 kg CO₂, cost 0.186
    assert (s.energy_kwh, s.facility_kwh, s.co2_kg, s.cost) == pytest.approx((0.62, 0.93, 0.372, 0.186))
    assert energy_kwh(USAGE, POWER) == pytest.approx(0.62)


def test_energy_is_taken_at_the_runs_own_cap() -> None:
    s = summarise(run(cap=0.9), POWER)  # POWER says cap 1.0; the run says 0.9, and the run wins
    busy = 250 * power_factor(0.9)  # 250 × 0.954 / 1.013 = 235.4 W per busy V100; busy T4 60 × the same factor
    # both halves of the first hour: 2 busy V100 + one idle V100 (50 W) + the T4 idle or restarting (10 W)
    joules = (2 * busy + 60) * 1800 + (2 * busy + 60) * 1800 + 60 * power_factor(0.9) * 3600
    assert s.energy_kwh == pytest.approx(joules / 3.6e6)
    assert s.power_cap_fraction == 0.9


def test_a_type_cap_applies_to_that_type_only() -> None:
    s = summarise(run(type_caps={"v100": 0.7}), POWER)
    busy_v100 = 250 * power_factor(0.7)  # the T4 stays uncapped: idle 10 W, busy 60 W
    joules = (2 * busy_v100 + 50 + 10) * 3600 + 60 * 3600
    assert s.energy_kwh == pytest.approx(joules / 3.6e6)
    assert (s.power_cap_fraction, s.power_caps_by_type) == (1.0, {"v100": 0.7})


def test_tenant_energy_is_the_energy_of_the_gpus_it_held() -> None:
    s = summarise(run(), POWER)
    # a: 2 busy V100 for 3600 s = 500 W × 3600 = 0.5 kWh. b: the T4 restarting (10 W) for 1800 s, then busy (60 W)
    # for 3600 s = 18 000 + 216 000 J = 0.065 kWh. Unallocated: idle V100 (50 W) 3600 s + idle T4 (10 W) 1800 s
    # = 198 000 J = 0.055 kWh. The three add up to the run's 0.62 kWh.
    a, b = s.tenants["a"], s.tenants["b"]
    assert (a["energy_kwh"], b["energy_kwh"], s.unallocated_energy_kwh) == pytest.approx((0.5, 0.065, 0.055))
    assert a["energy_kwh"] + b["energy_kwh"] + s.unallocated_energy_kwh == pytest.approx(s.energy_kwh)
    assert (b["facility_kwh"], b["co2_kg"], b["cost"]) == pytest.approx((0.0975, 0.039, 0.0195))  # × 1.5, 400 g, 0.2
    assert USAGE[1].by_tenant == {"a": 2, "b": 1}


def test_capped_busy_energy_per_unit_of_work_is_zeus_energy() -> None:
    # The same work takes time_factor(0.7) = 1.063× longer at 0.7: 1 busy V100-hour becomes 1.063 hours.
    hour = UsageInterval(0, 3600, busy={"v100": 1}, restarting={}, idle={})
    longer = UsageInterval(0, 3600 * time_factor(0.7), busy={"v100": 1}, restarting={}, idle={})
    ratio = energy_kwh([longer], POWER.at_cap(0.7)) / energy_kwh([hour], POWER)
    assert ratio == pytest.approx(0.845)  # 15.5 % less energy


def test_jain_with_quota_entitlements() -> None:
    # a got 2×3600 = 7200 GPU-s (share 0.25), b 1×1800 + 1×3600 = 5400 (share 0.1875); entitled 3/4 and 1/4:
    # x = (1/3, 3/4) → J = (13/12)² / (2 × (1/9 + 9/16)) = 169/194
    assert tenant_fairness(run()) == pytest.approx(169 / 194)
    # no quotas → equal entitlements 1/2: x = (0.5, 0.375) → 0.875² / (2 × 0.390625) = 0.98
    assert summarise(run(quotas={"a": 0, "b": 0}), POWER).jain == pytest.approx(0.98)


def test_jain_is_one_for_even_and_one_over_n_for_all_to_one_tenant() -> None:
    assert jain_index([2.0, 2.0, 2.0]) == 1.0
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == 0.25
    assert jain_index([3.0, 1.0]) == pytest.approx(16 / 20)  # (3+1)² / (2 × (9+1))
    assert jain_index([]) is None and jain_index([0.0, 0.0]) is None
    # b submitted a job but got nothing: (1 + 0)² / (2 × 1) = 1/2
    hogged = (UsageInterval(0, 100, busy={"v100": 3}, restarting={}, idle={"t4": 1}, tenant_busy={("a", "v100"): 3}),)
    assert tenant_fairness(run(usage=hogged, quotas={})) == 0.5
    with pytest.raises(ValueError):
        jain_index([1.0, -1.0])


def test_entitlements() -> None:
    # c has no quota while others do: left out; a and b split 2:6
    assert entitlements(["a", "b", "c"], {"a": 2, "b": 6, "c": 0}) == {"a": 0.25, "b": 0.75}
    assert entitlements(["a", "b"], {"x": 5}) == {"a": 0.5, "b": 0.5}  # no quota among them → equal
    assert entitlements([], {"a": 1}) == {}


def test_finish_time_fairness() -> None:
    s = summarise(run(), POWER)
    # ρ(a1) = 3600 / 1800 = 2.0; ρ(b1) = 7200 / 7200 = 1.0 (exactly its fair share: not unfair)
    assert ftf_values(JOBS) == [2.0, 1.0]
    assert (s.ftf_p50, s.ftf_p99, s.unfair_fraction) == pytest.approx((1.5, 1.99, 0.5))
    unfinished = job("c1", "a", submit=0, start=None, finish=None, fair_share=100)
    no_share = job("d1", "a", submit=0, start=0, finish=10, fair_share=0)
    assert ftf_values([unfinished, no_share]) == []


def test_percentile() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == pytest.approx(3.97)  # rank 0.99 × 3 = 2.97 → 3 + 0.97
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_no_completed_jobs_gives_none_not_zero() -> None:
    waiting = (job("a1", "a", submit=5, start=None, finish=None, fair_share=10),
               job("b1", "b", submit=0, start=20, finish=None, fair_share=10))
    s = summarise(run(jobs=waiting), POWER)
    assert (s.jobs, s.completed) == (2, 0)
    assert [s.avg_jct_s, s.p50_jct_s, s.p99_jct_s, s.makespan_s, s.ftf_p50, s.ftf_p99, s.unfair_fraction] == [None] * 7
    assert s.avg_queue_s == 20  # only b1 started


def test_empty_run() -> None:
    s = summarise(run(jobs=(), usage=()), POWER)
    assert (s.jobs, s.completed, s.energy_kwh, s.facility_kwh, s.co2_kg, s.cost) == (0, 0, 0, 0, 0, 0)
    assert [s.utilization, s.effective_utilization, s.jain, s.avg_queue_s, s.makespan_s] == [None] * 5
    assert not any(isinstance(v, float) and math.isnan(v) for v in s.as_dict().values())


def test_as_dict_has_the_keys_dashboards_read() -> None:
    d = summarise(run(), POWER).as_dict()
    required = {"policy", "jobs", "completed", "avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "avg_queue_s",
                "utilization", "jain", "ftf_p99", "rescales", "energy_kwh", "wall_s"}
    assert required <= d.keys()
    assert d["policy"] == "fifo" and d["energy_kwh"] == pytest.approx(0.62)


def test_default_power_model_is_used_when_none_is_given() -> None:
    # defaults: V100 idle 75 W, trains at 240 W; T4 17.5 W / 56 W — the hand run comes to
    # (2×240 + 75 + 17.5)×1800 + (2×240 + 17.5 + 75)×1800 + 56×3600 = 2 262 600 J = 0.6285 kWh
    assert summarise(run()).energy_kwh == pytest.approx(0.6285)


def test_metrics_module_imports_no_framework() -> None:
    code = "import sys, scheduler.sim.metrics; print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(metrics.__file__).parents[2])
    assert out.stdout.strip() == "[]"


def test_a_stored_summary_reads_back_typed_and_an_older_one_too() -> None:
    """``SimulationSummary`` stays typed until rendered: the stored JSON reads back equal; an older run's summary
    (before per-tenant energy) reads back with None for what it did not record, and a key now unknown is dropped."""
    from scheduler.sim.metrics import SimulationSummary

    stored = {"policy": "fifo", "jobs": 3, "completed": 3, "avg_jct_s": 10.0, "energy_kwh": 2.0, "retired": 1}
    old = SimulationSummary.from_dict(stored)
    assert (old.policy, old.avg_jct_s, old.unallocated_energy_kwh, old.tenants) == ("fifo", 10.0, None, {})
    assert "retired" not in old.as_dict()
    assert SimulationSummary.from_dict(old.as_dict()) == old
