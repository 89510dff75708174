"""API endpoints: parse → one service call → render.

Jobs are scoped by ``Job.objects.visible_to``: another tenant's job is a 404, never a 403,
so job ids do not reveal what other tenants run. Reports are authenticated by the job's
own token, not by a user.
"""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer, ValidationError

from scheduler.live.refit import refit_job

from ..jobs import intake, verbs
from ..models import Job, JobState
from .errors import field_errors
from .permissions import JOB_TOKEN_HEADER, HasJobToken, StaffHaveModelPermissions
from .serializers import (
    CancelSerializer,
    JobChangeSerializer,
    JobSerializer,
    JobSubmitSerializer,
    ReportAcceptedSerializer,
    ReportSerializer,
    SubmittedJobSerializer,
)
from .throttles import JobReportThrottle, ThrottleAnonymousRefusals

logger = logging.getLogger(__name__)

IDEMPOTENCY_HEADER = "Idempotency-Key"


class JobFilter(filters.FilterSet):
    state = filters.ChoiceFilter(choices=JobState.choices)
    tenant = filters.CharFilter(field_name="tenant__name", help_text="tenant name")

    class Meta:
        model = Job
        fields = ["state", "tenant"]


class JobPagination(PageNumberPagination):
    """Pages of 50 jobs; ``?page_size=`` from 1 to 500. A page size that is not one is a 400 naming it, not
    silently the default."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int | None:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not (raw.isdigit() and len(raw) <= 6 and 1 <= int(raw) <= self.max_page_size):
            raise ValidationError({self.page_size_query_param: [
                f"Ensure this value is a whole number from 1 to {self.max_page_size}."]})
        return super().get_page_size(request)


class JobViewSet(ThrottleAnonymousRefusals, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                 viewsets.GenericViewSet):
    """Jobs of the user's tenants (staff: all), newest first."""

    serializer_class = JobSerializer
    permission_classes = (IsAuthenticated, StaffHaveModelPermissions)
    pagination_class = JobPagination
    filter_backends = [filters.DjangoFilterBackend]
    filterset_class = JobFilter
    lookup_value_regex = r"\d+"

    def get_queryset(self) -> QuerySet[Job]:
        jobs = Job.objects.visible_to(self.request.user).select_related("tenant", "owner")
        return jobs.order_by("-submitted_at", "-id")

    @extend_schema(
        request=JobSubmitSerializer,
        responses={201: SubmittedJobSerializer, 200: SubmittedJobSerializer, 409: OpenApiTypes.OBJECT},
        parameters=[OpenApiParameter(IDEMPOTENCY_HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER,
                                     description="a retry with the same key returns the stored job (200)")],
    )
    def create(self, request: Request) -> Response:
        """Submit a job (201); a repeated idempotency key returns the job stored under it (200)."""
        form = JobSubmitSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        fields = {**form.validated_data, "client_key": _client_key(request, form.validated_data["client_key"])}
        try:
            job, created = intake.submit_job_once(**fields, owner=request.user)
        except intake.IdempotencyConflict as conflict:
            return Response({"client_key": [str(conflict)]}, status=status.HTTP_409_CONFLICT)
        answer = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(SubmittedJobSerializer(job).data, status=answer)

    @extend_schema(request=JobChangeSerializer, responses=JobSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Change GPU bounds and/or priority (the next round resizes a running job)."""
        job = self.get_object()
        change = JobChangeSerializer(data=request.data, context={"job": job})
        change.is_valid(raise_exception=True)
        wanted = change.validated_data
        bounds = wanted.get("min_gpus", job.min_gpus), wanted.get("max_gpus", job.max_gpus)
        with transaction.atomic():  # a priority refused leaves the bounds as they were
            job = verbs.set_gpu_bounds(job, *bounds, actor=request.user)
            if "priority" in wanted:
                job = verbs.set_priority(job, wanted["priority"], actor=request.user)
        return Response(JobSerializer(job).data)

    @extend_schema(request=CancelSerializer, responses={200: JobSerializer, 409: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the job (releasing its GPUs); 409 when it has already finished another way."""
        job = self.get_object()
        form = CancelSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            job = verbs.cancel_job(job, actor=request.user, reason=form.validated_data["reason"])
        except DjangoValidationError as refused:  # the only refusal: a finished job cannot become cancelled
            return Response(field_errors(refused), status=status.HTTP_409_CONFLICT)
        return Response(JobSerializer(job).data)


def _client_key(request: Request, field: str) -> str:
    """The idempotency key from the header or the body; both given must agree."""
    header = request.headers.get(IDEMPOTENCY_HEADER, "").strip()
    if header and field and header != field:
        raise ValidationError({"client_key": f"Differs from the {IDEMPOTENCY_HEADER} header."})
    if len(header) > 255:
        raise ValidationError({"client_key": f"The {IDEMPOTENCY_HEADER} header is longer than 255 characters."})
    return header or field


class JobReportView(generics.GenericAPIView):
    """A running job's workers report progress, throughput and gradient noise; the job's model is refitted."""

    authentication_classes = ()
    permission_classes = (HasJobToken,)
    throttle_classes = (JobReportThrottle,)
    queryset = Job.objects.all()
    serializer_class = ReportSerializer

    @extend_schema(
        auth=[], responses={201: ReportAcceptedSerializer, 400: OpenApiTypes.OBJECT, 403: OpenApiTypes.OBJECT,
                            409: OpenApiTypes.OBJECT},
        parameters=[OpenApiParameter(JOB_TOKEN_HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER, required=True,
                                     description="the report token given when the job was submitted")],
    )
    def post(self, request: Request, pk: str) -> Response:
        job = self.get_object()  # 404 for no such job, then 403 without its token
        report = self.get_serializer(data=request.data)
        report.is_valid(raise_exception=True)
        try:
            job = intake.record_report(job, **report.validated_data)
        except intake.JobNotRunning as refused:
            return Response({"state": [str(refused)]}, status=status.HTTP_409_CONFLICT)
        except intake.ReportContradicted as refused:
            return Response({refused.field: [str(refused)]}, status=status.HTTP_400_BAD_REQUEST)
        _refit(job)
        answer: BaseSerializer = ReportAcceptedSerializer(
            {"id": job.pk, "progress": job.progress, "fitted": job.fitted_model is not None}
        )
        return Response(answer.data, status=status.HTTP_201_CREATED)


def _refit(job: Job) -> None:
    """Refit after the report is committed: a failed fit costs the model an update, never the report."""
    try:
        refit_job(job)
    except ValueError:
        logger.warning("refit of job %s failed", job.pk, exc_info=True)
