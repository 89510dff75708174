"""``GET /api/``: what this server is (its version) and where its resources are."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from cluster_ops.common.version import VERSION

RESOURCES = {"jobs": "api:job-list", "whatif": "api:whatif-list", "utilisation": "api:utilisation",
             "schema": "api:schema", "docs": "api:docs"}


class ApiRootView(APIView):
    @extend_schema(responses=inline_serializer("ApiRoot", {"name": serializers.CharField(),
                                                           "version": serializers.CharField(),
                                                           "resources": serializers.DictField()}))
    def get(self, request: Request) -> Response:
        resources = {name: reverse(route, request=request) for name, route in RESOURCES.items()}
        return Response({"name": "Cluster Ops", "version": VERSION, "resources": resources})
