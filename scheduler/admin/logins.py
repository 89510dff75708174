"""Which cluster user each console user's jobs run as."""

from django.contrib import admin

from scheduler.models import ClusterLogin


@admin.register(ClusterLogin)
class ClusterLoginAdmin(admin.ModelAdmin):
    """A console user without a row here runs their jobs as their own username."""

    list_display = ("user", "login")
    list_select_related = ("user",)
    search_fields = ("user__username", "login")
    raw_id_fields = ("user",)
