"""The scheduler's run-time settings in admin, with their audit trail, policy state and job reports."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone

from ..core.policy import policy_names
from ..live.config import scheduler_settings
from ..models import JobReport, PolicyState, SchedulerSettings, SettingsChange
from ..preview import Preview, preview_round
from ..schedule import EDITABLE, record_changes
from .audit import AuditAdmin
from .common import PreviewBeforeSaving


def policy_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in policy_names()]


class SchedulerSettingsForm(forms.ModelForm):
    policy = forms.ChoiceField(choices=policy_choices)

    class Meta:
        model = SchedulerSettings
        fields = list(EDITABLE)


@admin.register(SchedulerSettings)
class SchedulerSettingsAdmin(PreviewBeforeSaving, admin.ModelAdmin):
    """One row: the changelist goes straight to it; a new policy is previewed before it is saved; saving records
    each change and resyncs beat."""

    preview_field = "policy"

    form = SchedulerSettingsForm
    list_display = ("policy", "round_seconds", "executor", "simulated_speedup", "paused", "updated_at")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        row = scheduler_settings()
        return HttpResponseRedirect(reverse("admin:scheduler_schedulersettings_change", args=[row.pk]))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def preview_change(self, obj: SchedulerSettings, before: str, after: str) -> tuple[Preview, str]:
        """A new policy: what the next round would do with it, on the cluster now."""
        return preview_round(after, timezone.now()), f"policy {before} → {after}"

    def save_model(self, request: HttpRequest, obj: SchedulerSettings, form: forms.ModelForm, change: bool) -> None:
        with transaction.atomic():
            stored = SchedulerSettings.objects.select_for_update().get(pk=obj.pk)
            before = {name: getattr(stored, name) for name in EDITABLE}
            obj.save()
            record_changes(before, obj, request.user)


@admin.register(SettingsChange)
class SettingsChangeAdmin(AuditAdmin):
    list_display = ("at", "field", "old_value", "new_value", "actor")
    list_filter = ("field",)


@admin.register(PolicyState)
class PolicyStateAdmin(AuditAdmin):
    list_display = ("policy", "updated_at", "round")


@admin.register(JobReport)
class JobReportAdmin(AuditAdmin):
    list_display = ("at", "job", "progress", "throughput", "batch_size", "gpus", "nodes", "grad_noise_scale")
    list_filter = ("job__tenant",)
    search_fields = ("job__name",)
    list_select_related = ("job",)
