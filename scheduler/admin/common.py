"""Shared pieces of the admin pages: status badges, read-only inlines, the "before you save" preview page, and
changelist filters that read a time without a zone in the current one."""

from __future__ import annotations

from typing import Any, ClassVar

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.db import models
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html

from scheduler.live.preview import Preview

from ..models import (
    GpuHealth,
    JobState,
)

HEALTH_COLOURS: dict[str, str] = {GpuHealth.OK: "#027a48", GpuHealth.DEGRADED: "#b54708", GpuHealth.LOST: "#b42318"}
STATE_COLOURS: dict[str, str] = {
    JobState.PENDING: "#52606d", JobState.RUNNING: "#027a48", JobState.RESCALING: "#1570ef",
    JobState.PREEMPTED: "#b54708", JobState.SUCCEEDED: "#3e4c59", JobState.FAILED: "#b42318",
    JobState.CANCELLED: "#9aa5b1",
}


def badge(text: str, colour: str) -> str:
    return format_html(
        '<span style="background:{};color:#fff;border-radius:.6em;padding:.1em .6em">{}</span>', colour, text
    )


def shorten(text: str, limit: int = 90) -> str:
    """``text`` cut at ``limit`` characters with an ellipsis: a list column stays narrow; the change page has all."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    class Media:
        css = {"all": ("cluster_ops/admin.css",)}

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


CONFIRMED = "_preview_confirmed"  # the preview page's "Save" sends it back with the form's data


def preview_page(request: HttpRequest, model_admin: admin.ModelAdmin, obj: object, preview: Preview,
                 what: str) -> TemplateResponse:
    """The consequences of an unsaved change (``what``: "policy tiresias → pollux"), with the form's data kept in
    hidden fields to save it or go back."""
    fields = [(name, value) for name, values in request.POST.lists() if name not in ("csrfmiddlewaretoken", CONFIRMED)
              for value in values]
    # ``obj`` as stored: the form validated against it has already set the unsaved values on it.
    stored = type(obj).objects.get(pk=obj.pk)  # type: ignore[attr-defined]
    context = {**model_admin.admin_site.each_context(request), "opts": model_admin.model._meta, "original": stored,
               "title": "Before you save: the next round", "preview": preview, "what": what, "fields": fields,
               "confirmed": CONFIRMED}
    return TemplateResponse(request, "admin/scheduler/preview.html", context)


class PreviewBeforeSaving:
    """ModelAdmin mixin: a change to ``preview_field`` is saved only after a page has shown its consequences
    (``preview_change``); that page's *Save it* posts the same data back, confirmed."""

    preview_field: ClassVar[str]

    def preview_change(self, obj: Any, before: Any, after: Any) -> tuple[Preview, str]:
        """(the preview, what is being changed in words)."""
        raise NotImplementedError

    def changeform_view(self, request: HttpRequest, object_id: str | None = None, form_url: str = "",
                        extra_context: dict[str, Any] | None = None) -> Any:
        model_admin: Any = self
        if request.method == "POST" and CONFIRMED not in request.POST and object_id is not None:
            obj = model_admin.get_object(request, object_id)
            if obj is None or not model_admin.has_change_permission(request, obj):
                raise PermissionDenied
            before = getattr(obj, self.preview_field)
            form = model_admin.get_form(request, obj, change=True)(request.POST, request.FILES, instance=obj)
            if form.is_valid() and form.cleaned_data[self.preview_field] != before:
                preview, what = self.preview_change(obj, before, form.cleaned_data[self.preview_field])
                return preview_page(request, model_admin, obj, preview, what)
        return super().changeform_view(request, object_id, form_url, extra_context)  # type: ignore[misc]


class ZonedTimesChangeList(ChangeList):
    """A changelist whose filters on a date-time field read a time without a zone (``?submitted_at__gte=2026-12-01
    T10:00``, the date hierarchy's own lookups typed by hand) in the current time zone, as Django reads it, without
    the RuntimeWarning Django logs for each such query. Anything else is left for Django to accept or refuse."""

    def get_filters_params(self, params: dict[str, Any] | None = None) -> dict[str, Any]:
        lookup = super().get_filters_params(params)
        return {key: [_zoned(value) for value in values] if self._on_a_time(key) else values
                for key, values in lookup.items()}

    def _on_a_time(self, key: str) -> bool:
        try:
            field = self.model._meta.get_field(key.split(LOOKUP_SEP, 1)[0])
        except FieldDoesNotExist:
            return False
        return isinstance(field, models.DateTimeField)


def _zoned(value: Any) -> Any:
    try:
        moment = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:  # a well-formed time that does not exist (2026-02-30): Django refuses it itself
        return value
    if moment is None or timezone.is_aware(moment):
        return value
    try:
        return timezone.make_aware(moment).isoformat()
    except (ValueError, OverflowError):  # at the calendar's edge (year 1 east of UTC): left to Django
        return value


class ZonedTimeFilters:
    """A ``ModelAdmin`` mixin: its changelist reads zone-less times in filters in the current zone
    (``ZonedTimesChangeList``)."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ZonedTimesChangeList
