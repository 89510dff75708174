"""Optimus by hand: min_gpus in arrival order, then GPUs to the largest remaining-time reduction."""

from __future__ import annotations

import math

import numpy as np

from scheduler.core.config import get_policy
from scheduler.core.goodput import GoodputModel, PerfParams
from scheduler.core.policies.optimus import best_step
from scheduler.core.types import JobInfo, NodeInfo, PolicyResult

from . import cluster, job, snapshot


def scaling_profile(noise_scale: float, max_batch_size: int = 1024) -> dict[str, dict[str, GoodputModel]]:
    """A workload whose speed on k GPUs is k·(φ + 1)/(φ + k): no sync cost, a fixed per-GPU batch of 1.

    With ``max_batch_size`` 1 it cannot use a second GPU at all (its global batch may not grow).
    """
    perf = PerfParams(alpha_c=1, beta_c=0, alpha_n=0, beta_n=0, alpha_r=0, beta_r=0, gamma=1)
    model = GoodputModel(perf, init_batch_size=1, max_batch_size=max_batch_size, min_local_bsz=1, max_local_bsz=1,
                         noise_scale=noise_scale)
    return {"scaling": {"a100": model}}


def allocate(*jobs: JobInfo, nodes: tuple[NodeInfo, ...] | None = None, max_batch: int = 1024) -> PolicyResult:
    profiles = scaling_profile(1.0, max_batch)
    return get_policy("optimus").allocate(snapshot(nodes or cluster(4), *jobs, profiles=profiles), None)


def test_jobs_get_min_gpus_in_arrival_order_and_smaller_later_ones_backfill() -> None:
    # 4 GPUs: a (2) fits, b (3) does not fit in the 2 left, c (2) does.
    result = allocate(job("c", 2, submit=2), job("b", 3, submit=1), job("a", 2, submit=0))
    assert dict(result.allocations) == {"a": 2, "b": 0, "c": 2}
    assert result.reasons["b"] == "waiting: 3 GPUs needed, 2 free; 1 earlier job ahead"


def test_the_next_gpu_goes_to_the_largest_remaining_time_reduction() -> None:
    # Linear speed k (no profile). T_short(k) = 100/k, T_long(k) = 400/k; both start at 1 GPU, 2 left.
    # 1st GPU: long 400/1 − 400/2 = 200 beats short 100/1 − 100/2 = 50.
    # 2nd GPU: long 400/2 − 400/3 = 66.7 still beats short's 50.
    short = job("short", min_gpus=1, max_gpus=4, work=100)
    long = job("long", min_gpus=1, max_gpus=4, work=400, submit=1)
    assert dict(allocate(short, long).allocations) == {"short": 1, "long": 3}


def test_a_job_that_cannot_use_more_gpus_gets_no_more_and_gpus_stay_idle() -> None:
    # Its batch may not grow past 1, so on 2+ GPUs it cannot run: no step shortens it.
    capped = job("capped", min_gpus=1, max_gpus=4, profile="scaling", work=100)
    result = allocate(capped, max_batch=1)
    assert dict(result.allocations) == {"capped": 1}


def test_sublinear_scaling_splits_by_marginal_gain() -> None:
    # φ = 1: speed 1, 4/3, 3/2, 8/5 on 1..4 GPUs; remaining times 100/speed and 280/speed.
    # Gains: a 1→2: 100 − 75 = 25; b 1→2: 280 − 210 = 70 → b. Then b 2→3: 210 − 186.7 = 23.3 < 25 → a.
    a = job("a", min_gpus=1, max_gpus=4, profile="scaling", work=100)
    b = job("b", min_gpus=1, max_gpus=4, profile="scaling", work=280, submit=1)
    result = allocate(a, b)
    assert dict(result.allocations) == {"a": 2, "b": 2}


def test_a_step_looks_past_a_dip_up_to_one_node() -> None:
    # Remaining times on 0..4 GPUs: 3 GPUs would be slower than 2, 4 faster: the step is +2.
    times = np.array([math.inf, 10.0, 6.0, 7.0, 3.0])
    assert best_step(times, 2, 4) == (1.5, 2)
    assert best_step(times, 2, 3) == (-1.0, 1)  # not positive: the job stops growing
    assert best_step(times, 4, 4) == (0.0, 0)


def test_rigid_jobs_get_exactly_min_and_finished_jobs_nothing() -> None:
    result = allocate(job("rigid", 2, work=100), job("finished", 1, work=10, done=10, holds=1))
    assert dict(result.allocations) == {"rigid": 2, "finished": 0}
    assert result.reasons["finished"] == "finished: no work left"


def test_a_running_job_that_grows_says_why() -> None:
    grown = job("grown", min_gpus=1, max_gpus=4, work=100, holds=1)
    result = allocate(grown)
    assert dict(result.allocations) == {"grown": 4}
    assert result.reasons["grown"] == "resized 1→4 GPUs: largest remaining-time reduction per GPU"
