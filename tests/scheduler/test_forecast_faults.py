"""Forecasts that always come: a round that commits mid-forecast, two forecasts at once, and
a job with years of work no longer fail, double up or starve the rest of the queue."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from scheduler.forecasting import forecasts
from scheduler.jobs import verbs
from scheduler.live.config import update_settings
from scheduler.live.lease import take_lease
from scheduler.models import Forecast, Job, JobState, Tenant

from .test_forecasts import NOW, at, estimates, rigid, run_on_all_gpus
from .test_forecasts import cluster as forecast_cluster  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("forecast_cluster")


def test_a_job_that_finishes_while_the_forecast_reads_breaks_nothing(tenant: Tenant, monkeypatch) -> None:
    """The forecast read the jobs a second time after the snapshot: a round committing between the two reads
    (here: a job finishing) gave KeyError(<job id>)."""
    a = rigid(tenant, "A", 4, 300, 900)
    rigid(tenant, "B", 2, 50, 500)
    run_on_all_gpus(a, served=200)
    snapshot = forecasts.build_snapshot

    def then_a_round_commits(*args, **kwargs):
        taken = snapshot(*args, **kwargs)
        Job.objects.filter(pk=a.pk).update(state=JobState.SUCCEEDED, finished_at=NOW)
        return taken

    monkeypatch.setattr(forecasts, "build_snapshot", then_a_round_commits)
    row = forecasts.refresh(NOW)
    assert row is not None and row.jobs == 2  # the state as read: A still running, B after it
    assert estimates()["B"].estimated_start == at(100)


def test_one_forecast_at_a_time(tenant: Tenant) -> None:
    rigid(tenant, "A", 4, 300, 900)
    assert take_lease(forecasts.FORECAST_LEASE, "another worker", 300)
    assert forecasts.refresh(NOW, force=True) is None and not Forecast.objects.exists()


def test_a_job_that_cannot_finish_within_the_horizon_does_not_hold_up_the_rest(tenant: Tenant) -> None:
    """A tenant's 1e9-work job (within the accepted bounds) made every forecast run out of time: simulated round by
    round to the 30-day horizon. It is 'not within 30 days' at once; the rest of the queue is still forecast."""
    update_settings(policy="sia-profiled", round_seconds=30)  # an elastic policy: a round every interval
    verbs.submit_job(tenant=tenant, name="huge", workload_profile="cifar10", total_work=1e9, min_gpus=2,
                        max_gpus=2, submitted_at=NOW - timedelta(seconds=100))
    rigid(tenant, "B", 2, 50, 50)
    rigid(tenant, "C", 4, 60, 40)
    began = time.perf_counter()
    row = forecasts.refresh(NOW)
    took = time.perf_counter() - began
    assert row is not None and took < 10, took
    got = estimates()
    assert got["huge"].estimated_finish is None and "no finish within" in forecasts.describe(got["huge"])
    assert got["B"].estimated_finish is not None
    assert got["C"].estimated_start is None  # it needs all 4 GPUs: behind the endless job
