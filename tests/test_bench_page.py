"""``make bench`` (scripts/bench.py): the performance page it writes is one current table with the machine and the
date, built from the JSON the benchmark commands print."""

from __future__ import annotations

from datetime import UTC, datetime
from types import ModuleType

import pytest

from research.policy_bench import bench_policies
from tests.core.strategies import PROFILES
from tests.scripts import load_script

# The shapes bench_round, bench_forecast, bench_telemetry and validate_pollux print (their --json).
ROUND = {"database": "sqlite", "jobs": 1000, "gpus": 1024, "policies": {"tiresias": {
    "rounds": 5, "failed": 0, "median_ms": 118.4, "max_ms": 314.2, "snapshot_ms": 72.0, "policy_ms": 13.1,
    "write_ms": 24.1, "decisions": 751}}}
FORECAST = {"database": "sqlite", "jobs": 1000, "gpus": 1024, "samples": 5, "policies": {"fifo": {
    "point_s": {"median": 0.702, "max": 0.795, "simulation_median": 0.611},
    "ranged_s": {"median": 4.893, "max": 5.108, "simulation_median": 4.77}}}}
TELEMETRY = {"database": "sqlite", "gpus": 1024, "seed_s": {"hours_7d": 1.7},
             "ingest": {"samples": 100352, "calls": 98, "seconds": 2.446, "samples_per_s": 41026},
             "roll_up_s": {"minutes": 2.79, "hours": 0.99, "live_minute": 0.3},
             "queries_ms": {"utilisation_7d_hours": 36.8, "ledger_7d": 626.9}}
SIMULATOR = {"rows": [{"policy": "pollux", "load": "1.0", "ours_avg_jct_s": 2380.2, "published_avg_jct_s": 2446.1,
                       "wall_s": 4.88}], "cases": 1, "wall_s": 5.1}


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench")


def test_the_page_is_one_current_table_with_the_machine_and_the_date(bench: ModuleType) -> None:
    policies = bench_policies(30, 32, ["fifo", "pollux"], PROFILES, rounds=1)
    rows = (bench.policy_rows(policies) + bench.round_rows(ROUND) + bench.forecast_rows(FORECAST)
            + bench.telemetry_rows(TELEMETRY) + bench.simulator_rows(SIMULATOR))
    page = bench.page(rows, [], datetime(2026, 12, 6, 5, 30, tzinfo=UTC))

    assert page.count("|---|---|") == 1 and page.startswith("# Performance\n")
    assert "Measured by `make bench` on 2026-12-06 05:30 UTC, on " in page and " cores" in page
    table = [line for line in page.splitlines() if line.startswith("| ") and line != "| what | figure |"]
    assert len(table) == len(rows) == 2 + 1 + 1 + 4 + 1
    assert "`fifo`" in table[0] and "`pollux`" in table[1]  # in the policies' order, not alphabetical
    assert "118 ms median, 314 ms max" in page and "41,026 samples/s" in page and "4.9 s wall" in page
    assert "Not measured" not in page


def test_a_benchmark_that_failed_is_named_with_its_reason(bench: ModuleType) -> None:
    page = bench.page([], [("simulator", "no Pollux traces under TRACES_DIR=/nowhere")], datetime.now(UTC))
    assert "- simulator: no Pollux traces under TRACES_DIR=/nowhere" in page
