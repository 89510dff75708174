"""What-if runs and sweeps through ``scheduler.whatif``: validation, execution, progress, comparison, admin."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from cluster_ops.celery import app as celery_app
from scheduler import tasks, whatif
from scheduler.models import WhatIfRun, WhatIfStatus, WhatIfSweep
from scheduler.sim.runner import Scenario, ScenarioError

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRACE_NAME = "pollux/workloads-realistic/workload-1.csv"  # relative to TRACES_DIR, as what-ifs name traces
TRACE = FIXTURES / TRACE_NAME
TRACE_JOBS = 4


@pytest.fixture(autouse=True)
def traces_dir(settings) -> Path:  # type: ignore[no-untyped-def]
    settings.TRACES_DIR = FIXTURES
    return FIXTURES


@pytest.fixture
def scenario() -> Scenario:
    return Scenario(trace=TRACE_NAME, policy="fifo", nodes=2)


@pytest.fixture
def eager_celery() -> Iterator[None]:
    """The project's Celery app runs tasks in-process (on the app: a test's settings cannot).

    Eager mode needs the tasks registered: importing ``scheduler.tasks`` above does that here, as
    autodiscovery does in a worker (a web process sends by name and never needs them).
    """
    celery_app.conf.update(task_always_eager=True)
    yield
    celery_app.conf.update(task_always_eager=False)


# --- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(("change", "field"), [
    ({"policy": "no-such-policy"}, "policy"),
    ({"policy_config": {"bogus": 1}}, "policy_config"),
    ({"trace": "no/such/trace.csv"}, "trace"),
    ({"format": "xml"}, "format"),
    ({"preset": "no-such-preset"}, "preset"),
    ({"gpu_type": "z80"}, "gpu_type"),
    ({"power_cap_fraction": 1.5}, "power_cap_fraction"),
    ({"power_cap_fraction": float("nan")}, "power_cap_fraction"),
    ({"power_caps_by_type": {"z80": 0.8}}, "power_caps_by_type"),
    ({"power_caps_by_type": {"a100": 0.05}}, "power_caps_by_type"),
    ({"power_caps_by_type": {"a100": "low"}}, "power_caps_by_type"),
    ({"power_caps_by_type": [0.8]}, "power_caps_by_type"),
    ({"round_seconds": 0.0}, "round_seconds"),
    ({"restart_seconds": -1.0}, "restart_seconds"),
    ({"max_jobs": 0}, "max_jobs"),
    ({"seed": 1.5}, "seed"),
    ({"nodes": 100_000}, "nodes"),
])
def test_a_bad_scenario_is_refused_naming_the_field_and_nothing_is_written(
    scenario: Scenario, change: dict[str, Any], field: str
) -> None:
    with pytest.raises((ValidationError, ScenarioError)) as refused:  # the scenario itself, or its trace
        whatif.create_run(dataclasses.replace(scenario, **change))
    error = refused.value
    assert field in (error.errors if isinstance(error, ScenarioError) else error.message_dict)
    assert not WhatIfRun.objects.exists()


def test_a_stored_scenario_with_an_unknown_field_is_refused_by_name(scenario: Scenario) -> None:
    with pytest.raises(ValidationError) as refused:
        whatif.scenario_from_dict({**scenario.as_dict(), "colour": "blue"})
    assert "colour" in refused.value.message_dict


def test_a_relative_trace_is_read_under_traces_dir(settings, scenario: Scenario) -> None:
    settings.TRACES_DIR = TRACE.parents[1]
    run = whatif.create_run(dataclasses.replace(scenario, trace="workloads-realistic/workload-1.csv"))
    assert whatif.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == WhatIfStatus.SUCCEEDED


# --- runs -------------------------------------------------------------------------------


def test_a_run_replays_the_trace_and_stores_its_summary(scenario: Scenario, operator: User) -> None:
    run = whatif.create_run(scenario, operator)
    assert (run.status, run.created_by, run.scenario) == (WhatIfStatus.QUEUED, operator, scenario.as_dict())

    assert whatif.execute_run(run.pk) is True

    run.refresh_from_db()
    assert run.status == WhatIfStatus.SUCCEEDED and run.error == ""
    assert run.summary["completed"] == run.summary["jobs"] == TRACE_JOBS
    assert run.summary["policy"] == "fifo"
    assert run.progress == 1.0
    assert run.started_at is not None and run.finished_at is not None and run.started_at <= run.finished_at


def test_a_second_execution_of_the_same_run_returns_early(scenario: Scenario) -> None:
    run = whatif.create_run(scenario)
    whatif.execute_run(run.pk)
    run.refresh_from_db()

    assert whatif.execute_run(run.pk) is False

    again = WhatIfRun.objects.get(pk=run.pk)
    assert (again.status, again.finished_at, again.summary) == (run.status, run.finished_at, run.summary)


def test_a_running_run_is_not_claimed_twice(scenario: Scenario) -> None:
    run = whatif.create_run(scenario)
    WhatIfRun.objects.filter(pk=run.pk).update(status=WhatIfStatus.RUNNING)
    assert whatif.execute_run(run.pk) is False
    assert whatif.execute_run(run.pk + 1000) is False  # no such run


def test_a_failing_run_is_stored_as_failed_with_its_error(scenario: Scenario, tmp_path: Path, settings) -> None:
    settings.TRACES_DIR = tmp_path
    trace = tmp_path / "trace.csv"
    shutil.copy(TRACE, trace)
    run = whatif.create_run(dataclasses.replace(scenario, trace="trace.csv"))
    trace.unlink()

    assert whatif.execute_run(run.pk) is True  # raises nothing

    run.refresh_from_db()
    assert run.status == WhatIfStatus.FAILED and run.summary is None and run.finished_at is not None
    assert run.error.startswith("trace: No trace") and "trace.csv" in run.error


def test_progress_is_written_throttled_and_reaches_one(scenario: Scenario) -> None:
    run = WhatIfRun.objects.create(scenario=scenario.as_dict(), status=WhatIfStatus.RUNNING)
    now = [0.0]
    progress = whatif.ProgressWriter(run.pk, clock=lambda: now[0])

    def report(finished: int) -> float:
        progress(finished, 100)
        return WhatIfRun.objects.get(pk=run.pk).progress

    assert report(1) == 0.0  # 1 % after no time: not worth a write
    assert report(5) == 0.05  # 5 %: written
    assert report(6) == 0.05
    now[0] += 1.5
    assert report(7) == 0.07  # a second has passed: written
    assert report(100) == 1.0


def test_progress_of_a_real_run_passes_through_the_throttle(scenario: Scenario, monkeypatch) -> None:
    seen: list[tuple[int, int]] = []
    original = whatif.ProgressWriter.__call__

    def spy(self: whatif.ProgressWriter, finished: int, total: int) -> None:
        seen.append((finished, total))
        original(self, finished, total)

    monkeypatch.setattr(whatif.ProgressWriter, "__call__", spy)
    run = whatif.create_run(scenario)
    whatif.execute_run(run.pk)
    assert seen[-1] == (TRACE_JOBS, TRACE_JOBS)
    assert WhatIfRun.objects.get(pk=run.pk).progress == 1.0


def test_launch_run_enqueues_after_commit_and_records_the_task_id(
    scenario: Scenario, eager_celery: None, django_capture_on_commit_callbacks
) -> None:
    run = whatif.create_run(scenario)
    with django_capture_on_commit_callbacks() as callbacks:
        task_id = whatif.launch_run(run)
    assert len(callbacks) == 1 and WhatIfRun.objects.get(pk=run.pk).status == WhatIfStatus.QUEUED

    callbacks[0]()

    run.refresh_from_db()
    assert run.status == WhatIfStatus.SUCCEEDED and run.celery_task_id == task_id


def test_the_tasks_are_registered_under_their_stable_names() -> None:
    assert celery_app.tasks[whatif.RUN_TASK].name == tasks.run_whatif.name == "scheduler.run_whatif"
    assert celery_app.tasks[whatif.FINISH_SWEEP_TASK].name == tasks.finish_sweep.name == "scheduler.finish_sweep"
    assert celery_app.tasks[whatif.RUN_TASK].acks_late


# --- sweeps -----------------------------------------------------------------------------


def test_a_sweep_has_one_run_per_policy_cap_and_load(scenario: Scenario, operator: User) -> None:
    sweep = whatif.create_sweep(scenario, ["fifo", "tiresias"], [1.0, 0.8], [1.0, 2.0], operator, name="caps")

    runs = list(sweep.runs.all())
    combinations = {(r.scenario["policy"], r.scenario["power_cap_fraction"], r.scenario["load_factor"]) for r in runs}
    assert len(runs) == len(combinations) == 8
    assert all(run.status == WhatIfStatus.QUEUED and run.created_by == operator for run in runs)
    assert (sweep.name, sweep.comparison) == ("caps", None)


@pytest.mark.parametrize(("axes", "field"), [
    ((["fifo", "no-such-policy"], [1.0], [1.0]), "policies"),
    ((["fifo"], [1.0, 2.0], [1.0]), "power_caps"),
    ((["fifo"], [1.0], [0.0]), "load_factors"),
    ((["fifo"], [], [1.0]), "power_caps"),
])
def test_a_bad_sweep_is_refused_naming_the_axis_and_nothing_is_written(
    scenario: Scenario, axes: tuple[list, list, list], field: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        whatif.create_sweep(scenario, *axes)
    assert field in refused.value.message_dict
    assert not WhatIfSweep.objects.exists() and not WhatIfRun.objects.exists()


def test_compare_sweep_waits_for_every_run_then_builds_the_table(scenario: Scenario) -> None:
    sweep = whatif.create_sweep(scenario, ["fifo", "pollux"], [1.0, 0.7], [1.0])
    first, *rest = sweep.runs.order_by("pk")
    whatif.execute_run(first.pk)
    assert whatif.compare_sweep(sweep.pk) is None
    assert WhatIfSweep.objects.get(pk=sweep.pk).comparison is None

    for run in rest:
        whatif.execute_run(run.pk)
    comparison = whatif.compare_sweep(sweep.pk)

    assert comparison is not None and WhatIfSweep.objects.get(pk=sweep.pk).comparison == comparison
    rows = comparison["rows"]
    assert [row["run"] for row in rows] == sorted(run.pk for run in sweep.runs.all())
    assert all(row["status"] == WhatIfStatus.SUCCEEDED and row["completed"] == TRACE_JOBS for row in rows)
    fastest = min(rows, key=lambda row: row["avg_jct_s"])
    assert comparison["best"]["avg_jct_s"]["run"] == fastest["run"]
    assert comparison["best"]["avg_jct_s"]["policy"] == fastest["policy"]
    thriftiest = min(rows, key=lambda row: row["energy_kwh"])
    assert comparison["best"]["energy_kwh"]["power_cap_fraction"] == thriftiest["power_cap_fraction"]
    settings_ = {(s["power_cap_fraction"], s["load_factor"]) for s in comparison["best_by_setting"]}
    assert settings_ == {(1.0, 1.0), (0.7, 1.0)}
    assert all(s["best"]["avg_jct_s"] in {"fifo", "pollux"} for s in comparison["best_by_setting"])


def test_a_failed_run_appears_in_the_comparison_but_never_wins(scenario: Scenario, tmp_path: Path, settings) -> None:
    settings.TRACES_DIR = tmp_path
    trace = tmp_path / "trace.csv"
    shutil.copy(TRACE, trace)
    sweep = whatif.create_sweep(dataclasses.replace(scenario, trace="trace.csv"), ["fifo"], [1.0], [1.0])
    trace.unlink()
    whatif.execute_run(sweep.runs.get().pk)

    comparison = whatif.compare_sweep(sweep.pk)

    assert comparison is not None and comparison["rows"][0]["status"] == WhatIfStatus.FAILED
    assert comparison["rows"][0]["error"] and set(comparison["best"].values()) == {None}


def test_launch_sweep_runs_every_run_then_compares(
    scenario: Scenario, eager_celery: None, django_capture_on_commit_callbacks
) -> None:
    sweep = whatif.create_sweep(scenario, ["fifo", "tiresias"], [1.0, 0.8], [1.0])
    with django_capture_on_commit_callbacks(execute=True):
        whatif.launch_sweep(sweep)

    sweep.refresh_from_db()
    assert all(run.status == WhatIfStatus.SUCCEEDED and run.celery_task_id for run in sweep.runs.all())
    assert sweep.comparison is not None and len(sweep.comparison["rows"]) == 4


def test_launch_sweep_with_nothing_left_to_run_compares_at_once(
    scenario: Scenario, eager_celery: None, django_capture_on_commit_callbacks
) -> None:
    sweep = whatif.create_sweep(scenario, ["fifo"], [1.0], [1.0])
    whatif.execute_run(sweep.runs.get().pk)
    with django_capture_on_commit_callbacks(execute=True):
        whatif.launch_sweep(sweep)
    sweep.refresh_from_db()
    assert sweep.comparison is not None and len(sweep.comparison["rows"]) == 1


# --- admin ------------------------------------------------------------------------------


def test_what_if_pages_render_results_readably(operator_client: Client, scenario: Scenario) -> None:
    sweep = whatif.create_sweep(scenario, ["fifo", "srtf"], [1.0], [1.0], name="policies")
    for run in sweep.runs.all():
        whatif.execute_run(run.pk)
    whatif.compare_sweep(sweep.pk)
    run = sweep.runs.first()
    assert run is not None

    for url in [reverse("admin:scheduler_whatifrun_changelist"), reverse("admin:scheduler_whatifsweep_changelist"),
                reverse("admin:scheduler_whatifrun_changelist") + "?policy=fifo&status=succeeded"]:
        assert operator_client.get(url).status_code == 200
    run_page = operator_client.get(reverse("admin:scheduler_whatifrun_change", args=[run.pk])).content.decode()
    assert "<th>average JCT (s)</th>" in run_page and "<th>completed</th><td>4</td>" in run_page
    sweep_page = operator_client.get(reverse("admin:scheduler_whatifsweep_change", args=[sweep.pk])).content.decode()
    assert "<th>GPU energy (kWh)</th>" in sweep_page and "srtf" in sweep_page


def test_run_again_creates_a_new_run_of_the_same_scenario(operator_client: Client, scenario: Scenario) -> None:
    run = whatif.create_run(scenario)
    whatif.execute_run(run.pk)

    response = operator_client.post(
        reverse("admin:scheduler_whatifrun_changelist"), {"action": "run_again", "_selected_action": [run.pk]}
    )

    assert response.status_code == 302
    again = WhatIfRun.objects.exclude(pk=run.pk).get()
    assert again.scenario == run.scenario and again.status == WhatIfStatus.QUEUED and again.celery_task_id
    assert again.created_by is not None and again.created_by.username == "operator"


def test_a_run_left_running_by_a_killed_worker_is_taken_over(db: None, fixtures_dir, settings) -> None:  # type: ignore[no-untyped-def]
    """The redelivered task takes over a run whose worker stopped beating; a live one is left alone."""
    from datetime import timedelta

    from django.utils import timezone

    trace = "traces/native/workload.csv"
    run = whatif.create_run(Scenario(trace=trace, policy="fifo", nodes=2, gpus_per_node=8, gpu_type="a100"), None)
    settings.WORK_LEASE_SECONDS = 600
    WhatIfRun.objects.filter(pk=run.pk).update(status=WhatIfStatus.RUNNING, heartbeat_at=timezone.now())
    assert whatif.execute_run(run.pk) is False  # its worker is alive
    WhatIfRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=601))
    assert whatif.execute_run(run.pk) is True
    run.refresh_from_db()
    assert run.status == WhatIfStatus.SUCCEEDED and run.summary["completed"] == 3


def test_power_down_settings_are_validated(db: None, fixtures_dir) -> None:  # type: ignore[no-untyped-def]
    trace = "traces/native/workload.csv"
    with pytest.raises(ScenarioError) as error:
        Scenario(trace=trace, policy="fifo", power_down_spares=-1)
    assert "power_down_spares" in error.value.errors
    run = whatif.create_run(Scenario(trace=trace, policy="fifo", nodes=4, gpus_per_node=8, gpu_type="a100",
                                     power_down_spares=1, min_off_seconds=0, power_on_seconds=60), None)
    assert whatif.execute_run(run.pk) is True
    run.refresh_from_db()
    assert run.status == WhatIfStatus.SUCCEEDED and run.summary["completed"] == 3
