"""A job's own goodput model, refitted from its workers' reports, stored as JSON on the job.

The stored form (``Job.fitted_model``)::

    {"gpu_type": "a100", "perf": [alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma],
     "init_batch_size": 128, "max_batch_size": 4096, "min_local_bsz": 32, "max_local_bsz": 512,
     "noise_scale": 1500.0, "reports": 12}

A round hands it to the core as the profile ``job:<id>`` (``rounds.build_snapshot``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import astuple
from typing import Any

from .core.goodput import GoodputModel, PerfParams


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
