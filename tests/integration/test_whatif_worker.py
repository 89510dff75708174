"""A real Celery worker on a real Redis runs a what-if sweep end to end: a chord of runs, then the comparison."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery import Celery
from celery.contrib.testing.worker import start_worker

from scheduler import whatif
from scheduler.models import WhatIfStatus, WhatIfSweep
from scheduler.sim.runner import Scenario

from .conftest import wait_until
from .processes import ALL_QUEUES

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_worker_runs_a_sweep_sent_through_redis_and_fills_the_comparison(redis_celery_app: Celery, settings) -> None:  # type: ignore[no-untyped-def]
    settings.TRACES_DIR = FIXTURES
    base = Scenario(trace="pollux/workloads-realistic/workload-1.csv", nodes=2)
    sweep = whatif.create_sweep(base, ["fifo", "pollux"], [1.0, 0.7], [1.0], name="worker sweep")

    with start_worker(redis_celery_app, pool="solo", perform_ping_check=False, queues=ALL_QUEUES.split(",")):
        whatif.launch_sweep(sweep, app=redis_celery_app)  # autocommit: enqueued at once
        assert wait_until(lambda: WhatIfSweep.objects.get(pk=sweep.pk).comparison is not None, seconds=60)

    sweep.refresh_from_db()
    runs = list(sweep.runs.order_by("pk"))
    assert len(runs) == 4
    assert all(run.status == WhatIfStatus.SUCCEEDED and run.progress == 1.0 and run.celery_task_id for run in runs)
    assert all(run.summary["completed"] == 4 for run in runs)
    assert [row["run"] for row in sweep.comparison["rows"]] == [run.pk for run in runs]
    assert sweep.comparison["best"]["avg_jct_s"]["policy"] in {"fifo", "pollux"}
    # No result is kept (the rows hold them): sending a run needs the broker only, and fails at once when it is away
    # (a result backend that is away held a request for 19 s). The last run to finish compared the sweep.
    assert {redis_celery_app.AsyncResult(run.celery_task_id).state for run in runs} == {"PENDING"}
    assert len({run.celery_task_id for run in runs}) == 4
