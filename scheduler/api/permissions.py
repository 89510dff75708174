"""Who may do what: people see their tenants' jobs (queryset scoping); workers hold a job's token; staff, who act
on every tenant's rows, need the Django model permissions admin asks for (a staff user without them gets 403)."""

from __future__ import annotations

import hmac

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from ..models import Job

JOB_TOKEN_HEADER = "X-Job-Token"


class HasJobToken(BasePermission):
    """The request carries the job's report token in ``X-Job-Token`` (compared in constant time)."""

    message = f"Missing or wrong {JOB_TOKEN_HEADER} for this job."

    def has_object_permission(self, request: Request, view: APIView, obj: object) -> bool:
        given = request.headers.get(JOB_TOKEN_HEADER, "")
        return isinstance(obj, Job) and hmac.compare_digest(given.encode(), obj.report_token.encode())


# What each mutating action of a view set does to its model, as admin would name the permission.
ACTION_PERMISSIONS = {"create": "add", "partial_update": "change", "update": "change", "cancel": "change",
                      "destroy": "delete"}


class StaffHaveModelPermissions(BasePermission):
    """A staff user's change needs the model permission admin would ask for (``add_job``, ``change_whatifrun``…).

    Members of a tenant act on their own tenants' rows by membership (queryset scoping); staff act on everyone's,
    so for them the API is no way around admin's permissions.
    """

    message = "You do not have the permission this change needs (as in admin)."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS or not request.user.is_staff:
            return True
        action = ACTION_PERMISSIONS.get(getattr(view, "action", "") or "", "change")
        meta = view.get_queryset().model._meta  # type: ignore[attr-defined]
        return request.user.has_perm(f"{meta.app_label}.{action}_{meta.model_name}")


class HasPermission(BasePermission):
    """The user holds one named permission (``app_label.codename``), set per view as ``required_permission``."""

    message = "You do not have the permission this action needs."

    def has_permission(self, request: Request, view: APIView) -> bool:
        needed: str = getattr(view, "required_permission", "")
        return bool(needed and request.user and request.user.has_perm(needed))
