"""Operators change the active policy and the round interval in admin; each change is recorded."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse
from django.utils.html import escape
from django_celery_beat.models import PeriodicTask

from scheduler.core.config import policy_summary
from scheduler.live.config import ROUND_SCHEDULE_NAME, scheduler_settings
from scheduler.models import SchedulerSettings, SettingsChange


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
    assert response.status_code == 200 and "Before you save" in response.content.decode()  # the preview first
    assert SchedulerSettings.objects.get().policy == "tiresias"
    response = operator_client.post(url, form(policy="pollux", round_seconds=20, _preview_confirmed=1))
    assert response.status_code == 302, response.content.decode()[:2000]
    row = SchedulerSettings.objects.get()
    assert (row.policy, row.round_seconds) == ("pollux", 20)
    recorded = {(c.field, c.old_value, c.new_value, c.actor_id) for c in SettingsChange.objects.all()}
    assert recorded == {("policy", "tiresias", "pollux", operator.pk), ("round_seconds", "60", "20", operator.pk)}
    assert PeriodicTask.objects.get(name=ROUND_SCHEDULE_NAME).interval.every == 20


def test_the_policy_list_says_what_each_policy_trades(operator_client: Client) -> None:
    page = operator_client.get(reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk]))
    html = page.content.decode()
    for name, label in (("sia-hesrpt", "sia-hesrpt (experimental)"), ("sia-profiled", "sia-profiled (experimental)"),
                        ("fifo", "fifo"), ("sia", "sia")):  # ours marked, the published ones not
        assert f'<option value="{name}">{escape(label)} — {escape(policy_summary(name))}</option>' in html, name
    assert html.count("(experimental)") == 2


def test_an_unknown_policy_is_refused_on_the_form(operator_client: Client) -> None:
    url = reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk])
    response = operator_client.post(url, form(policy="nonsense"))
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not SettingsChange.objects.exists()


# --- consequences before saving --------------------------------------------------


def test_a_policy_change_shows_what_the_next_round_would_do_before_saving(operator_client: Client) -> None:
    """Pollux → Tiresias: an elastic running job would shrink to its minimum where a waiting job takes its GPUs; one
    whose GPUs no job would take is held where it is (cycle.Guards), so no restart only to leave GPUs idle."""
    from django.utils import timezone

    from tests.dashboards.history import seed_history
    history = seed_history(timezone.now())
    row = scheduler_settings()
    row.policy = "pollux"
    row.save()
    url = reverse("admin:scheduler_schedulersettings_change", args=[row.pk])
    page = operator_client.post(url, form(policy="tiresias")).content.decode()
    assert "Saving <strong>policy pollux → tiresias</strong>" in page
    elastic = {j.min_gpus: j for j in history.running if j.min_gpus < 6}
    assert set(elastic) == {1, 2}
    shrunk, held = elastic[2], elastic[1]  # the waiting job starts on big-vision's GPUs; nothing needs lang-train's
    assert f"{shrunk.name} #{shrunk.pk}</a>" in page and "6 → 2" in page and "went to" in page
    assert f"{held.name} #{held.pk}</a>" not in page and "6 → 1" not in page
    assert "1 start, 1 shrink" in page and page.count("<td>shrink</td>") == 1
    assert "GPUs idle after it" in page and SchedulerSettings.objects.get().policy == "pollux"  # not saved
    assert 'name="_preview_confirmed" value="1"' in page and 'name="policy" value="tiresias"' in page


def test_settings_that_change_no_policy_save_at_once(operator_client: Client) -> None:
    url = reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk])
    assert operator_client.post(url, form(round_seconds=30)).status_code == 302
    assert SchedulerSettings.objects.get().round_seconds == 30


def test_a_quota_change_shows_its_consequences_before_saving(operator_client: Client) -> None:
    from django.utils import timezone

    from scheduler.models import Tenant
    from tests.dashboards.history import seed_history
    history = seed_history(timezone.now())
    url = reverse("admin:scheduler_tenant_change", args=[history.language.pk])
    data = {"name": "language", "gpu_quota": 2, "fair_share_weight": 2.0, "max_priority": 100}
    page = operator_client.post(url, data).content.decode()
    assert "tenant language&#x27;s quota 8 → 2 GPUs" in page and "Before you save" in page
    assert Tenant.objects.get(name="language").gpu_quota == 8
    response = operator_client.post(url, {**data, "_preview_confirmed": 1, "_save": "Save it"})
    assert response.status_code == 302 and Tenant.objects.get(name="language").gpu_quota == 2


def test_the_preview_needs_the_change_permission(client: Client, db: None) -> None:
    from django.contrib.auth.models import User
    viewer = User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    client.force_login(viewer)
    url = reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk])
    assert client.post(url, form(policy="pollux")).status_code == 403
    assert SchedulerSettings.objects.get().policy == "tiresias"


def test_admin_saves_through_the_settings_service_and_its_checks(operator_client: Client, monkeypatch) -> None:
    """Admin, API and beat change settings through ``live.config.update_settings``: the same validation and audit."""
    from scheduler.admin import scheduling
    from scheduler.live import config as schedule

    calls = []
    monkeypatch.setattr(scheduling, "update_settings", lambda *a, **kw: calls.append(kw) or schedule.update_settings(
        *a, **kw))
    url = reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk])
    response = operator_client.post(url, form(round_seconds=45))
    assert response.status_code == 302 and calls == [{"round_seconds": 45}]
    assert SchedulerSettings.objects.get().round_seconds == 45


def test_a_policy_configuration_the_policy_refuses_is_a_form_error(operator_client: Client) -> None:
    url = reverse("admin:scheduler_schedulersettings_change", args=[scheduler_settings().pk])
    for bad in ('{"no_such_setting": 1}', '{"restart_seconds": -5}', '[1, 2]'):
        response = operator_client.post(url, form(policy="tiresias", policy_config=bad))
        assert response.status_code == 200 and "Not a configuration of tiresias" in response.content.decode(), bad
    assert not SettingsChange.objects.exists()
    response = operator_client.post(url, form(policy="tiresias", policy_config='{"thresholds": [3600]}'))
    assert response.status_code == 302, response.content.decode()[-3000:]
