"""The scheduler's run-time settings in admin, with their audit trail, policy state and job reports."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone

from ..core.policy import policy_names
from ..models import JobReport, PolicyState, SchedulerSettings, SettingsChange
from ..preview import preview_round
from ..rounds import scheduler_settings
from ..schedule import EDITABLE, record_changes
from .audit import AuditAdmin
from .common import CONFIRMED, preview_page


def policy_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in policy_names()]


class SchedulerSettingsForm(forms.ModelForm):
    policy = forms.ChoiceField(choices=policy_choices)

    class Meta:
        model = SchedulerSettings
        fields = list(EDITABLE)


@admin.register(SchedulerSettings)
class SchedulerSettingsAdmin(admin.ModelAdmin):
    """One row: the changelist goes straight to it; saving records each change and resyncs beat."""

    form = SchedulerSettingsForm
    list_display = ("policy", "round_seconds", "executor", "simulated_speedup", "paused", "updated_at")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        row = scheduler_settings()
        return HttpResponseRedirect(reverse("admin:scheduler_schedulersettings_change", args=[row.pk]))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def changeform_view(self, request: HttpRequest, object_id: str | None = None, form_url: str = "",
                        extra_context: dict[str, Any] | None = None) -> Any:
        """A new policy is saved only after its preview: what the next round would do with it, on the cluster now."""
        if request.method == "POST" and CONFIRMED not in request.POST and object_id is not None:
            obj = self.get_object(request, object_id)
            if obj is None or not self.has_change_permission(request, obj):
                raise PermissionDenied
            before = obj.policy
            form = self.get_form(request, obj, change=True)(request.POST, request.FILES, instance=obj)
            if form.is_valid() and form.cleaned_data["policy"] != before:
                preview = preview_round(form.cleaned_data["policy"], timezone.now())
                return preview_page(request, self, obj, preview, f"policy {before} → {preview.policy}")
        return super().changeform_view(request, object_id, form_url, extra_context)

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
