"""The live cluster's runtime predictor (``scheduler.sim.runtimes``): what it learns from, and its stored models.

It learns from the most recent succeeded jobs without a profile: their owner, name, tenant, command, GPU type and
GPUs, and their service seconds (GPU-time held ÷ GPUs). The model is trained by beat (``scheduler.train_runtimes``,
hourly, background queue) and stored as a new ``RuntimeModel`` version in LightGBM's text format, never a
pickle; the last ``KEEP_MODELS`` are kept. Forecasts (``scheduler.forecasting.forecasts``) read the latest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.models import Job, JobState, RuntimeModel
from scheduler.sim.runtimes import JobFeatures, RuntimePredictor

KEEP_MODELS = 5
HISTORY_JOBS = 20_000  # finished jobs a predictor learns from: the most recent
FEATURE_FIELDS = ("pk", "owner__username", "cluster_user", "tenant__name", "name", "command", "gpu_type", "min_gpus",
                  "submitted_at", "expected_seconds", "time_limit_seconds", "attained_gpu_seconds")


def job_features(row: Mapping[str, Any]) -> JobFeatures:
    """A job row (``FEATURE_FIELDS``) as the runtime predictor reads it: its owner the console user, or the cluster
    user of a job the cluster manager scheduled."""
    return JobFeatures(
        owner=row["owner__username"] or row["cluster_user"] or "", tenant=row["tenant__name"], name=row["name"],
        command=row["command"], gpu_type=row["gpu_type"], gpus=row["min_gpus"],
        submit_hour=timezone.localtime(row["submitted_at"]).hour, expected_seconds=row["expected_seconds"],
        limit_seconds=row["time_limit_seconds"],
    )


def _finished_without_profile() -> list[tuple[JobFeatures, float]]:
    """The most recent succeeded jobs that ran without a profile, oldest first, with their service seconds."""
    rows = list(Job.objects.filter(state=JobState.SUCCEEDED, fitted_model__isnull=True)
                .exclude(workload_profile__in=list(FITTED_PROFILES))
                .order_by("-finished_at", "-id").values(*FEATURE_FIELDS)[:HISTORY_JOBS])
    return [(job_features(row), row["attained_gpu_seconds"] / row["min_gpus"]) for row in reversed(rows)]


def _learnt(samples: Iterable[tuple[JobFeatures, float]]) -> RuntimePredictor:
    predictor = RuntimePredictor()
    for features, seconds in samples:
        predictor.observe(features, seconds)
    return predictor


def runtime_predictor() -> tuple[RuntimePredictor, int | None]:
    """The predictor with the history of finished jobs and the latest stored model; and that model's version."""
    predictor = _learnt(_finished_without_profile())
    latest = RuntimeModel.objects.first()
    if latest is not None and predictor.load_text(latest.model):
        return predictor, latest.pk
    return predictor, None


def train_runtime_model(now: datetime | None = None) -> RuntimeModel | None:
    """Fit a new model on the finished jobs without a profile and store it as the next version; None when too
    few jobs have finished. Its validation error is measured on the newest fifth, with a model of the rest."""
    samples = _finished_without_profile()
    cut = len(samples) * 4 // 5
    validation = _validation_error(samples[:cut], samples[cut:])
    predictor = _learnt(samples)
    if not predictor.fit():
        return None
    with transaction.atomic():
        model = RuntimeModel.objects.create(trained_at=now or timezone.now(), samples=len(samples),
                                            validation_mae_s=validation, model=predictor.to_text())
        stale = list(RuntimeModel.objects.values_list("pk", flat=True)[KEEP_MODELS:])
        RuntimeModel.objects.filter(pk__in=stale).delete()
    return model


def _validation_error(train: Sequence[tuple[JobFeatures, float]], test: Sequence[tuple[JobFeatures, float]]
                      ) -> float | None:
    """The median absolute error, in seconds, on ``test`` of a model fitted on ``train``; None when either is
    too small."""
    predictor = _learnt(train)
    if not test or not predictor.fit():
        return None
    predicted = predictor.predict_many([features for features, _ in test])
    errors = sorted(abs(p.seconds - seconds) for p, (_, seconds) in zip(predicted, test, strict=True))
    return errors[len(errors) // 2]
