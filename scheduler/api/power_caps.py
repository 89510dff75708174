"""``POST /api/gpus/{id}/power-cap/``: an operator caps one GPU's power (staff with ``telemetry.cap_power``).

Parse → ``telemetry.power_caps.request_power_cap`` → the cap as stored: ``pending`` until the node agent has applied
it (``applied``, with the limit NVML enforces) or NVML refused it (``refused``, with NVML's reason); a simulated GPU's
cap is ``applied`` at once. A limit outside the GPU's range is a 400 naming the range.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response

from telemetry.models import PowerCap
from telemetry.power_caps import CAP_POWER_PERMISSION, request_power_cap

from ..models import Gpu
from .permissions import HasPermission
from .throttles import ThrottleAnonymousRefusals


class PowerCapRequestSerializer(serializers.Serializer):
    watts = serializers.IntegerField(min_value=1, help_text="the power limit to apply, in watts")


class PowerCapSerializer(serializers.ModelSerializer):
    class Meta:
        model = PowerCap
        fields = ["id", "gpu", "requested_w", "requested_at", "status", "enforced_w", "message", "applied_at"]


class GpuPowerCapView(ThrottleAnonymousRefusals, generics.GenericAPIView):
    permission_classes = (IsAdminUser, HasPermission)
    required_permission = CAP_POWER_PERMISSION
    queryset = Gpu.objects.select_related("node")
    serializer_class = PowerCapRequestSerializer

    @extend_schema(responses={202: PowerCapSerializer})
    def post(self, request: Request, pk: str) -> Response:
        """Cap the GPU's power at ``watts`` (202: the request is recorded and sent to the node)."""
        gpu = self.get_object()
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        [cap] = request_power_cap([gpu], form.validated_data["watts"], actor=request.user)
        cap.refresh_from_db()  # a simulated GPU's cap is applied by now
        return Response(PowerCapSerializer(cap).data, status=status.HTTP_202_ACCEPTED)
