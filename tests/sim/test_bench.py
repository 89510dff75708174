"""The round-time benchmark prints one JSON object: the median and p95 round of every policy."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from research.policy_bench import summarise
from scheduler.core.config import policy_names
from scheduler.sim.synthetic import synthetic_snapshot
from tests.core.strategies import PROFILES


def test_bench_prints_median_and_p95_for_every_policy(tmp_path: Path) -> None:
    out = StringIO()
    call_command("bench_policies", "--jobs", "40", "--gpus", "64", "--rounds", "2", "--json",
                 "--output", str(tmp_path / "bench.json"), stdout=out)
    result = json.loads(out.getvalue())
    assert set(result) == set(policy_names()) and len(result) >= 8
    assert all(row["median_ms"] > 0 and row["p95_ms"] >= row["median_ms"] for row in result.values())
    assert json.loads((tmp_path / "bench.json").read_text()) == result


def test_unknown_policy_is_named() -> None:
    with pytest.raises(CommandError, match="unknown policy 'nope'"):
        call_command("bench_policies", "--policy", "nope")


def test_summary_statistics() -> None:
    assert summarise([0.001 * i for i in range(1, 21)]) == {"median_ms": 10.5, "p95_ms": 19.0}


def test_synthetic_snapshot_is_seeded_and_busy() -> None:
    first, again = synthetic_snapshot(200, 256, PROFILES, seed=1), synthetic_snapshot(200, 256, PROFILES, seed=1)
    assert first == again != synthetic_snapshot(200, 256, PROFILES, seed=2)
    held = sum(job.gpus for job in first.jobs)
    assert 0.5 * 256 < held <= 256 and first.total_gpus == 256
