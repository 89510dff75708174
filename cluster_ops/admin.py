from django.contrib import admin

from .models import Heartbeat
from .reports import admin as reports_admin  # noqa: F401  (registers the reports' admin)


@admin.register(Heartbeat)
class HeartbeatAdmin(admin.ModelAdmin):
    list_display = ("worker", "last_seen_at", "beats")
    readonly_fields = ("worker", "last_seen_at", "beats")

    def has_add_permission(self, request: object) -> bool:
        return False
