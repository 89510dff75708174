"""What-ifs lost with a worker or the broker stayed "running" or queued for ever."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from scheduler import whatif
from scheduler.models import WhatIfRun, WhatIfStatus
from scheduler.sim.runner import Scenario
from scheduler.whatif import runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def scenario(settings, fixtures_dir: Path) -> Scenario:  # type: ignore[no-untyped-def]
    settings.TRACES_DIR = fixtures_dir
    return Scenario(trace="traces/native/workload.csv", policy="fifo", nodes=2, gpus_per_node=8, gpu_type="a100")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    launched: list[int] = []
    monkeypatch.setattr(runs, "launch_run", lambda run, app=None: launched.append(run.pk))
    return launched


def test_a_run_past_its_hard_limit_is_requeued_then_failed_after_its_attempts(scenario: Scenario, settings,
                                                                              sent: list[int]) -> None:
    run = whatif.create_run(scenario)
    now = timezone.now()
    past_limit = now - timedelta(seconds=settings.WHATIF_TIME_LIMIT_SECONDS + settings.HARD_LIMIT_GRACE_SECONDS + 1)
    WhatIfRun.objects.filter(pk=run.pk).update(status=WhatIfStatus.RUNNING, started_at=past_limit, attempts=1,
                                               sent_at=now)
    assert whatif.recover_runs(now)["requeued"] == 1
    assert WhatIfRun.objects.get(pk=run.pk).status == WhatIfStatus.QUEUED
    WhatIfRun.objects.filter(pk=run.pk).update(status=WhatIfStatus.RUNNING, started_at=past_limit,
                                               attempts=settings.MAX_ATTEMPTS)
    assert whatif.recover_runs(now)["failed"] == 1
    run.refresh_from_db()
    assert run.status == WhatIfStatus.FAILED and "lost" in run.error and run.finished_at is not None


def test_a_run_still_queued_long_after_it_was_sent_is_sent_again(scenario: Scenario, settings,
                                                                 sent: list[int]) -> None:
    old, fresh = whatif.create_run(scenario), whatif.create_run(scenario)
    long_ago = timezone.now() - timedelta(seconds=settings.RESEND_AFTER_SECONDS + 1)
    WhatIfRun.objects.filter(pk=old.pk).update(sent_at=long_ago, created_at=long_ago)
    WhatIfRun.objects.filter(pk=fresh.pk).update(sent_at=timezone.now())
    assert whatif.recover_runs(timezone.now())["resent"] == 1 and sent == [old.pk]


def test_a_run_that_hits_its_soft_time_limit_is_failed_with_the_reason(scenario: Scenario,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def too_long(*_: Any, **__: Any) -> None:
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(runs, "run_scenario", too_long)
    run = whatif.create_run(scenario)
    assert whatif.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == WhatIfStatus.FAILED and "time limit" in run.error and run.attempts == 1


def test_a_run_with_no_attempts_left_is_not_claimed(scenario: Scenario, settings) -> None:
    run = whatif.create_run(scenario)
    WhatIfRun.objects.filter(pk=run.pk).update(attempts=settings.MAX_ATTEMPTS)
    assert whatif.execute_run(run.pk) is False


def test_every_background_task_has_a_time_limit_and_rounds_have_a_queue_of_their_own(settings) -> None:
    from cluster_ops.celery import app
    from cluster_ops.reports import tasks as report_tasks
    from scheduler import tasks

    for task in (tasks.run_whatif, report_tasks.make, report_tasks.make_scheduled, tasks.forecast_soon):
        assert task.soft_time_limit and task.time_limit and task.time_limit > task.soft_time_limit
    routes = settings.CELERY_TASK_ROUTES
    on_rounds = {name for name, route in routes.items() if route["queue"] == settings.ROUND_QUEUE}
    assert on_rounds == {"scheduler.run_round", "scheduler.start_between_rounds", "scheduler.feed_demo",
                         "scheduler.submit_late_examples", "cluster_ops.heartbeat"}
    assert routes["scheduler.run_whatif"]["queue"] == settings.BACKGROUND_QUEUE
    # Forecasts and reports never wait behind what-ifs: a queue of their own.
    on_reports = {name for name, route in routes.items() if route["queue"] == settings.REPORT_QUEUE}
    assert on_reports == {"reports.make", "reports.make_scheduled", "reports.deliver", "scheduler.forecast",
                          "scheduler.forecast_soon", "scheduler.train_runtimes"}
    assert app.amqp.router.route({}, "scheduler.run_round")["queue"].name == "rounds"


def test_a_run_whose_worker_died_is_sent_again_within_two_minutes(scenario: Scenario, settings,
                                                                  sent: list[int]) -> None:
    """SIGKILL of the background worker left its runs "running" for ~30 min: the heartbeat moved only when a job
    finished, and recovery waited for the hard time limit. Now a heartbeat that stopped for a lease means dead."""
    assert settings.WORK_LEASE_SECONDS + settings.RECOVER_SECONDS <= 120  # dead → seen → re-sent
    assert settings.WORK_HEARTBEAT_SECONDS * 3 <= settings.WORK_LEASE_SECONDS  # a live run beats well inside it
    dead, alive = whatif.create_run(scenario), whatif.create_run(scenario)
    now = timezone.now()
    WhatIfRun.objects.filter(pk=dead.pk).update(status=WhatIfStatus.RUNNING, started_at=now - timedelta(seconds=90),
                                                heartbeat_at=now - timedelta(seconds=settings.WORK_LEASE_SECONDS + 1),
                                                attempts=1, sent_at=now - timedelta(seconds=90))
    WhatIfRun.objects.filter(pk=alive.pk).update(status=WhatIfStatus.RUNNING, started_at=now - timedelta(hours=0.2),
                                                 heartbeat_at=now - timedelta(seconds=5), attempts=1, sent_at=now)
    done = whatif.recover_runs(now)
    assert (done["requeued"], done["resent"]) == (1, 1) and sent == [dead.pk]
    assert WhatIfRun.objects.get(pk=alive.pk).status == WhatIfStatus.RUNNING


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_moves_while_a_run_progresses_without_finishing_jobs(scenario: Scenario, settings) -> None:
    import time

    settings.WORK_HEARTBEAT_SECONDS = 1
    run = whatif.create_run(scenario)
    attempt = runs._claim(run.pk)
    assert attempt == 1
    claimed = WhatIfRun.objects.get(pk=run.pk).heartbeat_at
    with runs.run_heartbeat(run.pk, attempt):
        time.sleep(2.5)  # a simulation busy between two finished jobs
    assert WhatIfRun.objects.get(pk=run.pk).heartbeat_at > claimed


def test_an_attempt_taken_over_cannot_overwrite_the_later_one(scenario: Scenario) -> None:
    run = whatif.create_run(scenario)
    assert runs._claim(run.pk) == 1
    WhatIfRun.objects.filter(pk=run.pk).update(attempts=2)  # recovered and claimed again meanwhile
    runs._finish(run.pk, 1, status=WhatIfStatus.FAILED, error="the first, late")
    assert WhatIfRun.objects.get(pk=run.pk).status == WhatIfStatus.RUNNING
