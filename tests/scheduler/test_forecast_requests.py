"""Every waiting job has an estimate within seconds: a queue change asks for a forecast (debounced), the request
survives a forecast being made, and forecasts assume arrivals when the recent arrival rate is steady — and say so."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from celery.exceptions import Retry
from django.core.cache import cache
from django.utils import timezone

from cluster_ops.dashboards.forecast_data import waiting_forecast
from scheduler import tasks
from scheduler.forecasting import forecasts
from scheduler.jobs import verbs
from scheduler.live import forecast_requests
from scheduler.live.lease import lease_holder, release_lease, take_lease
from scheduler.live.start_requests import START_TASK
from scheduler.models import Forecast, Job, JobForecast, Tenant

from .test_forecasts import NOW, cluster, rigid, run_on_all_gpus  # noqa: F401  (cluster: a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The forecast requests sent to the broker (the memory broker of the tests keeps no queue to read back); a
    submission's request for a start between rounds (start_requests) is not one."""
    cache.delete(forecast_requests.REQUESTED_KEY)
    calls: list[dict[str, Any]] = []

    def send_task(name: str, **options: Any) -> None:
        if name != START_TASK:
            calls.append({"name": name, **options})

    monkeypatch.setattr(forecast_requests.current_app, "send_task", send_task)
    return calls


