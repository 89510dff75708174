"""The forecast backtest on a two-job queue whose forecasts, truths and baselines are worked out by hand."""

from __future__ import annotations

import pytest

from scheduler.core.config import get_policy
from scheduler.sim.backtest import _FreePlan, backtest
from tests.sim.test_engine import cluster, rigid


def test_backtest_of_a_two_job_queue_worked_by_hand() -> None:
    # FIFO on 4 GPUs, rounds every 60 s. Truth: A (4 GPUs, 5000 s) runs 0–5000; B (4, 3000 s) waits, starts at
    # the round at 5040 and ends at 8040. Forecasts at 3600 and 7200 (the replay ends at 8040).
    # At 3600 nothing has finished: A is predicted the prior hour, is past it, so is re-estimated at half of
    # its 3600 s served again (ends 5400); B starts at 5400 and runs the prior hour (ends 9000).
    # At 7200 A ran 5000 s, the only finished job: B (served 2160 s) is predicted 5000 s, ends at 10040.
    result = backtest([rigid("A", 0, 4, 5000), rigid("B", 100, 4, 3000)], cluster(), lambda: get_policy("fifo"))
    assert result.forecasts == 2
    assert (result.start.count, result.start.median_abs_error_s) == (1, 360)  # B: 5400 vs 5040
    # Finish errors: A@3600 400, B@3600 960, B@7200 2000.
    assert (result.finish.count, result.finish.median_abs_error_s) == (3, 960)
    assert result.finish.within_10min == pytest.approx(1 / 3)
    # Queue position: B first in line at 3600 (starts now: 1440 off); mean duration 1 h before any finish.
    queue = result.baselines["queue_position"]
    assert queue["start"].median_abs_error_s == 1440
    # Requested time (2 × true): A holds the GPUs until 10000, so B is planned to start then (4960 off).
    assert result.baselines["requested_time"]["start"].median_abs_error_s == 4960
    assert result.as_dict()["baselines"]["requested_time"]["start"]["count"] == 1
    assert result.forecast_wall_s["max"] is not None and result.forecast_wall_s["max"] < 5


def test_the_free_plan_finds_the_first_window_that_fits() -> None:
    plan = _FreePlan(0.0, 8)
    plan.reserve(0, 100, 6)  # 2 free until 100
    plan.reserve(150, 200, 8)  # none free 150–200
    assert plan.earliest(2, 1000) == 200
    assert plan.earliest(2, 50) == 0
    assert plan.earliest(4, 50) == 100  # 100–150 is free enough
    assert plan.earliest(4, 60) == 200
    assert plan.earliest(9, 1) is None
