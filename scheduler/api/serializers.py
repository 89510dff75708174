"""The API's request and response shapes. Rules that span rows live in the services, not here."""

from __future__ import annotations

import math
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..core.fitted_profiles import FITTED_PROFILES
from ..models import Job, Tenant

JOB_FIELDS = [
    "id", "tenant", "owner", "name", "workload_profile", "total_work", "min_gpus", "max_gpus", "priority",
    "state", "progress", "gpu_type", "batch_size", "command", "client_key", "submitted_at", "started_at",
    "finished_at", "pending_reason", "error", "attained_gpu_seconds", "restarts", "last_throughput",
    "last_grad_noise_scale", "last_reported_at", "fitted_model",
]
CHANGEABLE = ("min_gpus", "max_gpus", "priority")


class FiniteFloatField(serializers.FloatField):
    """A float that is a real number: "nan" and "inf" are refused, not stored."""

    def to_internal_value(self, data: Any) -> float:
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("invalid")
        return value


class JobSerializer(serializers.ModelSerializer):
    tenant: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)
    owner: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Job
        fields = JOB_FIELDS
        read_only_fields = JOB_FIELDS


class SubmittedJobSerializer(JobSerializer):
    """A job as its submitter sees it once: with the token its workers report with."""

    class Meta(JobSerializer.Meta):
        fields = [*JOB_FIELDS, "report_token"]
        read_only_fields = fields


@extend_schema_field(OpenApiTypes.STR)
class MemberTenantField(serializers.SlugRelatedField):
    """A tenant by name, among those the requesting user belongs to (staff: any)."""

    def get_queryset(self) -> QuerySet[Tenant]:
        return Tenant.objects.visible_to(self.context["request"].user)


class JobSubmitSerializer(serializers.Serializer):
    """A new job. ``tenant`` must be one the user belongs to (staff: any)."""

    tenant = MemberTenantField(
        slug_field="name", error_messages={"does_not_exist": "No tenant {slug_name}={value} that you are a member of."}
    )
    name = serializers.CharField(max_length=200)
    workload_profile = serializers.ChoiceField(choices=sorted(FITTED_PROFILES))
    total_work = FiniteFloatField(min_value=0)
    min_gpus = serializers.IntegerField(min_value=1, default=1)
    max_gpus = serializers.IntegerField(min_value=1, required=False, help_text="default: min_gpus (rigid)")
    priority = serializers.IntegerField(default=0)
    gpu_type = serializers.CharField(max_length=20, required=False, allow_blank=True, default="")
    batch_size = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None)
    command = serializers.CharField(required=False, allow_blank=True, default="")
    client_key = serializers.CharField(
        max_length=255, required=False, allow_blank=True, default="",
        help_text="idempotency key; the Idempotency-Key header does the same",
    )


class JobChangeSerializer(serializers.Serializer):
    """What a PATCH may change; any other field is refused by name."""

    min_gpus = serializers.IntegerField(min_value=1, required=False)
    max_gpus = serializers.IntegerField(min_value=1, required=False)
    priority = serializers.IntegerField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        others = sorted(set(self.initial_data) - set(CHANGEABLE))
        if others:
            raise serializers.ValidationError(
                {field: "Not changeable here; PATCH changes only min_gpus, max_gpus and priority." for field in others}
            )
        job: Job = self.context["job"]
        if attrs.get("max_gpus", job.max_gpus) < attrs.get("min_gpus", job.min_gpus):
            raise serializers.ValidationError({"max_gpus": "Max GPUs must be at least min GPUs."})
        return attrs


class CancelSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=500, required=False, default="cancelled through the API")


class ReportSerializer(serializers.Serializer):
    """One report from a running job's workers. ``throughput`` may be left out when ``step_seconds`` is given:
    it is then ``batch_size / step_seconds``."""

    progress = FiniteFloatField(min_value=0, help_text="work done so far, in the profile's units")
    throughput = FiniteFloatField(min_value=0, required=False, help_text="samples per second")
    step_seconds = FiniteFloatField(min_value=0, required=False, help_text="seconds per optimiser step")
    batch_size = serializers.IntegerField(min_value=1, help_text="global batch size")
    gpus = serializers.IntegerField(min_value=1)
    nodes = serializers.IntegerField(min_value=1, default=1)
    grad_noise_scale = FiniteFloatField(min_value=0, required=False, allow_null=True, default=None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["nodes"] > attrs["gpus"]:
            raise serializers.ValidationError({"nodes": "A job cannot run on more nodes than GPUs."})
        step_seconds = attrs.pop("step_seconds", None)
        if "throughput" not in attrs:
            if not step_seconds:
                raise serializers.ValidationError({"throughput": "Give throughput, or step_seconds > 0."})
            attrs["throughput"] = attrs["batch_size"] / step_seconds
        return attrs


class ReportAcceptedSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="the job")
    progress = serializers.FloatField(help_text="the job's progress now (never lower than before)")
    fitted = serializers.BooleanField(help_text="whether the job has a goodput model refitted from its reports")
