"""AFS-L by hand: each GPU goes to the largest rise of completion rate speed/remaining_work per GPU."""

from __future__ import annotations

import numpy as np

from scheduler.core.config import get_policy
from scheduler.core.policies.afs import best_step
from scheduler.core.types import JobInfo, PolicyResult

from . import cluster, job, snapshot
from .test_optimus import scaling_profile


def allocate(*jobs: JobInfo, max_batch: int = 1024) -> PolicyResult:
    return get_policy("afs").allocate(snapshot(cluster(4), *jobs, profiles=scaling_profile(1.0, max_batch)), None)


def test_a_short_job_that_scales_well_takes_every_gpu() -> None:
    # Linear speed (no profile). Rates k/100 and k/400: every GPU lifts the short job's rate by
    # 0.01, the long one's by 0.0025, so the short job grows to its max before the long one starts.
    # (Optimus gives the same pair 1 and 3 GPUs: test_optimus.)
    short = job("short", min_gpus=1, max_gpus=4, work=100)
    long = job("long", min_gpus=1, max_gpus=4, work=400, submit=1)
    result = allocate(short, long)
    assert dict(result.allocations) == {"short": 4, "long": 0}
    assert result.reasons["long"] == "waiting: 1 GPU needed, 0 free; shorter or better-scaling jobs gain more per GPU"


def test_efficiency_beats_shortness_when_the_short_job_scales_badly() -> None:
    # short: φ = 1, speed 1, 4/3, 3/2, 8/5 on 1..4 GPUs, 100 units left; long: linear, 400 left.
    # short 0→1: 1/100 = 0.01; short 1→2: (4/3 − 1)/100 = 0.0033; long 0→1: 1/400 = 0.0025;
    # short 2→3: (3/2 − 4/3)/100 = 0.0017 < long 1→2: 0.0025. So 2 and 2.
    short = job("short", min_gpus=1, max_gpus=4, profile="scaling", work=100)
    long = job("long", min_gpus=1, max_gpus=4, work=400, submit=1)
    assert dict(allocate(short, long).allocations) == {"short": 2, "long": 2}


def test_a_job_that_cannot_speed_up_keeps_its_min() -> None:
    # The short job's batch may not grow past 1: a second GPU is useless to it, so the long
    # linear job takes the rest although its rate rises only 1/400 per GPU.
    capped = job("capped", min_gpus=1, max_gpus=4, profile="scaling", work=100)
    long = job("long", min_gpus=1, max_gpus=4, work=400, submit=1)
    assert dict(allocate(capped, long, max_batch=1).allocations) == {"capped": 1, "long": 3}


def test_the_first_step_is_the_whole_min_gpus() -> None:
    rates = np.array([0.0, 0.0, 0.03, 0.04, 0.045])
    assert best_step(rates, 0, 2, 4) == (0.015, 2)
    assert best_step(rates, 0, 2, 1) == (0.0, 0)  # min_gpus does not fit
    gain, add = best_step(rates, 2, 2, 4)  # +1: 0.01 per GPU beats +2: 0.0075
    assert (round(gain, 12), add) == (0.01, 1)


def test_finished_jobs_get_nothing_and_resized_ones_say_why() -> None:
    done = job("done", 1, work=10, done=10, holds=1)
    grown = job("grown", min_gpus=1, max_gpus=4, holds=1, first_gpu=1, submit=1)
    result = allocate(done, grown)
    assert dict(result.allocations) == {"done": 0, "grown": 4}
    assert result.reasons["done"] == "finished: no work left"
    assert result.reasons["grown"] == "resized 1→4 GPUs: largest completion-rate rise per GPU"
