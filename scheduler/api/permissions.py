"""Who may do what: people see their tenants' jobs (queryset scoping); workers hold a job's token; staff, who act
on every tenant's rows, need the Django model permissions admin asks for (a staff user without them gets 403)."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from ..models import Job
from .throttles import JOB_TOKEN_HEADER, FailedCredentialsThrottle

if TYPE_CHECKING:  # the API settings import these modules while rest_framework.views loads
    from rest_framework.views import APIView



class HasJobToken(BasePermission):
    """The request carries the job's report token in ``X-Job-Token`` (compared in constant time).

    Checked as the view's permission, before its throttles (a wrong token must never spend the job's report
    budget), and again on the object. A wrong token counts against the address (``FailedCredentialsThrottle``),
    which gets 429 once it has failed too often; a job that does not exist is left to the view's 404.
    """

    message = f"Missing or wrong {JOB_TOKEN_HEADER} for this job."

    def has_permission(self, request: Request, view: APIView) -> bool:
        failures = FailedCredentialsThrottle()
        failures.refuse_if_spent(request)
        stored = Job.objects.filter(pk=_job_pk(view)).values_list("report_token", flat=True).first()
        if stored is None or self._matches(request, stored):
            return True
        failures.count_failure(request)
        return False

    def has_object_permission(self, request: Request, view: APIView, obj: object) -> bool:
        return isinstance(obj, Job) and self._matches(request, obj.report_token)

    @staticmethod
    def _matches(request: Request, token: str) -> bool:
        return hmac.compare_digest(request.headers.get(JOB_TOKEN_HEADER, "").encode(), token.encode())


def _job_pk(view: APIView) -> int:
    raw = str(view.kwargs.get("pk", ""))
    return int(raw) if raw.isdigit() and len(raw) < 19 else 0


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
