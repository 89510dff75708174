"""``slurm_forecast_backtest``'s arguments and its per-seed JSON (the lab run itself is tests/slurm's and the
manual's): seeds S … S+K−1, each one JSON line, both sides scored on the same jobs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.management.commands import slurm_forecast_backtest as command
from scheduler.on_slurm.backtest import Compared

T0 = datetime(2026, 12, 6, 12, tzinfo=UTC)


def row(job: int, slurm_error: float | None, console_error: float | None) -> Compared:
    def estimate(error: float | None) -> datetime | None:
        return None if error is None else T0 + timedelta(seconds=error)

    return Compared(job, T0, estimate(slurm_error), estimate(console_error))


@pytest.fixture
def seeds_run(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each seed's burst, without a lab: seed s's console errors are s × 10 s, Slurm's 100 s."""
    runs: list[tuple[int, int]] = []

    def fake_backtest(client: object, jobs: int, seed: int, say=print) -> list[Compared]:
        runs.append((seed, jobs))
        return [row(1, 100, seed * 10), row(2, 100, seed * 10), row(3, None, 5), row(4, 80, None)]

    monkeypatch.setattr(command, "connect", lambda: object())
    monkeypatch.setattr(command, "backtest", fake_backtest)
    return runs


def test_json_is_one_line_a_seed_scored_on_the_jobs_both_estimated(seeds_run: list[tuple[int, int]]) -> None:
    out = StringIO()
    call_command("slurm_forecast_backtest", "--seed", "7", "--seeds", "3", "--jobs", "60", "--json", stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [{"seed": s, "scored": 2, "console_median_abs_error_s": s * 10.0,
                      "slurm_median_abs_error_s": 100.0} for s in (7, 8, 9)]
    assert seeds_run == [(7, 60), (8, 60), (9, 60)]


@pytest.mark.parametrize(("args", "message"), [
    (["--seeds", "0"], "--seeds: between 1 and 20"),
    (["--jobs", "1000"], "--jobs: between 1 and 400"),
    (["--seed", "-1"], "--seed: between 0 and 2147483647"),
])
def test_arguments_out_of_range_are_named_before_the_lab_is_touched(
        seeds_run: list[tuple[int, int]], args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("slurm_forecast_backtest", *args, stdout=StringIO())
    assert seeds_run == []


def test_the_workload_repeats_each_users_kinds_of_job_within_their_limits() -> None:
    from scheduler.on_slurm.backtest import KINDS_PER_USER, burst_of, kinds_of, seed_tag

    assert [seed_tag(seed) for seed in (0, 1, 25, 26, 27)] == ["a", "b", "z", "ba", "bb"]
    users = [("alice", "research"), ("bob", "nlp")]
    kinds = kinds_of(users, seed=3)
    assert len(kinds) == 2 * KINDS_PER_USER and len({kind.name for kind in kinds}) == len(kinds)
    assert all(kind.name.endswith("-d") and not any(c.isdigit() for c in kind.name) for kind in kinds)
    assert [kind.user for kind in kinds] == ["alice"] * KINDS_PER_USER + ["bob"] * KINDS_PER_USER
    assert kinds_of(users, seed=3) == kinds and kinds_of(users, seed=4) != kinds  # a seed is a workload
    burst = burst_of(kinds, 200, seed=3)
    assert len(burst) == 200 and {kind.name for kind, _ in burst} == {kind.name for kind in kinds}
    for kind, seconds in burst:
        assert 5 <= seconds <= kind.limit_minutes * 60 - 5  # never killed at its limit
        assert abs(seconds - kind.typical_seconds) <= 0.1 * kind.typical_seconds + 1 or seconds in (
            5, kind.limit_minutes * 60 - 5)
        assert kind.typical_seconds <= 0.7 * kind.limit_minutes * 60  # users ask for more than they use
