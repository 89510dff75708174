"""Starts between rounds, live: a job submitted while GPUs sit idle starts at once (``live.round.
start_between_rounds``), no running job changes, and what rounds carry over stays the rounds'."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache

from scheduler import tasks
from scheduler.core.admission import BETWEEN_ROUNDS
from scheduler.jobs import verbs
from scheduler.live import round as rounds
from scheduler.live import start_requests
from scheduler.live.config import update_settings
from scheduler.live.lease import release_lease, take_lease
from scheduler.models import JobState, PolicyState, RescaleEvent, RescaleKind, RoundMemory, SchedulingRound

from .test_rounds import cluster, open_gpus, submit  # noqa: F401  (cluster: a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The tasks sent to the broker (the memory broker of the tests keeps no queue to read back)."""
    cache.delete(start_requests.REQUESTED_KEY)
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(start_requests.current_app, "send_task",
                        lambda name, **options: calls.append({"name": name, **options}))
    return calls


@pytest.mark.usefixtures("cluster")
def test_a_job_submitted_to_idle_gpus_starts_between_rounds(tenant, now) -> None:
    update_settings(policy="sia-profiled")
    running = submit(tenant, "running", 4, at=now - timedelta(minutes=2))
    first = rounds.run_round(now=now)
    assert first is not None and first.starts == 1
    held = open_gpus(running)
    memory = RoundMemory.objects.values_list("rescales", "yielded").get(pk=1)
    arrival = verbs.submit_job(tenant=tenant, name="arrival", workload_profile="cifar10", total_work=1e6,
                                  min_gpus=1, max_gpus=4, submitted_at=now + timedelta(seconds=10))

    row = rounds.start_between_rounds(now=now + timedelta(seconds=11))

    assert row is not None and row.between_rounds and (row.starts, row.rescales, row.preemptions) == (1, 0, 0)
    arrival.refresh_from_db()
    running.refresh_from_db()
    assert arrival.state == JobState.RUNNING and len(open_gpus(arrival)) == 4  # what Sia gives it: all it can use
    assert open_gpus(running) == held and running.state == JobState.RUNNING  # the running job as it was
    event = RescaleEvent.objects.get(job=arrival)
    assert event.kind == RescaleKind.START and event.round_id == row.pk and event.reason.startswith(BETWEEN_ROUNDS)
    # What rounds carry over is the rounds': the policy's memory still comes from the round, the history unchanged.
    assert PolicyState.objects.get(policy="sia-profiled").round_id == first.pk
    assert RoundMemory.objects.values_list("rescales", "yielded").get(pk=1) == memory


@pytest.mark.usefixtures("cluster")
def test_an_arrival_the_policy_would_preempt_for_waits_for_the_round(tenant, now) -> None:
    # Sia would give an elastic arrival (up to 8) the rigid running job's GPUs too: that only a round may do.
    update_settings(policy="sia-profiled")
    running = submit(tenant, "running", 4, at=now - timedelta(minutes=2))
    rounds.run_round(now=now)
    verbs.submit_job(tenant=tenant, name="arrival", workload_profile="cifar10", total_work=1e6, min_gpus=1,
                        max_gpus=8, submitted_at=now + timedelta(seconds=10))
    assert rounds.start_between_rounds(now=now + timedelta(seconds=11)) is None
    running.refresh_from_db()
    assert running.state == JobState.RUNNING and len(open_gpus(running)) == 4


@pytest.mark.usefixtures("cluster")
def test_nothing_is_written_between_rounds_when_nothing_can_start(tenant, now) -> None:
    update_settings(policy="fifo")
    submit(tenant, "all", 8, at=now - timedelta(minutes=1))
    rounds.run_round(now=now)
    submit(tenant, "late", 2, at=now + timedelta(seconds=5))  # every GPU is held
    assert rounds.start_between_rounds(now=now + timedelta(seconds=6)) is None
    assert not SchedulingRound.objects.filter(between_rounds=True).exists()


@pytest.mark.usefixtures("cluster")
def test_an_arrival_during_a_round_is_left_to_the_round(tenant, now) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "arrival", 2, at=now)
    assert take_lease(rounds.ROUND_LEASE, "a round", 60)
    try:
        assert rounds.start_between_rounds(now=now + timedelta(seconds=1)) is None
    finally:
        release_lease(rounds.ROUND_LEASE, "a round")
    job.refresh_from_db()
    assert job.state == JobState.PENDING and not SchedulingRound.objects.exists()


@pytest.mark.usefixtures("cluster")
def test_a_paused_scheduler_starts_nothing_between_rounds(tenant, now) -> None:
    update_settings(policy="fifo", paused=True)
    submit(tenant, "arrival", 2, at=now)
    assert rounds.start_between_rounds(now=now + timedelta(seconds=1)) is None
    assert not SchedulingRound.objects.exists()


def test_a_burst_of_submissions_asks_once_for_a_start_between_rounds(sent, tenant,
                                                                    django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(5):
            verbs.submit_job(tenant=tenant, name=f"burst-{i}", workload_profile="cifar10", total_work=1)
    starts = [call for call in sent if call["name"] == start_requests.START_TASK]
    assert len(starts) == 1 and starts[0]["countdown"] == start_requests.DEBOUNCE_SECONDS


@pytest.mark.usefixtures("cluster")
def test_a_cancel_that_frees_gpus_starts_a_waiting_job_between_rounds(sent, tenant, now,
                                                                      django_capture_on_commit_callbacks) -> None:
    update_settings(policy="fifo")
    running = submit(tenant, "running", 8, at=now - timedelta(minutes=2))
    rounds.run_round(now=now)
    waiting = submit(tenant, "waiting", 4, at=now - timedelta(minutes=1))
    pending = submit(tenant, "pending", 2, at=now)
    cache.delete(start_requests.REQUESTED_KEY)  # the submissions' own request is not the one under test
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        verbs.cancel_job(pending)  # it held no GPUs: nothing to start
    assert [call for call in sent if call["name"] == start_requests.START_TASK] == []

    with django_capture_on_commit_callbacks(execute=True):
        verbs.cancel_job(running)

    assert [call["name"] for call in sent].count(start_requests.START_TASK) == 1
    row = rounds.start_between_rounds(now=now + timedelta(seconds=5))
    waiting.refresh_from_db()
    assert row is not None and row.between_rounds and waiting.state == JobState.RUNNING
    assert len(open_gpus(waiting)) == 4


@pytest.mark.usefixtures("cluster")
def test_the_task_starts_the_job_on_the_rounds_queue(tenant, now, settings) -> None:
    update_settings(policy="fifo")
    job = submit(tenant, "arrival", 2)
    assert settings.CELERY_TASK_ROUTES[start_requests.START_TASK]["queue"] == settings.ROUND_QUEUE
    tasks.start_between_rounds.apply()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING


def test_the_forecast_keeps_to_the_rounds_phase_not_to_starts_between_them(now) -> None:
    from scheduler.forecasting.forecasts import round_phase

    at = now.replace(second=10, microsecond=0)
    SchedulingRound.objects.create(policy="fifo", started_at=at, status="ok")
    SchedulingRound.objects.create(policy="fifo", started_at=at + timedelta(seconds=25), status="ok",
                                   between_rounds=True, starts=1)
    assert round_phase(60.0) == pytest.approx(at.timestamp() % 60.0)
