from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django_celery_beat.admin import IntervalScheduleAdmin
from django_celery_beat.models import IntervalSchedule
from knox.models import AuthToken

from .api_tokens import TOKEN_PREFIX
from .beat import MAX_INTERVAL_SECONDS, runnable_by_beat
from .models import Heartbeat
from .reports import admin as reports_admin  # noqa: F401  (registers the reports' admin)


@admin.register(Heartbeat)
class HeartbeatAdmin(admin.ModelAdmin):
    list_display = ("worker", "last_seen_at", "beats")
    readonly_fields = ("worker", "last_seen_at", "beats")

    def has_add_permission(self, request: object) -> bool:
        return False


class NewTokenForm(forms.ModelForm):
    class Meta:
        model = AuthToken
        fields = ("user", "expiry")


admin.site.unregister(AuthToken)  # knox's own lists digests and search by them


@admin.register(AuthToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """API tokens by their first characters: the token itself is shown once, on the page after it is made, and
    never stored (only its SHA-512 digest is)."""

    list_display = ("token_key", "user", "created", "expiry")
    list_select_related = ("user",)
    search_fields = ("token_key", "user__username")
    raw_id_fields = ("user",)
    readonly_fields = ("token_key", "user", "created")
    fields = ("token_key", "user", "created", "expiry")

    def get_form(self, request: HttpRequest, obj: AuthToken | None = None, change: bool = False,
                 **kwargs: Any) -> type[forms.ModelForm]:
        if obj is None:
            kwargs["form"], kwargs["fields"] = NewTokenForm, NewTokenForm.Meta.fields
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: AuthToken | None = None) -> tuple[str, ...]:
        return self.readonly_fields if obj is not None else ()

    def get_fields(self, request: HttpRequest, obj: AuthToken | None = None) -> tuple[str, ...]:
        return self.fields if obj is not None else NewTokenForm.Meta.fields

    def save_model(self, request: HttpRequest, obj: AuthToken, form: forms.ModelForm, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        made, token = AuthToken.objects.create(user=obj.user, expiry=None, prefix=TOKEN_PREFIX)
        if obj.expiry is not None:
            made.expiry = obj.expiry
            made.save(update_fields=["expiry"])
        obj.pk = made.pk
        self.message_user(request, f"API token of {obj.user}: {token} — copy it now, it is not shown again.",
                          messages.WARNING)


class BoundedIntervalForm(forms.ModelForm):
    class Meta:
        model = IntervalSchedule
        fields = ("every", "period")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not runnable_by_beat(cleaned.get("every"), cleaned.get("period")):
            self.add_error("every", f"At most {MAX_INTERVAL_SECONDS // 86_400} days; rarer tasks need a crontab.")
        return cleaned


admin.site.unregister(IntervalSchedule)


@admin.register(IntervalSchedule)
class BoundedIntervalScheduleAdmin(IntervalScheduleAdmin):
    """django-celery-beat's interval admin, bounded so that beat can always run what it saves."""

    form = BoundedIntervalForm
