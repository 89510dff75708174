"""Every door, the scheduler's settings: a round interval that killed beat and a policy configuration that failed
every round were accepted. Now each is refused where it is typed (admin, the service, the environment) with one
message, and a value that still reaches the row is refused by rounds, forecasts, beat and /metrics, which run on
its last valid value and name it."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from cluster_ops.beat import GuardedDatabaseScheduler
from cluster_ops.celery import app as celery_app
from scheduler import inventory
from scheduler.jobs import verbs
from scheduler.live import round as rounds
from scheduler.live.config import (
    ROUND_SCHEDULE_NAME,
    live_settings,
    scheduler_settings,
    scheduling_config,
    sync_round_schedule,
    update_settings,
)
from scheduler.models import Job, JobState, Node, RoundStatus, SchedulerSettings, Tenant
from telemetry.exporter import render

pytestmark = pytest.mark.django_db
HUGE = 99_999_999_999_999
# What a stored row can hold on every database (a 4-byte integer column on PostgreSQL), yet far past the rules.
STORED_HUGE = 2_000_000_000


def admin_form(**overrides: object) -> dict[str, object]:
    data = {"policy": "pollux", "round_seconds": 60, "executor": "simulated", "simulated_speedup": 1.0,
            "restart_seconds": 30.0, "policy_config": "{}", "_preview_confirmed": 1}
    return {**data, **overrides}


@pytest.mark.parametrize(("field", "value", "said"), [
    ("round_seconds", HUGE, "less than or equal to 86400"),
    ("simulated_speedup", 1e9, "less than or equal to 10000"),
    ("policy_config", '{"p": "abc"}', "p: Input should be a valid number"),
    ("policy_config", '{"p": true}', "p: Input should be a valid number"),
    ("policy_config", '{"q": 1}', "unknown setting q"),
    ("policy_config", "0", "Expected an object"),  # was falsy, so checked as {} by the form: the service's 500
])
def test_admin_refuses_a_bad_setting_with_the_services_message(operator_client: Client, field: str, value: object,
                                                               said: str) -> None:
    update_settings(policy="pollux")
    url = reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk])
    response = operator_client.post(url, admin_form(**{field: value}))
    assert response.status_code == 200 and said in response.content.decode()
    with pytest.raises(ValidationError) as refused:  # the service says the same
        update_settings(**{field: value if field != "policy_config" else __import__("json").loads(str(value))})
    assert said in " ".join(refused.value.message_dict[field])
    row = SchedulerSettings.objects.get()
    assert (row.round_seconds, row.policy_config) == (60, {})


def test_the_environment_cannot_seed_a_round_interval_beat_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from cluster_ops import settings as project

    monkeypatch.setenv("ROUND_SECONDS", str(HUGE))
    errors_before = len(project.CONFIGURATION_ERRORS)
    assert project.envint("ROUND_SECONDS", 60, minimum=1, maximum=86_400) == 60
    assert "above its maximum 86400" in project.CONFIGURATION_ERRORS[-1]
    del project.CONFIGURATION_ERRORS[errors_before:]


@pytest.fixture
def busy_cluster(tenant: Tenant, now: datetime) -> Job:
    inventory.register_node("n1", [inventory.GpuSpec(i, f"GPU-n1-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400)
                                  for i in range(4)])
    return verbs.submit_job(tenant=tenant, name="j", workload_profile="cifar10", total_work=1e6, max_gpus=2,
                               submitted_at=now)


def test_a_stored_value_that_breaks_its_rule_is_refused_and_rounds_keep_running(busy_cluster: Job, now) -> None:
    update_settings(policy="pollux", policy_config={"p": -2}, round_seconds=30)
    SchedulerSettings.objects.update(policy_config={"p": "abc"}, round_seconds=STORED_HUGE)  # past every door
    live, refused = live_settings()
    assert set(refused) == {"policy_config", "round_seconds"}
    assert (live.policy_config, live.round_seconds) == ({"p": -2}, 30)  # the last valid values
    row = rounds.run_round(now=now)
    assert row is not None and row.status == RoundStatus.OK, row.error if row else None
    assert Job.objects.get(pk=busy_cluster.pk).state == JobState.RUNNING
    assert scheduling_config().policy_config == {"p": -2}
    assert PeriodicTask.objects.get(name=ROUND_SCHEDULE_NAME).interval.every == 30
    sync_round_schedule()
    assert PeriodicTask.objects.get(name=ROUND_SCHEDULE_NAME).interval.every == 30
    metrics = render(now).decode()
    assert 'cluster_ops_scheduler_setting_refused{setting="policy_config"} 1.0' in metrics
    assert 'cluster_ops_scheduler_setting_refused{setting="round_seconds"} 1.0' in metrics
    assert "cluster_ops_round_interval_seconds 30.0" in metrics


def test_without_a_last_valid_value_the_default_is_run(db: None) -> None:
    scheduler_settings()
    SchedulerSettings.objects.update(policy="pollux", policy_config={"p": "abc"}, last_valid={})
    live, refused = live_settings()
    assert list(refused) == ["policy_config"] and live.policy_config == {}


def test_beat_refuses_an_entry_it_cannot_run_and_runs_the_others(db: None) -> None:
    sync_round_schedule()
    broken = IntervalSchedule.objects.create(every=STORED_HUGE, period=IntervalSchedule.DAYS)  # past timedelta
    PeriodicTask.objects.create(name="typed by hand", task="cluster_ops.tasks.heartbeat", interval=broken)
    schedule = GuardedDatabaseScheduler(app=celery_app, lazy=True).all_as_schedule()
    assert ROUND_SCHEDULE_NAME in schedule and "typed by hand" not in schedule


def test_admin_bounds_beats_intervals(operator_client: Client) -> None:
    response = operator_client.post(reverse("admin:django_celery_beat_intervalschedule_add"),
                                    {"every": HUGE, "period": "seconds"})
    assert response.status_code == 200 and "At most 366 days" in response.content.decode()
    assert not IntervalSchedule.objects.filter(every=HUGE).exists()


def test_each_saved_change_becomes_the_last_valid_value(node: Node) -> None:
    update_settings(round_seconds=120, policy="sia", policy_config={"p": -1})
    saved = scheduler_settings().last_valid
    assert (saved["round_seconds"], saved["policy"], saved["policy_config"]) == (120, "sia", {"p": -1})


def test_a_value_that_also_breaks_a_table_constraint_is_named_by_its_field(db: None) -> None:
    row = scheduler_settings()
    row.round_seconds, row.simulated_speedup = 0, -1.0  # in memory: the database itself would refuse them
    live, refused = live_settings(row)
    assert set(refused) == {"round_seconds", "simulated_speedup"}
    assert (live.round_seconds, live.simulated_speedup) == (60, 1.0)
