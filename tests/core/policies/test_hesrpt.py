"""heSRPT by hand: θ_i = (i/m)^c − ((i−1)/m)^c, c = 1/(1−p), job 1 the largest.

Jobs here have no workload profile, so they use the constructor's ``default_p`` and their
size is their remaining work (seconds at ``min_gpus`` = 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.core.policies._ordering import SpeedMemo
from scheduler.core.policies.hesrpt import HesrptPolicy, fit_exponent, hesrpt_shares, largest_remainder
from scheduler.core.speed import speed_table
from scheduler.core.types import JobInfo, PolicyResult
from tests.core.strategies import PROFILES

from . import cluster, job, snapshot


def elastic(job_id: str, remaining: float, *, low: int = 1, high: int = 16, **fields: Any) -> JobInfo:
    return job(job_id, min_gpus=low, max_gpus=high, work=remaining, **fields)


def allocate(*jobs: JobInfo, gpus: tuple[int, ...] = (8, 8), p: float = 0.5) -> PolicyResult:
    return HesrptPolicy(default_p=p).allocate(snapshot(cluster(*gpus), *jobs), None)


def test_counts_match_the_closed_form_on_an_exactly_divisible_cluster() -> None:
    # p = 0.5, c = 2, m = 4, 16 GPUs: θ = 1/16, 3/16, 5/16, 7/16 from the largest job to the smallest.
    jobs = [elastic("j10", 10), elastic("j20", 20), elastic("j30", 30), elastic("j40", 40)]
    assert dict(allocate(*jobs).allocations) == {"j10": 7, "j20": 5, "j30": 3, "j40": 1}


@pytest.mark.parametrize(("p", "expected"), [(0.0, [4, 4, 4, 4]), (2 / 3, [14, 2])])
def test_other_exponents_match_the_closed_form(p: float, expected: list[int]) -> None:
    # p = 0: c = 1, equal shares (processor sharing). p = 2/3: c = 3, m = 2: 7/8 and 1/8 of 16.
    jobs = [elastic(f"j{i}", 10.0 * (i + 1)) for i in range(len(expected))]
    result = allocate(*jobs, p=p)
    assert [result.allocations[j.id] for j in jobs] == expected


def test_a_share_below_min_gpus_becomes_zero_and_its_gpus_go_to_the_smallest_job() -> None:
    # 8 GPUs, m = 3, c = 2: shares 8·5/9 = 4.44, 8·3/9 = 2.67, 8·1/9 = 0.89 → largest remainder 4, 3, 1.
    # The largest job needs 2 GPUs: 1 < 2 becomes 0; 1 GPU is too few to start it, so the smallest grows.
    jobs = [elastic("small", 10), elastic("mid", 20), elastic("large", 30, low=2)]
    result = allocate(*jobs, gpus=(8,))
    assert dict(result.allocations) == {"small": 5, "mid": 3, "large": 0}
    assert result.reasons["large"] == (
        "waiting: 2 GPUs needed, not enough left after smaller jobs; "
        "heSRPT share 0.89 GPUs, size rank 3 of 3 (smallest first), p=0.50")


def test_shares_above_max_gpus_are_capped_and_the_spare_starts_waiting_jobs_first() -> None:
    # 8 GPUs, m = 3: targets 4, 3, 1. "small" may use 2: 2 spare GPUs start nobody (all run),
    # then grow the next smallest job, "mid", from 3 to 5.
    jobs = [elastic("small", 10, high=2), elastic("mid", 20), elastic("large", 30)]
    assert dict(allocate(*jobs, gpus=(8,)).allocations) == {"small": 2, "mid": 5, "large": 1}


def test_running_jobs_resized_by_their_share_say_so() -> None:
    jobs = [elastic("j10", 10, holds=8), elastic("j20", 20, holds=8, on="n1")]
    result = allocate(*jobs)  # θ = 3/4 and 1/4 of 16
    assert dict(result.allocations) == {"j10": 12, "j20": 4}
    assert result.reasons["j20"] == (
        "resized 8→4 GPUs: heSRPT share 4.00 GPUs, size rank 2 of 2 (smallest first), p=0.50")


def test_finished_and_oversized_jobs_are_left_out_of_the_split() -> None:
    jobs = [elastic("j10", 10), job("done", 1, work=5, done=5), job("huge", 32)]
    result = allocate(*jobs)
    assert dict(result.allocations) == {"j10": 16, "done": 0, "huge": 0}
    assert result.reasons["huge"] == "unschedulable: needs 32 GPUs, the cluster has 16 usable"


def test_closed_form_helpers() -> None:
    assert hesrpt_shares(4, 0.5) == pytest.approx([7 / 16, 5 / 16, 3 / 16, 1 / 16])
    assert hesrpt_shares(5, 0.3).sum() == pytest.approx(1.0)
    assert list(largest_remainder(np.array([2.5, 2.5, 3.0]), 8)) == [3, 2, 3]  # tie to the smaller job


def test_p_is_fitted_from_a_profiled_speed_curve() -> None:
    k = np.arange(9, dtype=float)
    assert fit_exponent(k**0.7) == pytest.approx(0.7)
    assert fit_exponent(np.array([0.0, 1.0])) is None  # one point: nothing to fit
    profiled = elastic("profiled", 10, high=8, profile="wide")
    snap = snapshot(cluster(8), profiled, profiles=PROFILES)
    expected = fit_exponent(speed_table(profiled, snap))
    assert expected is not None and 0 < expected < 1
    assert HesrptPolicy().exponent(profiled, snap, SpeedMemo(snap)) == pytest.approx(expected)
    assert HesrptPolicy(default_p=0.3).exponent(elastic("plain", 10), snap, SpeedMemo(snap)) == 0.3
