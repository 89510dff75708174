"""Operators change the active policy and the round interval in admin; each change is recorded."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from scheduler.models import SchedulerSettings, SettingsChange
from scheduler.rounds import scheduler_settings
from scheduler.schedule import ROUND_SCHEDULE_NAME


def form(**overrides: object) -> dict[str, object]:
    data = {"policy": "tiresias", "round_seconds": 60, "executor": "simulated", "simulated_speedup": 1.0,
            "restart_seconds": 30.0}
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def test_the_changelist_opens_the_single_settings_row(operator_client: Client) -> None:
    response = operator_client.get(reverse("admin:scheduler_schedulersettings_changelist"))
    assert response.status_code == 302 and response["Location"].endswith(f"/{scheduler_settings().pk}/change/")


def test_changing_policy_and_interval_in_admin_is_recorded_and_reaches_beat(operator_client: Client, operator) -> None:
    url = reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk])
    assert operator_client.get(url).status_code == 200
    response = operator_client.post(url, form(policy="pollux", round_seconds=20))
    assert response.status_code == 302, response.content.decode()[:2000]
    row = SchedulerSettings.objects.get()
    assert (row.policy, row.round_seconds) == ("pollux", 20)
    recorded = {(c.field, c.old_value, c.new_value, c.actor_id) for c in SettingsChange.objects.all()}
    assert recorded == {("policy", "tiresias", "pollux", operator.pk), ("round_seconds", "60", "20", operator.pk)}
    assert PeriodicTask.objects.get(name=ROUND_SCHEDULE_NAME).interval.every == 20


def test_an_unknown_policy_is_refused_on_the_form(operator_client: Client) -> None:
    url = reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk])
    response = operator_client.post(url, form(policy="nonsense"))
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not SettingsChange.objects.exists()
