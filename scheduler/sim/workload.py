"""Trace jobs → simulator input: what each ``TraceJob`` becomes as a ``WorkloadJob``.

Two modes, chosen by the caller:

* **rigid** (``elastic=False``, a faithful replay). A job with a duration (Philly, ITP)
  keeps no profile: ``total_work`` is its duration in seconds and it runs exactly that
  long at the GPUs it asked for (``min_gpus = max_gpus`` = its request). A job without
  a duration (Pollux and Sia workloads) runs its application's profile at its requested
  GPUs (``min_gpus = max_gpus = num_replicas``) until the application's completion
  progress (``COMPLETION_PROGRESS``): Tiresias runs it at its size, at goodput speed.
* **elastic** (``elastic=True``). Every job gets a profile and may scale: ``min_gpus = 1``.
  A job of a Pollux or Sia workload keeps its application and may grow to
  ``ELASTIC_MAX_GPUS`` (64; Pollux lets jobs scale, its profiles reach 64 GPUs). A job
  of a trace without a workload profile gets one by ``assign_profile`` and may grow to
  ``min(max(num_gpus, 1) × max_gpus_factor, 64)``; its duration is then not used.

A trace's application counts as its profile when it names one of ``progress`` (e.g.
ElasticFlow's ``bert``); other names (``resnet50``) are treated as no profile. Tenants
come from the trace's cluster or virtual-cluster column, else ``DEFAULT_TENANT``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from .records import WorkloadJob
from .traces import TraceJob, pollux_total_progress

# Completion progress (scale-invariant iterations) per application: the last row of
# pollux/traces/<app>/validation-<initial batch>.csv (``load_completion_progress``).
COMPLETION_PROGRESS: Mapping[str, float] = {
    "bert": 14774.0, "cifar10": 39063.0, "deepspeech2": 28536.0,
    "imagenet": 576526.0, "ncf": 194174.0, "yolov3": 103444.0,
}
# Pollux's workload generator (simulator/workload.py): GPU-time bucket → applications.
# Upper bounds in GPU-seconds, exclusive; within a bucket the choice is even.
PROFILE_BUCKETS: tuple[tuple[float, tuple[str, ...]], ...] = (
    (1 * 3600, ("cifar10", "ncf")),
    (10 * 3600, ("deepspeech2", "bert")),
    (100 * 3600, ("yolov3",)),
    (math.inf, ("imagenet",)),
)
ELASTIC_MAX_GPUS = 64
DEFAULT_MAX_GPUS_FACTOR = 4
DEFAULT_TENANT = "default"


def to_workload(
    trace_jobs: Iterable[TraceJob], *, elastic: bool, seed: int, max_gpus_factor: int = DEFAULT_MAX_GPUS_FACTOR,
    progress: Mapping[str, float] = COMPLETION_PROGRESS,
) -> list[WorkloadJob]:
    """The simulator's jobs, in submission order (ties keep the trace's order); see the module docstring.

    Raises ``ValueError`` naming a job that has neither a duration nor a known profile.
    """
    if max_gpus_factor < 1:
        raise ValueError(f"max_gpus_factor must be ≥ 1, got {max_gpus_factor}")
    convert = _elastic if elastic else _rigid
    jobs = [convert(job, seed, max_gpus_factor, progress) for job in trace_jobs]
    return sorted(jobs, key=lambda job: job.submit_time)


def assign_profile(job: TraceJob, seed: int) -> str:
    """The profile of a job whose trace names none, by its GPU-time (Pollux's buckets).

    GPU-time < 1 GPU-hour → cifar10 or ncf; 1–10 → deepspeech2 or bert; 10–100 →
    yolov3; ≥ 100 → imagenet. Within a bucket, u = the first 8 bytes of
    BLAKE2b("<seed>:<job name>") ÷ 2⁶⁴ picks the ``floor(u × n)``-th of its n
    applications: stable for a job and seed, independent of the other jobs.
    """
    gpu_seconds = job.gpu_seconds
    if gpu_seconds is None:
        raise ValueError(f"job {job.name}: no GPU-time or duration to choose a profile by")
    choices = next(apps for bound, apps in PROFILE_BUCKETS if gpu_seconds < bound)
    return choices[int(_uniform(seed, job.name) * len(choices))]


def _uniform(seed: int, key: str) -> float:
    digest = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _rigid(job: TraceJob, seed: int, factor: int, progress: Mapping[str, float]) -> WorkloadJob:
    if job.duration is not None:
        return _job(job, job.num_gpus, job.num_gpus, job.duration, profile=None)
    profile = _known_profile(job, progress)
    return _job(job, job.num_gpus, job.num_gpus, progress[profile], profile, job.batch_size)


def _elastic(job: TraceJob, seed: int, factor: int, progress: Mapping[str, float]) -> WorkloadJob:
    if job.application in progress:
        return _job(job, 1, ELASTIC_MAX_GPUS, progress[job.application], job.application, job.batch_size)
    profile = assign_profile(job, seed)
    if profile not in progress:
        raise ValueError(f"job {job.name}: no completion progress for its assigned profile {profile!r}")
    upper = min(max(job.num_gpus, 1) * factor, ELASTIC_MAX_GPUS)
    return _job(job, 1, upper, progress[profile], profile)


def _known_profile(job: TraceJob, progress: Mapping[str, float]) -> str:
    if job.application not in progress:
        raise ValueError(
            f"job {job.name}: no duration, and its application {job.application!r} is not a known profile "
            f"({', '.join(sorted(progress))})"
        )
    return job.application


def _job(
    job: TraceJob, low: int, high: int, work: float, profile: str | None, batch_size: int | None = None
) -> WorkloadJob:
    return WorkloadJob(
        id=job.name, submit_time=job.submit_seconds, tenant=job.tenant or DEFAULT_TENANT,
        min_gpus=low, max_gpus=high, total_work=work, profile=profile, batch_size=batch_size,
    )


def load_completion_progress(traces_dir: Path) -> dict[str, float]:
    """``COMPLETION_PROGRESS`` read from ``pollux/traces/<app>/`` under a traces directory."""
    apps = traces_dir / "pollux" / "traces"
    return {app.name: pollux_total_progress(app) for app in sorted(apps.iterdir()) if app.is_dir()}

