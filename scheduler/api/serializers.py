"""The API's request and response shapes. Rules that span rows live in the services, not here."""

from __future__ import annotations

import math
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scheduler.forecasting.forecasts import frees_text, latest_for, visible_tenant_ids

from .. import bounds
from ..bounds import PRIORITY_RANGE
from ..core.fitted_profiles import FITTED_PROFILES
from ..jobs.verbs import TOTAL_WORK_RULE
from ..models import FINISHED_STATES, QUEUED_STATES, Job, JobForecast, Tenant

JOB_FIELDS = [
    "id", "tenant", "owner", "name", "workload_profile", "total_work", "min_gpus", "max_gpus", "priority",
    "state", "progress", "gpu_type", "batch_size", "command", "script_path", "cluster_job_id", "client_key",
    "submitted_at", "started_at",
    "finished_at", "pending_reason", "error", "attained_gpu_seconds", "restarts", "last_throughput",
    "last_grad_noise_scale", "last_reported_at", "fitted_model", "expected_seconds", "predicted_seconds",
]
ESTIMATE_FIELDS = ["estimated_start", "estimated_finish", "estimate"]
CHANGEABLE = ("min_gpus", "max_gpus", "priority")


class FiniteFloatField(serializers.FloatField):
    """A float that is a real number: "nan", "inf" and booleans are refused, not stored."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("invalid")
        return value


class StrictIntegerField(serializers.IntegerField):
    """An integer that is not a boolean (``true`` is not 1 GPU)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


def _gpus(**options: Any) -> StrictIntegerField:
    return StrictIntegerField(min_value=1, max_value=bounds.MAX_GPUS, **options)


class _JobListSerializer(serializers.ListSerializer):
    """Reads the latest forecast of a whole page of jobs in one query."""

    def to_representation(self, data: Any) -> list[Any]:
        jobs = list(data.all() if isinstance(data, QuerySet) else data)
        self.child.context["forecasts"] = latest_for(job.pk for job in jobs)  # type: ignore[index, union-attr]
        return super().to_representation(jobs)


class JobSerializer(serializers.ModelSerializer):
    tenant: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)
    owner: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
    estimated_start = serializers.SerializerMethodField(help_text="the latest forecast's start (waiting jobs)")
    estimated_finish = serializers.SerializerMethodField(help_text="the latest forecast's finish")
    estimate = serializers.SerializerMethodField(
        help_text="the latest forecast: as_of, p10–p90 ranges (with arrival samples), what frees its GPUs, "
                  "why it moved")

    class Meta:
        model = Job
        fields = [*JOB_FIELDS, *ESTIMATE_FIELDS]
        read_only_fields = fields
        list_serializer_class = _JobListSerializer

    def _tenants(self) -> set[int] | None:
        """The tenants whose jobs the requesting user may see named in an estimate (None: all, staff)."""
        request = self.context.get("request")
        if request is None or request.user.is_staff:
            return None
        known = self.context.get("tenant_ids")
        if known is None:
            known = self.context["tenant_ids"] = visible_tenant_ids(request.user)  # type: ignore[index]
        return known

    def _forecast(self, job: Job) -> JobForecast | None:
        known = self.context.get("forecasts")
        if known is None:
            known = self.context["forecasts"] = latest_for([job.pk])  # type: ignore[index]
        return known.get(job.pk)

    @extend_schema_field(OpenApiTypes.DATETIME)
    def get_estimated_start(self, job: Job) -> str | None:
        row = self._forecast(job)
        return _iso(row.estimated_start) if row and job.state in QUEUED_STATES else None

    @extend_schema_field(OpenApiTypes.DATETIME)
    def get_estimated_finish(self, job: Job) -> str | None:
        row = self._forecast(job)
        return _iso(row.estimated_finish) if row and job.state not in FINISHED_STATES else None

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_estimate(self, job: Job) -> dict[str, Any] | None:
        row = self._forecast(job)
        if row is None or job.state in FINISHED_STATES:
            return None
        return {"as_of": _iso(row.forecast.made_at), "start_p10": _iso(row.start_p10), "start_p90": _iso(row.start_p90),
                "finish_p10": _iso(row.finish_p10), "finish_p90": _iso(row.finish_p90),
                "after": frees_text(row, self._tenants()),
                "moved_because": row.moved_because}


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


