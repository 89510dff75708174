"""The scheduler's run-time settings in admin, with their audit trail, policy state and job reports."""

from __future__ import annotations

from copy import copy
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone

from scheduler.backends import backend_choices
from scheduler.live.preview import Preview, preview_round

from ..core.config import policy_label, policy_names, policy_summary
from ..live.config import EDITABLE, scheduler_settings, settings_errors, update_settings
from ..models import JobReport, PolicyState, SchedulerSettings, SettingsChange
from .audit import AuditAdmin
from .common import PreviewBeforeSaving


def policy_choices() -> list[tuple[str, str]]:
    """Each policy by its name and what it trades, so an operator chooses knowingly."""
    return [(name, f"{policy_label(name)} — {policy_summary(name)}") for name in policy_names()]


class SchedulerSettingsForm(forms.ModelForm):
    policy = forms.ChoiceField(choices=policy_choices)
    executor = forms.ChoiceField(choices=backend_choices, help_text="the cluster back-end that runs the decisions")

    class Meta:
        model = SchedulerSettings
        fields = list(EDITABLE)

    def clean(self) -> dict[str, Any]:
        """The service's own checks (``schedule.validate_settings``), as form errors before anything is saved."""
        cleaned = super().clean() or {}
        if "policy_config" in cleaned and cleaned["policy_config"] is None:  # an empty box: no settings
            cleaned["policy_config"] = {}
        candidate = copy(self.instance)  # the row as it would be saved; fields refused above keep their value
        for name in EDITABLE:
            if name in cleaned:
                setattr(candidate, name, cleaned[name])
        for name, problems in settings_errors(candidate).items():
            self.add_error(name if name in self.fields else None, problems)
        return cleaned


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
        """Through the same service as the API and beat: validated, audited, beat resynced."""
        update_settings(request.user, **{name: form.cleaned_data[name] for name in form.changed_data
                                         if name in EDITABLE})


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
