"""The "Cap power…" admin action on GPUs and nodes: an intermediate form asks the watts, then one service call
(``telemetry.power_caps.request_power_cap``). Hooked into ``scheduler/admin/inventory.py``."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from scheduler.models import Gpu, Node

from .power_caps import CAP_POWER_PERMISSION, node_gpus, request_power_cap


class PowerCapForm(forms.Form):
    watts = forms.IntegerField(label="Power limit (W)", min_value=1, help_text="applied to every GPU listed")


@admin.action(description="Cap power…", permissions=["cap_power"])
def cap_power(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> TemplateResponse | None:
    """Ask the limit; on submit request the caps and say what happened (a refusal names the GPUs and ranges)."""
    gpus = gpus_of(queryset)
    form = PowerCapForm(request.POST if "apply" in request.POST else None)
    if form.is_valid():
        try:
            caps = request_power_cap(gpus, form.cleaned_data["watts"], actor=request.user)
        except ValidationError as error:
            form.add_error("watts", error.messages)
        else:
            applied = sum(cap.status != "pending" for cap in caps)
            modeladmin.message_user(request, f"Power cap of {form.cleaned_data['watts']} W requested for {len(caps)} "
                                    f"GPU(s); {applied} applied at once (simulated), the rest by their node agents.",
                                    messages.SUCCESS)
            return None
    context = {
        **modeladmin.admin_site.each_context(request), "title": "Cap power", "form": form, "gpus": gpus,
        "selected": queryset, "opts": queryset.model._meta, "checkbox": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/telemetry/cap_power.html", context)


class CapPowerPermission:
    """Mixed into the GPU and node admins: the "Cap power…" action needs ``telemetry.cap_power``."""

    def has_cap_power_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(CAP_POWER_PERMISSION)


def gpus_of(queryset: QuerySet) -> list[Gpu]:
    """The GPUs selected, or those of the nodes selected (physical, not lost: ``node_gpus``)."""
    return node_gpus(list(queryset)) if queryset.model is Node else list(queryset.select_related("node"))