class SubmittedJobSerializer(JobSerializer):
    """A job as its submitter sees it once: with the token its workers report with."""

    class Meta(JobSerializer.Meta):
        fields = [*JOB_FIELDS, *ESTIMATE_FIELDS, "report_token"]
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
    name = serializers.CharField(max_length=bounds.MAX_NAME_LENGTH)
    workload_profile = serializers.ChoiceField(choices=sorted(FITTED_PROFILES))
    total_work = FiniteFloatField(min_value=0, max_value=bounds.MAX_TOTAL_WORK,
                                  help_text="work to completion, in the profile's units: more than 0")
    min_gpus = _gpus(default=1, help_text="must fit the inventory: at most the GPUs of one type (of gpu_type)")
    max_gpus = _gpus(required=False, help_text="default: min_gpus (rigid)")
    priority = StrictIntegerField(min_value=PRIORITY_RANGE[0], max_value=PRIORITY_RANGE[1], default=0)
    gpu_type = serializers.CharField(max_length=20, required=False, allow_blank=True, default="",
                                     help_text="a type the inventory has (a100, v100, …); empty: any")
    batch_size = StrictIntegerField(min_value=1, max_value=bounds.MAX_BATCH_SIZE, required=False, allow_null=True,
                                    default=None)
    command = serializers.CharField(max_length=bounds.MAX_COMMAND_LENGTH, required=False, allow_blank=True,
                                    default="")
    script_path = serializers.CharField(max_length=500, required=False, allow_blank=True, default="",
                                        help_text="on Slurm: a batch script under SLURM_SCRIPT_DIR, run instead of "
                                                  "the command")
    client_key = serializers.CharField(
        max_length=255, required=False, allow_blank=True, default="",
        help_text="idempotency key; the Idempotency-Key header does the same",
    )
    expected_seconds = FiniteFloatField(
        min_value=1, max_value=bounds.MAX_EXPECTED_SECONDS, required=False, allow_null=True, default=None,
        help_text="how long it runs once started, as you expect (a time limit): forecasts use it for a job "
                  "without a profile's model",
    )

    def validate_total_work(self, value: float) -> float:
        if value <= 0:  # a job of no work would "succeed" in its first second (the services' rule and message)
            raise serializers.ValidationError(TOTAL_WORK_RULE)
        return value


class JobChangeSerializer(serializers.Serializer):
    """What a PATCH may change; any other field is refused by name."""

    min_gpus = _gpus(required=False)
    max_gpus = _gpus(required=False)
    priority = StrictIntegerField(min_value=PRIORITY_RANGE[0], max_value=PRIORITY_RANGE[1], required=False)

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

    progress = FiniteFloatField(min_value=0, max_value=bounds.MAX_TOTAL_WORK,
                                help_text="work done so far, in the profile's units; at most the job's total work")
    throughput = FiniteFloatField(min_value=0, max_value=bounds.MAX_THROUGHPUT, required=False,
                                  help_text="samples per second")
    step_seconds = FiniteFloatField(min_value=bounds.MIN_STEP_SECONDS, max_value=bounds.MAX_STEP_SECONDS,
                                    required=False, help_text="seconds per optimiser step")
    batch_size = StrictIntegerField(min_value=1, max_value=bounds.MAX_BATCH_SIZE, help_text="global batch size")
    gpus = _gpus(help_text="at most the GPUs the job holds now")
    nodes = _gpus(default=1)
    grad_noise_scale = FiniteFloatField(min_value=0, max_value=bounds.MAX_GRAD_NOISE_SCALE, required=False,
                                        allow_null=True, default=None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["nodes"] > attrs["gpus"]:
            raise serializers.ValidationError({"nodes": "A job cannot run on more nodes than GPUs."})
        step_seconds = attrs.pop("step_seconds", None)
        if "throughput" not in attrs:
            if not step_seconds:
                raise serializers.ValidationError({"throughput": "Give throughput, or step_seconds > 0."})
            attrs["throughput"] = attrs["batch_size"] / step_seconds
            if attrs["throughput"] > bounds.MAX_THROUGHPUT:
                raise serializers.ValidationError(
                    {"step_seconds": f"batch_size / step_seconds is over {bounds.MAX_THROUGHPUT:g} samples/s."})
        return attrs


class ReportAcceptedSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="the job")
    progress = serializers.FloatField(help_text="the job's progress now (never lower than before)")
    fitted = serializers.BooleanField(help_text="whether the job has a goodput model refitted from its reports")
