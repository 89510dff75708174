"""Forecasts and runtime models in admin: read-only, made by beat (scheduler/forecasting/forecasts.py)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from ..models import Forecast, RuntimeModel


class MadeByBeat(admin.ModelAdmin):
    """Rows only beat's tasks write: staff may read them, and delete with the model's permission."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Forecast)
class ForecastAdmin(MadeByBeat):
    list_display = ("made_at", "policy", "jobs", "usable_gpus", "samples", "wall_ms", "runtime_model")
    ordering = ("-made_at", "-id")


@admin.register(RuntimeModel)
class RuntimeModelAdmin(MadeByBeat):
    list_display = ("id", "trained_at", "samples", "validation_mae_s")
    exclude = ("model",)  # a few hundred kB of trees: not a page to read
    ordering = ("-id",)
