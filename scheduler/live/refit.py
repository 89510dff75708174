"""A job's own goodput model, refitted from its workers' reports, stored as JSON on the job.

The stored form (``Job.fitted_model``)::

    {"gpu_type": "a100", "perf": [alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma],
     "init_batch_size": 128, "max_batch_size": 4096, "min_local_bsz": 32, "max_local_bsz": 512,
     "noise_scale": 1500.0, "reports": 12}

A round hands it to the core as the profile ``job:<id>`` (``live.snapshot.build_snapshot``);
``refit_job`` writes it after each report once the reports cover enough configurations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import astuple, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import least_squares

from scheduler.core.fitted_profiles import FITTED_PROFILES
from scheduler.core.goodput import GoodputModel, PerfParams
from scheduler.core.goodput_fit import predict_step_time
from scheduler.core.gpu_types import gpu_type_key
from scheduler.core.speed import estimated_model
from scheduler.models import Allocation, Job, JobReport


def model_as_json(gpu_type: str, model: GoodputModel, reports: int) -> dict[str, Any]:
    return {
        "gpu_type": gpu_type, "perf": list(astuple(model.perf)), "init_batch_size": model.init_batch_size,
        "max_batch_size": model.max_batch_size, "min_local_bsz": model.min_local_bsz,
        "max_local_bsz": model.max_local_bsz, "noise_scale": model.noise_scale, "reports": reports,
    }


def job_models(stored: Mapping[str, Any]) -> dict[str, GoodputModel]:
    """The profile entry (GPU type → model) of a stored fitted model."""
    model = GoodputModel(
        PerfParams(*stored["perf"]), init_batch_size=stored["init_batch_size"],
        max_batch_size=stored["max_batch_size"], min_local_bsz=stored["min_local_bsz"],
        max_local_bsz=stored["max_local_bsz"], noise_scale=stored["noise_scale"],
    )
    return {stored["gpu_type"]: model}


# --- refitting from reports -------------------------------------------------------------

MIN_CONFIGURATIONS = 3  # distinct (GPUs, batch size) pairs before a job's reports are trusted
RECENT_REPORTS = 500  # a long job reports for days: its latest reports are what it is now
_SYNC_PRIOR = 0.05  # weight pulling the sync scale towards the compute scale when data are silent
_LOSS_SCALE = 0.1  # ≈ 10 % in log step time, where soft_l1 turns linear (as goodput_fit)


def refit_job(job: Job) -> dict[str, Any] | None:
    """Refit ``job``'s goodput model from its reports and store it in ``Job.fitted_model``.

    Starts from the job's profile model (``FITTED_PROFILES``, on the job's GPU type, else
    the type of the GPUs it ran on; an estimate where the profile never measured that type)
    and rescales it to the reported throughputs (``rescale_to_measurements``); the noise
    scale is the median reported one, else the profile's. Stores and returns the JSON form
    (``model_as_json``); stores nothing and returns None while the reports cover fewer than
    ``MIN_CONFIGURATIONS`` distinct (GPUs, batch size) pairs (one, on an estimated type), or
    when the job's profile is unknown.
    """
    start = _profile_model(job)
    rows = list(
        JobReport.objects.filter(job=job, throughput__gt=0).order_by("-at", "-id")
        .values_list("nodes", "gpus", "batch_size", "throughput", "grad_noise_scale")[:RECENT_REPORTS]
    )
    if start is None:
        return None
    gpu_type, model = start
    # On a type its profile never measured, the estimate is a guess (speed.estimated_model): one configuration
    # measured there already beats it. As Sia bootstraps a new type: the measured throughput sets the level,
    # the profile's measured type the shape (how speed scales with GPUs and batch).
    needed = 1 if model.estimated_from else MIN_CONFIGURATIONS
    if len({(gpus, batch) for _, gpus, batch, *_ in rows}) < needed:
        return None
    nodes, gpus, batch, throughput = (np.array([row[i] for row in rows], dtype=float) for i in range(4))
    perf = rescale_to_measurements(model.perf, nodes, gpus, batch / gpus, batch / throughput)
    noise = [row[4] for row in rows if row[4] is not None]
    fitted = replace(model, perf=perf, noise_scale=float(np.median(noise)) if noise else model.noise_scale,
                     estimated_from=None)
    stored = model_as_json(gpu_type, fitted, reports=len(rows))
    Job.objects.filter(pk=job.pk).update(fitted_model=stored)
    job.fitted_model = stored
    return stored


def rescale_to_measurements(
    perf: PerfParams, num_nodes: ArrayLike, num_gpus: ArrayLike, local_bsz: ArrayLike, step_time: ArrayLike
) -> PerfParams:
    """``perf`` with its compute terms (α_c, β_c) and its sync terms (α, β) each scaled by one factor.

    A job's reports cover a handful of configurations, too few to pin down seven free
    parameters, but enough for two scales: the profile keeps the shape (how time grows
    with batch and GPUs), the reports set the level. The factors minimise the soft-l1
    error in log step time; without multi-GPU reports the sync scale follows the
    compute scale (a weak prior ties the two).
    """
    measured = np.asarray(step_time, dtype=float)

    def predicted(log_scales: NDArray) -> NDArray:
        return predict_step_time(perf.scaled(*np.exp(log_scales)), num_nodes, num_gpus, local_bsz)

    def residuals(log_scales: NDArray) -> NDArray:
        prior = _SYNC_PRIOR * (log_scales[1] - log_scales[0])
        return np.append(np.log(predicted(log_scales) / measured), prior)

    level = float(np.median(np.log(measured / predicted(np.zeros(2)))))
    result = least_squares(residuals, np.full(2, level), loss="soft_l1", f_scale=_LOSS_SCALE)
    return perf.scaled(*np.exp(result.x))


def _profile_model(job: Job) -> tuple[str, GoodputModel] | None:
    """(GPU type, the profile's model on it) to start a refit from; None for an unknown profile."""
    by_type = FITTED_PROFILES.get(job.workload_profile)
    if not by_type:
        return None
    gpu_type = gpu_type_key(job.gpu_type) if job.gpu_type else _held_gpu_type(job)
    if not gpu_type:
        return sorted(by_type)[0], by_type[sorted(by_type)[0]]
    # A profile not measured on this type still has the right shape: start from its estimate there.
    return gpu_type, by_type.get(gpu_type) or estimated_model(by_type, gpu_type)


def _held_gpu_type(job: Job) -> str:
    """The type of most of the GPUs the job held lately; empty when it never held one."""
    models = Allocation.objects.filter(job=job).order_by("-started_at", "-id").values_list("gpu__model", flat=True)[:64]
    types = [gpu_type_key(model) for model in models]
    return max(sorted(set(types)), key=types.count) if types else ""
