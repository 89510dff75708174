"""``/api/whatif/``: what-if runs for scripts — list, get, create (staff), cancel (staff).

The same domain as the Energy page and admin (``scheduler.whatif``): a POST body is a scenario's fields as JSON,
checked by ``Scenario`` itself, its trace named relative to ``TRACES_DIR`` (``traces.resolve``); a bad field is a
400 naming it. Reading is scoped like the page: everyone sees every run, tenant users only their tenants' figures
and no error texts (``views.shown_summary``, ``views.shown_error``).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from .. import whatif
from ..models import WhatIfRun
from ..sim.runner import Scenario
from ..sim.scenario import LIMITS
from ..whatif import views
from .errors import field_errors
from .permissions import StaffHaveModelPermissions
from .throttles import ThrottleAnonymousRefusals

# What a script may set. Not the validation seam's flags (measured_profiles, charge_first_start): those reproduce
# published artifacts (``manage.py validate_pollux``) and are no operator's what-if.
SETTABLE = ("trace", "policy", "format", "elastic", "preset", "nodes", "gpus_per_node", "gpu_type", "round_seconds",
            "restart_seconds", "power_down_spares", "power_on_seconds", "min_off_seconds", "power_cap_fraction",
            "power_caps_by_type", "load_factor", "seed", "max_jobs", "policy_config", "node_groups", "tenant_quotas",
            "pue", "grid_g_co2_per_kwh", "price_per_kwh")


def _described(name: str) -> str:
    low, high = LIMITS.get(name, (None, None))
    return f"{low:g} to {high:g}" if low is not None else ""


class WhatIfCreateSerializer(serializers.Serializer):
    """A scenario (``scheduler.sim.scenario.Scenario``): the schema's shape; the scenario checks the values."""

    trace = serializers.CharField(help_text="relative to TRACES_DIR, e.g. philly/philly_jobs_sia_pollux.csv")
    policy = serializers.CharField(required=False, help_text="a registered policy, default pollux")
    format = serializers.CharField(required=False, help_text="auto, native, pollux, sia, philly or itp")
    elastic = serializers.BooleanField(required=False, allow_null=True)
    preset = serializers.CharField(required=False, allow_null=True, help_text="a cluster preset, e.g. philly")
    nodes = serializers.IntegerField(required=False, help_text=_described("nodes"))
    gpus_per_node = serializers.IntegerField(required=False, help_text=_described("gpus_per_node"))
    gpu_type = serializers.CharField(required=False)
    round_seconds = serializers.FloatField(required=False, help_text=_described("round_seconds"))
    restart_seconds = serializers.FloatField(required=False, help_text=_described("restart_seconds"))
    power_down_spares = serializers.IntegerField(required=False, allow_null=True)
    power_on_seconds = serializers.FloatField(required=False)
    min_off_seconds = serializers.FloatField(required=False)
    power_cap_fraction = serializers.FloatField(required=False, help_text=_described("power_cap_fraction"))
    power_caps_by_type = serializers.DictField(child=serializers.FloatField(), required=False)
    load_factor = serializers.FloatField(required=False, help_text=_described("load_factor"))
    seed = serializers.IntegerField(required=False)
    max_jobs = serializers.IntegerField(required=False, allow_null=True)
    policy_config = serializers.DictField(required=False)
    node_groups = serializers.ListField(child=serializers.ListField(), required=False,
                                        help_text="[[gpu_type, gpus_per_node, nodes], …]")
    tenant_quotas = serializers.DictField(child=serializers.IntegerField(), required=False)
    pue = serializers.FloatField(required=False)
    grid_g_co2_per_kwh = serializers.FloatField(required=False)
    price_per_kwh = serializers.FloatField(required=False)


class WhatIfRunSerializer(serializers.ModelSerializer):
    summary = serializers.SerializerMethodField()
    error = serializers.SerializerMethodField()

    class Meta:
        model = WhatIfRun
        fields = ["id", "sweep", "status", "progress", "scenario", "summary", "error", "created_at", "started_at",
                  "finished_at"]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_summary(self, run: WhatIfRun) -> dict[str, Any] | None:
        shown = views.shown_summary(run.summary, self.context["visible"])
        return None if shown is None else shown.as_dict()

    def get_error(self, run: WhatIfRun) -> str:
        return views.shown_error(run, self.context["request"].user)


class WhatIfViewSet(ThrottleAnonymousRefusals, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    viewsets.GenericViewSet):
    """What-if runs, newest first."""

    serializer_class = WhatIfRunSerializer
    permission_classes = (IsAuthenticated, StaffHaveModelPermissions)
    pagination_class = PageNumberPagination
    lookup_value_regex = r"\d+"

    def get_queryset(self) -> QuerySet[WhatIfRun]:
        return WhatIfRun.objects.order_by("-created_at", "-id")

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "visible": views.visible_tenant_names(self.request.user)}

    @extend_schema(request=WhatIfCreateSerializer, responses={201: WhatIfRunSerializer, 400: OpenApiTypes.OBJECT})
    def create(self, request: Request) -> Response:
        """Queue a what-if of the scenario given (staff, with the permission to add what-if runs)."""
        if not request.user.is_staff:
            return Response({"detail": "Only operators start what-ifs."}, status=status.HTTP_403_FORBIDDEN)
        try:
            run = whatif.create_run(_scenario(request.data), request.user)
        except DjangoValidationError as refused:
            return Response(field_errors(refused), status=status.HTTP_400_BAD_REQUEST)
        whatif.launch_run(run)
        return Response(self.get_serializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: WhatIfRunSerializer, 403: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel a queued or running what-if (staff); a finished one is returned as it is."""
        if not request.user.is_staff:
            return Response({"detail": "Only operators cancel what-ifs."}, status=status.HTTP_403_FORBIDDEN)
        run = whatif.cancel_run(self.get_object(), request.user)
        return Response(self.get_serializer(run).data)


def _scenario(data: Any) -> Scenario:
    """The scenario of a request body; ``ValidationError`` naming each bad or unsettable field."""
    if not isinstance(data, dict):
        raise DjangoValidationError({"scenario": "Expected a JSON object of scenario fields."})
    unsettable = {str(name): "Not a scenario field that can be set here." for name in data if name not in SETTABLE}
    if unsettable:
        raise DjangoValidationError(unsettable)
    return whatif.scenario_from_dict(data)