def test_a_submission_asks_for_a_forecast_once_per_burst(sent: list[dict[str, Any]], tenant: Tenant,
                                                         django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(5):
            verbs.submit_job(tenant=tenant, name=f"burst-{i}", workload_profile="cifar10", total_work=1)
    assert [call["name"] for call in sent] == [forecast_requests.FORECAST_SOON_TASK]  # five submissions, one
    assert sent[0]["countdown"] == forecast_requests.DEBOUNCE_SECONDS
    cache.delete(forecast_requests.REQUESTED_KEY)  # the window passed
    job = Job.objects.first()
    assert job is not None
    with django_capture_on_commit_callbacks(execute=True):
        verbs.cancel_job(job)
    assert len(sent) == 2


@pytest.mark.usefixtures("cluster")
def test_a_job_submitted_to_a_busy_queue_has_its_estimate_after_the_request(tenant: Tenant,
                                                                           operator: Any) -> None:
    running = rigid(tenant, "running", 4, 600, 100)
    run_on_all_gpus(running, served=100)
    forecasts.refresh(force=True, samples=0)
    newcomer = verbs.submit_job(tenant=tenant, name="newcomer", workload_profile="custom", total_work=1.0,
                                   min_gpus=4, expected_seconds=60)
    assert waiting_forecast(operator, timezone.now()).jobs[0].starts == "no forecast yet"

    tasks.forecast_soon.apply()  # what the reports worker runs two seconds later

    [estimate] = waiting_forecast(operator, timezone.now()).jobs
    assert estimate.job == f"newcomer #{newcomer.pk}" and estimate.starts.startswith("starts in ~")


@pytest.mark.usefixtures("cluster")
def test_a_request_that_finds_a_forecast_being_made_tries_again(tenant: Tenant,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    retried: list[float] = []

    def retry(countdown: float, exc: Exception) -> Exception:
        retried.append(countdown)
        return Retry(exc=exc, when=countdown)

    monkeypatch.setattr(tasks.forecast_soon, "retry", retry)
    holder = lease_holder()
    assert take_lease(forecasts.FORECAST_LEASE, holder, 60)
    try:
        with pytest.raises(Retry):
            tasks.forecast_soon.run()
        assert retried == [forecast_requests.DEBOUNCE_SECONDS]  # not dropped: it waits for the other forecast
    finally:
        release_lease(forecasts.FORECAST_LEASE, holder)
    assert tasks.forecast_soon.run() is not None and Forecast.objects.exists()


def submit_at(tenant: Tenant, times: list[float]) -> None:
    now = timezone.now()
    for i, seconds in enumerate(times):
        verbs.submit_job(tenant=tenant, name=f"j{i}", workload_profile="cifar10", total_work=1,
                            submitted_at=now - timedelta(seconds=seconds))


def test_a_steady_feed_is_steady_and_bursts_or_a_stopped_feed_are_not(tenant: Tenant) -> None:
    rng = random.Random(3)
    feed, at = [], 0.0
    while at < 3600:
        at += rng.expovariate(1 / 25)  # the demo's feed: a job every ~25 s
        feed.append(at)
    submit_at(tenant, feed)
    assert forecasts.arrivals_are_steady(timezone.now())
    Job.objects.all().delete()
    submit_at(tenant, [3000 + i for i in range(60)] + [10, 20])  # sixty at once, then little
    assert not forecasts.arrivals_are_steady(timezone.now())
    Job.objects.all().delete()
    submit_at(tenant, [7200 - 60 * i for i in range(60)] + [60])  # an hour of feed that stopped an hour ago
    assert not forecasts.arrivals_are_steady(timezone.now())


@pytest.mark.usefixtures("cluster")
def test_forecasts_assume_arrivals_when_the_feed_is_steady_and_say_which(tenant: Tenant,
                                                                         settings: Any) -> None:
    settings.FORECAST_ARRIVAL_SAMPLES = 2
    rng = random.Random(5)
    running = rigid(tenant, "running", 4, 900, 100)
    run_on_all_gpus(running, served=100)
    at, feed = 0.0, []
    while at < 1800:
        at += rng.expovariate(1 / 30)
        feed.append(at)
    for i, seconds in enumerate(feed):  # they came and went: the recent mix and rate
        Job.objects.create(tenant=tenant, name=f"past-{i}", workload_profile="custom", total_work=1.0,
                           expected_seconds=60, submitted_at=NOW - timedelta(seconds=seconds + 100),
                           state="succeeded", finished_at=NOW - timedelta(seconds=seconds + 99))
    waiting = rigid(tenant, "waiting", 4, 60, 10)

    row = forecasts.refresh(NOW, force=True)

    assert row is not None and row.samples == 2
    estimate = JobForecast.objects.select_related("forecast", "job").get(forecast=row, job=waiting)
    assert "assumes new jobs keep arriving at the recent rate (2 samples)" in forecasts.describe(estimate)
    quick = forecasts.refresh(NOW, force=True, samples=0)
    assert quick is not None and quick.samples == 0
    estimate = JobForecast.objects.select_related("forecast", "job").get(forecast=quick, job=waiting)
    assert "assumes no new jobs arrive" in forecasts.describe(estimate)
    # the beat after a quick forecast: same queue, but it assumed no arrivals where this one would
    assert forecasts.refresh(NOW) is not None and Forecast.objects.first().samples == 2  # type: ignore[union-attr]


@pytest.mark.usefixtures("cluster")
def test_a_quick_forecast_is_followed_by_one_with_arrivals_when_they_are_assumed(
        tenant: Tenant, settings: Any, sent: list[dict[str, Any]]) -> None:
    settings.FORECAST_ARRIVAL_SAMPLES = 2
    now = timezone.now()
    rng = random.Random(8)
    at = 0.0
    while at < 1800:
        at += rng.expovariate(1 / 30)
        Job.objects.create(tenant=tenant, name=f"past-{at:.0f}", workload_profile="custom", total_work=1.0,
                           expected_seconds=60, submitted_at=now - timedelta(seconds=at), state="succeeded",
                           finished_at=now - timedelta(seconds=at - 1))
    verbs.submit_job(tenant=tenant, name="new", workload_profile="custom", total_work=1.0, min_gpus=4,
                        expected_seconds=60)

    tasks.forecast_soon.run()

    assert Forecast.objects.first().samples == 0  # type: ignore[union-attr]  # the estimate, at once
    assert [call["name"] for call in sent][-1] == forecast_requests.FORECAST_TASK  # and the one with arrivals, next
    tasks.forecast.run()
    assert Forecast.objects.first().samples == 2  # type: ignore[union-attr]
