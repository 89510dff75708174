"""Who may do what: people see their tenants' jobs (queryset scoping); workers hold a job's token."""

from __future__ import annotations

import hmac

from rest_framework.permissions import BasePermission
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
