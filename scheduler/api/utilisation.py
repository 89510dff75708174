"""``GET /api/utilisation/``: a scope's utilisation over time, the series the Utilisation page draws, for scripts.

``scope``: ``cluster`` or ``node:<hostname>`` (staff; 403 for others) or ``tenant:<name>`` (staff, or a member);
``start`` and ``end``: ISO 8601 with a time zone (default: the last 24 hours); ``step``: ``minute`` (ranges up to
48 hours) or ``hour`` (default: minute up to 48 hours, else hour). A range is at most ``MAX_RANGE`` long.
Every refusal is a 400 naming the field; a tenant the caller may not see is a 404, as one that does not exist.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from telemetry import ledger, queries
from telemetry.rollups import HOURS, MINUTES

from ..models import Node, Tenant

MAX_RANGE = timedelta(days=90)
DEFAULT_RANGE = timedelta(hours=24)
STEPS = {"minute": MINUTES, "hour": HOURS}


# Times a range may name: no telemetry predates this, and a range never reaches past a year from now (year 1 or
# 9999 overflowed the arithmetic on them: a 500).
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST_AHEAD = timedelta(days=366)


class UtilisationQuerySerializer(serializers.Serializer):
    scope = serializers.CharField(max_length=200, default="cluster")
    start = serializers.DateTimeField(required=False)
    end = serializers.DateTimeField(required=False)
    step = serializers.ChoiceField(choices=sorted(STEPS), required=False)

    def validate_start(self, value: datetime) -> datetime:
        return _plausible(value, "start")

    def validate_end(self, value: datetime) -> datetime:
        return _plausible(value, "end")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        end = data.get("end") or timezone.now()
        start = data.get("start") or end - DEFAULT_RANGE
        if start >= end:
            raise ValidationError({"start": ["start must be before end."]})
        if end - start > MAX_RANGE:
            raise ValidationError({"start": [f"A range is at most {MAX_RANGE.days} days."]})
        step = STEPS[data["step"]] if "step" in data else queries.series_step(start, end)
        if step is MINUTES and end - start > queries.SCOPE_MINUTE_LIMIT:
            raise ValidationError({"step": ["minute steps are for ranges up to 48 hours; use hour."]})
        return {**data, "start": start, "end": end, "step": step}


def _plausible(value: datetime, name: str) -> datetime:
    latest = timezone.now() + LATEST_AHEAD
    if not EARLIEST <= value <= latest:
        raise ValidationError(f"{name} must be between {EARLIEST:%Y-%m-%d} and {latest:%Y-%m-%d}.")
    return value


class UtilisationPointSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    gpu_util = serializers.FloatField(allow_null=True, help_text="mean utilisation of the reporting GPUs (%)")
    allocated_gpus = serializers.FloatField(help_text="GPUs held by jobs, averaged over the bucket")
    idle_allocated_gpus = serializers.FloatField(help_text="of those, GPUs held below the idle threshold")
    energy_kwh = serializers.FloatField()


class TotalsSerializer(serializers.Serializer):
    allocated_gpu_hours = serializers.FloatField(help_text="GPU-hours held by jobs, allocations clipped to the range")
    idle_allocated_gpu_hours = serializers.FloatField(help_text="of those, held below the idle threshold")
    energy_kwh = serializers.FloatField(help_text="GPU energy: the jobs' for a tenant, every GPU's for the cluster")
    energy_modelled = serializers.BooleanField(help_text="some energy came from the power model, not a counter")


class UtilisationSerializer(serializers.Serializer):
    scope = serializers.CharField()
    step = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    points = UtilisationPointSerializer(many=True)
    totals = TotalsSerializer(allow_null=True, help_text="the range's totals from the GPU-hour ledger (the same as "
                                                           "reports and exports); null for a node")


class UtilisationView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("scope", OpenApiTypes.STR, description="cluster, node:<hostname> or tenant:<name>"),
            OpenApiParameter("start", OpenApiTypes.DATETIME, description="default: 24 hours before end"),
            OpenApiParameter("end", OpenApiTypes.DATETIME, description="default: now"),
            OpenApiParameter("step", OpenApiTypes.STR, enum=sorted(STEPS),
                             description="minute (ranges up to 48 h) or hour; default: minute where allowed"),
        ],
        responses={200: UtilisationSerializer, 400: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        query = UtilisationQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        args = query.validated_data
        node, tenant = _scope(request, args["scope"])
        points = queries.series(args["start"], args["end"], node=node, tenant=tenant, step=args["step"])
        body = {"scope": args["scope"], "step": args["step"].name, "start": args["start"], "end": args["end"],
                "points": [vars(p) for p in points],
                "totals": None if node is not None else totals(args["start"], min(args["end"], timezone.now()), tenant)}
        return Response(UtilisationSerializer(body).data)


def totals(start: datetime, end: datetime, tenant: Tenant | None) -> dict[str, Any]:
    """The range's totals from the GPU-hour ledger (``telemetry.ledger``), as a report of that span gives them."""
    books = ledger.read(start, max(start, end), tenant=tenant)
    total = books.total()
    energy = total.energy_j if tenant is not None else books.gpu_energy_j
    return {"allocated_gpu_hours": total.gpu_hours, "idle_allocated_gpu_hours": total.idle_gpu_hours,
            "energy_kwh": energy / ledger.JOULES_PER_KWH, "energy_modelled": books.energy_modelled}


def _scope(request: Request, value: str) -> tuple[Node | None, Tenant | None]:
    """The node or tenant ``value`` names, if the caller may see it; (None, None) for the cluster."""
    kind, _, name = value.partition(":")
    if kind in ("cluster", "node") and not request.user.is_staff:
        raise PermissionDenied("Only staff see the cluster and its nodes: ask for scope=tenant:<name>.")
    if kind == "cluster" and not name:
        return None, None
    if kind == "node" and name:
        node = Node.objects.filter(hostname=name).first()
        if node is None:
            raise Http404("No such node.")
        return node, None
    if kind == "tenant" and name:
        tenant = Tenant.objects.visible_to(request.user).filter(name=name).first()
        if tenant is None:
            raise Http404("No such tenant.")
        return None, tenant
    raise ValidationError({"scope": ["Use cluster, node:<hostname> or tenant:<name>."]})

