"""The admin site: every action asks for a permission, and an action a user may not run is a 403.

Django's admin offers each user only the actions whose ``permissions`` they hold, but an action posted by hand that
is not offered gets a quiet "No action selected" redirect, and an action that declares no permission is offered to
anyone with view access. Here each action declares what it needs (ours the permission the API asks for the same
change; other apps' actions, which declare none, need ``change`` on their model), and posting one without it is
refused as the API refuses it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

DEFAULT_ACTION_PERMISSIONS = ("change",)


class ClusterOpsAdminSite(admin.AdminSite):
    site_header = "Cluster Ops administration"
    site_title = "Cluster Ops"
    index_title = "Jobs, GPUs and schedules"
    enable_nav_sidebar = False  # its 300 px cut columns off the lists at 1366 px; the index has the links

    def admin_view(self, view: Any, cacheable: bool = False) -> Any:
        guarded = self._refusing_actions_not_permitted(view)
        return super().admin_view(guarded, cacheable)

    @staticmethod
    def _refusing_actions_not_permitted(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        model_admin = getattr(view, "__self__", None)
        if getattr(view, "__name__", "") != "changelist_view" or not isinstance(model_admin, admin.ModelAdmin):
            return view

        def changelist_view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "POST":
                refuse_actions_not_permitted(model_admin, request)
            return view(request, *args, **kwargs)

        return changelist_view

    def register(self, model_or_iterable: Any, admin_class: Any = None, **options: Any) -> None:
        super().register(model_or_iterable, admin_class, **options)
        for model_admin in list(self._registry.values()):
            require_permissions_of_actions(model_admin)


def refuse_actions_not_permitted(model_admin: admin.ModelAdmin, request: HttpRequest) -> None:
    """``PermissionDenied`` (403) when the POST names an action of this admin that the user may not run."""
    posted = set(request.POST.getlist("action"))
    if not posted:
        return
    known = {name for _, name, _ in model_admin._get_base_actions()}  # type: ignore[attr-defined]
    permitted = set(model_admin.get_actions(request))
    if posted & known - permitted:
        raise PermissionDenied


def require_permissions_of_actions(model_admin: admin.ModelAdmin) -> None:
    """Give each action that declares no permission the default (``change`` on the model)."""
    for function, _, _ in model_admin._get_base_actions():  # type: ignore[attr-defined]
        target = getattr(function, "__func__", function)
        if not getattr(target, "allowed_permissions", None):
            target.allowed_permissions = DEFAULT_ACTION_PERMISSIONS


class ClusterOpsAdminConfig(AdminConfig):
    default_site = "cluster_ops.admin_site.ClusterOpsAdminSite"
