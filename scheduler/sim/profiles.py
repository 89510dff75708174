"""Workload profiles: measured step times and validation curves → fitted goodput models.

Under a traces directory (``shared/traces``; see each folder's PROVENANCE.md):

* ``pollux/traces/<app>/``: ``placements.csv`` and ``scalability.csv`` (step times on
  T4) and ``validation-<B>.csv`` (one curve per global batch B);
* ``sia/profiles/<app>/``: ``placements-<suffix>.csv`` and ``scalability-<suffix>.csv``
  per GPU type (``GPU_TYPES``), columns in any order, and the same validation curves.

Pollux's T4 files are byte-identical to Sia's un-suffixed and ``-aws`` ones; the Pollux
folder is read when present, Sia's otherwise. Statistical parameters (M0, the largest
batch, φ) belong to the application and are shared by its GPU types. Malformed input
raises ``TraceError`` naming the file, line and column.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scheduler.core.goodput import GoodputModel
from scheduler.core.goodput_fit import (
    FitReport,
    default_noise_scale,
    fit_perf_params,
    initial_batch_size,
    max_batch_size,
)

from .grad_curves import GradCurves
from .records import WorkloadJob
from .step_times import StepTimes
from .traces import TraceError


@dataclass(frozen=True)
class GpuType:
    """A GPU type of the profiles: its canonical key and the Sia file suffixes, preferred first."""

    key: str
    suffixes: tuple[str, ...]
    gpus_per_node: int
    name: str


GPU_TYPES = (
    GpuType("t4", ("aws", ""), 4, "NVIDIA T4 (AWS g4dn.12xlarge)"),
    GpuType("v100", ("azure",), 8, "NVIDIA V100 (Azure ND40rs_v2)"),
    GpuType("a100", ("dgx-ext", "dgx"), 8, "NVIDIA A100-40GB (DGX-A100)"),
    GpuType("rtx6000", ("quad",), 4, "NVIDIA Quadro RTX 6000"),
    GpuType("rtx2080ti", ("rtx",), 8, "NVIDIA GeForce RTX 2080 Ti"),
)
SKIPPED_APPLICATIONS = {
    "gpt_pmp": "pipeline-model-parallel GPT: its step time is the same for every placement and its sync time "
    "exceeds the step time, so the data-parallel step-time model does not describe it",
}
POLLUX_DIR, SIA_DIR = Path("pollux") / "traces", Path("sia") / "profiles"
PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
SCALABILITY_COLUMNS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
VALIDATION_COLUMNS = ("grad_sqr", "grad_var")
CURVE_COLUMNS = ("progress", *VALIDATION_COLUMNS)

# One measured configuration: (nodes, GPUs, per-GPU batch, step seconds, sync seconds).
Measurement = tuple[int, int, float, float, float]


@dataclass(frozen=True)
class FittedProfile:
    """One application on one GPU type: its model, how well it fits, and what it was fitted from."""

    application: str
    gpu_type: str
    model: GoodputModel
    report: FitReport
    sources: tuple[str, ...]  # files, relative to the traces directory


@dataclass(frozen=True)
class Statistics:
    """What the validation curves say, shared by every GPU type of an application."""

    init_batch_size: int
    max_batch_size: int
    noise_scale: float


def load_profiles(traces_dir: Path) -> dict[str, dict[str, GoodputModel]]:
    """Goodput models by application, then canonical GPU type key, fitted from ``traces_dir``."""
    fitted = fit_profiles(traces_dir)
    return {app: {gpu: fit.model for gpu, fit in by_gpu.items()} for app, by_gpu in fitted.items()}


def fit_profiles(traces_dir: Path) -> dict[str, dict[str, FittedProfile]]:
    """Fit every (application, GPU type) pair with step times and validation curves."""
    applications = find_applications(traces_dir)
    if not applications:
        raise TraceError(traces_dir, 0, str(POLLUX_DIR), f"no application folder under {POLLUX_DIR} or {SIA_DIR}")
    return {app: fit_application(traces_dir, app) for app in applications}


def find_applications(traces_dir: Path) -> list[str]:
    """Applications with a folder in either source, minus ``SKIPPED_APPLICATIONS``."""
    folders = [path for root in (POLLUX_DIR, SIA_DIR) if (traces_dir / root).is_dir()
               for path in (traces_dir / root).iterdir() if path.is_dir()]
    return sorted({path.name for path in folders} - set(SKIPPED_APPLICATIONS))


def fit_application(traces_dir: Path, application: str) -> dict[str, FittedProfile]:
    """Every GPU type measured for ``application``, keyed by canonical GPU key."""
    stats = load_statistics(_validation_dir(traces_dir, application))
    return {
        gpu: _fit_one(traces_dir, application, gpu, files, stats)
        for gpu, files in step_time_files(traces_dir, application).items()
    }


def _fit_one(traces_dir: Path, app: str, gpu: str, files: tuple[Path, ...], stats: Statistics) -> FittedProfile:
    rows = load_step_times(*files)
    nodes, gpus, bsz, step, sync = (np.array(column, dtype=float) for column in zip(*rows, strict=True))
    perf, report = fit_perf_params(nodes, gpus, bsz, step, sync)
    model = GoodputModel(
        perf, stats.init_batch_size, stats.max_batch_size,
        min_local_bsz=max(int(round(bsz.min())), 1), max_local_bsz=max(int(round(bsz.max())), 1),
        noise_scale=stats.noise_scale,
    )
    sources = tuple(str(path.relative_to(traces_dir)) for path in files)
    return FittedProfile(app, gpu, model, report, sources)


def step_time_files(traces_dir: Path, application: str) -> dict[str, tuple[Path, ...]]:
    """(placements, [scalability]) files for each GPU type measured for ``application``."""
    found: dict[str, tuple[Path, ...]] = {}
    pollux = traces_dir / POLLUX_DIR / application
    if (pollux / "placements.csv").is_file():
        found["t4"] = _with_scalability(pollux / "placements.csv", pollux / "scalability.csv")
    for gpu in GPU_TYPES:
        files = found.get(gpu.key) or _sia_files(traces_dir / SIA_DIR / application, gpu)
        if files:
            found[gpu.key] = files
    return found


def _sia_files(folder: Path, gpu: GpuType) -> tuple[Path, ...]:
    """The first suffix of ``gpu`` with a placements file there, and its scalability file."""
    for suffix in gpu.suffixes:
        name = f"-{suffix}" if suffix else ""
        if (folder / f"placements{name}.csv").is_file():
            return _with_scalability(folder / f"placements{name}.csv", folder / f"scalability{name}.csv")
    return ()


def _with_scalability(placements: Path, scalability: Path) -> tuple[Path, ...]:
    return (placements, scalability) if scalability.is_file() else (placements,)


def load_step_times(placements: Path, scalability: Path | None = None) -> list[Measurement]:
    """Measured configurations of both files, exact duplicates dropped.

    Sia's ``scalability-dgx-ext`` and ``-quad`` files repeat their placements rows in
    (nodes, replicas) form; counting them twice would only inflate the row count.
    """
    rows = list(_placement_rows(placements))
    if scalability is not None:
        rows += _scalability_rows(scalability)
    if not rows:
        raise TraceError(placements, 2, "step_time", "expected at least one measured configuration")
    return list(dict.fromkeys(rows))


def _placement_rows(path: Path) -> Iterator[Measurement]:
    for line, row in _read(path, PLACEMENT_COLUMNS):
        nodes, gpus = _placement(path, line, row)
        yield nodes, gpus, *_times(path, line, row)


def _scalability_rows(path: Path) -> Iterator[Measurement]:
    for line, row in _read(path, SCALABILITY_COLUMNS):
        nodes, gpus = _integer(path, line, row, "num_nodes"), _integer(path, line, row, "num_replicas")
        if gpus < nodes:
            raise TraceError(path, line, "num_replicas", f"expected at least num_nodes={nodes} replicas, got {gpus}")
        yield nodes, gpus, *_times(path, line, row)


def _times(path: Path, line: int, row: dict[str, str]) -> tuple[float, float, float]:
    bsz = _number(path, line, row, "local_bsz", minimum=1.0)
    step = _number(path, line, row, "step_time", minimum=0.0, strict=True)
    return bsz, step, _number(path, line, row, "sync_time", minimum=0.0)


def load_statistics(application_dir: Path) -> Statistics:
    """M0, the largest batch and the default φ from an application's validation curves.

    φ is the median over the initial-batch curve's epochs (see ``default_noise_scale`` for
    why the median): the statistics as measured at M0. Pooling the larger batches' curves
    too gave φ 2–6× larger (late-training epochs weigh more there), and replaying the
    Pollux authors' workloads then ran Tiresias and Optimus 20–30 % faster than their own
    simulator; with the M0 curve both land within 15 % (docs/validation.md, validate_pollux).
    """
    curves = validation_curves(application_dir)
    if not curves:
        raise TraceError(application_dir, 0, "validation-*.csv", "no validation curve in this folder")
    sqr: list[float] = []
    var: list[float] = []
    initial = curves[0][1]
    for line, row in _read(initial, VALIDATION_COLUMNS):
        sqr.append(_number(initial, line, row, "grad_sqr", minimum=-np.inf))
        var.append(_number(initial, line, row, "grad_var", minimum=-np.inf))
    sizes = [batch for batch, _ in curves]
    try:
        noise = default_noise_scale(sqr, var, initial_batch_size(sizes))
    except ValueError as error:
        raise TraceError(initial, 0, "grad_sqr", str(error)) from None
    return Statistics(initial_batch_size(sizes), max_batch_size(sizes), noise)


def load_grad_curves(traces_dir: Path) -> dict[str, GradCurves]:
    """Every application's measured gradient statistics by batch and epoch (grad_curves.py)."""
    return {app: read_grad_curves(_validation_dir(traces_dir, app)) for app in find_applications(traces_dir)}


def read_grad_curves(application_dir: Path) -> GradCurves:
    """An application's ``validation-<B>.csv`` curves as one table; epochs beyond the shortest curve are dropped.

    The end of epoch e is the smallest ``progress`` of row e over the curves, as the Pollux
    artifact's ``Application.get_progress`` takes it.
    """
    curves = validation_curves(application_dir)
    if not curves:
        raise TraceError(application_dir, 0, "validation-*.csv", "no validation curve in this folder")
    rows = {batch: [[_number(path, line, row, column, minimum=-np.inf) for column in CURVE_COLUMNS]
                    for line, row in _read(path, CURVE_COLUMNS)] for batch, path in curves}
    epochs = min(len(table) for table in rows.values())
    if epochs == 0:
        raise TraceError(curves[0][1], 2, "progress", "expected at least one epoch in every curve")
    table = np.array([rows[batch][:epochs] for batch, _ in curves])  # (batches, epochs, columns)
    return GradCurves(batch_sizes=np.array([batch for batch, _ in curves]), grad_sqr=table[:, :, 1],
                      grad_var=table[:, :, 2], boundaries=table[:, :, 0].min(axis=0))


# Whose simulator a scenario's ``measured_profiles`` reproduces (Scenario.artifact).
ARTIFACTS = ("pollux", "sia")

# Sia's simulator (TRACES_DIR/sia/REFERENCE-SETUP.md §3): the restart delay charged on every allocation
# change, by model (``applications.py:56-69``; 30 s for any other), and SLOWDOWN, the calibration of its
# measured speeds to its physical runs that progress is divided by (``simulator_config.py:31-33``).
SIA_RESTART_SECONDS = {"cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0, "imagenet": 250.0,
                       "ncf": 15.0}
SIA_DEFAULT_RESTART_SECONDS = 30.0
SIA_SLOWDOWN = {"cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2, "ncf": 1.5}

# Per-GPU batch limits the Pollux artifact sets for its T4 applications over what placements.csv spans
# (simulator/applications.py, ``APPLICATIONS``: yolov3 ``max_local_bsz=8``; its scalability.csv measures
# only per-GPU batches 4-8, so larger ones fall outside the step times interpolated beyond 4 nodes).
ARTIFACT_MAX_LOCAL_BSZ = {"yolov3": 8}


def artifact_profiles(
    profiles: Mapping[str, Mapping[str, GoodputModel]],
) -> dict[str, dict[str, GoodputModel]]:
    """``profiles`` with the artifact's T4 per-GPU batch limits (``ARTIFACT_MAX_LOCAL_BSZ``)."""
    result = {app: dict(by_gpu) for app, by_gpu in profiles.items()}
    for app, limit in ARTIFACT_MAX_LOCAL_BSZ.items():
        model = result.get(app, {}).get("t4")
        if model is not None:
            result[app]["t4"] = dataclasses.replace(
                model, max_local_bsz=max(min(model.max_local_bsz, limit), model.min_local_bsz))
    return result


# Jobs the Pollux artifact's simulator pins, by policy and application: (most GPUs, fixed global batch).
# simulator/simulator.py (petuum/adaptdl@de25dcc): under its PolluxPolicy, ``Cluster.__init__`` gives every
# ncf job ``target_batch_size = 32768`` (so ``Job.update_local_bsz`` never searches its batch) and
# ``get_pollux_job_info`` sets ncf's ``max_replicas = 1``.
ARTIFACT_PINNED_JOBS: dict[str, dict[str, tuple[int, int]]] = {"pollux": {"ncf": (1, 32768)}}


def artifact_jobs(jobs: Iterable[WorkloadJob], policy: str) -> list[WorkloadJob]:
    """``jobs`` with the artifact's pins for ``policy`` (``ARTIFACT_PINNED_JOBS``): a pinned job may use
    at most that many GPUs and trains at that global batch whatever the policy proposes."""
    pins = ARTIFACT_PINNED_JOBS.get(policy, {})
    result = []
    for job in jobs:
        pin = pins.get(job.profile) if job.profile else None
        if pin is not None:
            gpus, batch = pin
            job = dataclasses.replace(job, min_gpus=min(job.min_gpus, gpus), max_gpus=gpus, batch_size=batch,
                                      fixed_batch=True)
        result.append(job)
    return result


def load_measured_step_times(traces_dir: Path) -> dict[str, dict[str, StepTimes]]:
    """Every application's measured step times (step_times.py) by canonical GPU type, from the files
    the fitted models are fitted from (``step_time_files``)."""
    return {app: {gpu: read_step_times(*files) for gpu, files in step_time_files(traces_dir, app).items()}
            for app in find_applications(traces_dir)}


def read_step_times(placements: Path, scalability: Path | None = None) -> StepTimes:
    """A ``placements.csv`` (and ``scalability.csv``) as the artifact's ``Application`` reads them: every row kept."""
    rows = []
    for line, row in _read(placements, PLACEMENT_COLUMNS):
        _placement(placements, line, row)  # validates the digits
        rows.append((int(row["placement"].strip()), *_times(placements, line, row)))
    if not rows:
        raise TraceError(placements, 2, "step_time", "expected at least one measured configuration")
    return StepTimes(rows, [] if scalability is None else list(_scalability_rows(scalability)))


def validation_curves(application_dir: Path) -> list[tuple[int, Path]]:
    """(global batch, file) of every ``validation-<B>.csv``, smallest batch first."""
    curves = []
    for path in application_dir.glob("validation-*.csv"):
        suffix = path.stem.removeprefix("validation-")
        if not suffix.isdigit() or int(suffix) < 1:
            raise TraceError(path, 0, "file name", "expected validation-<global batch ≥ 1>.csv")
        curves.append((int(suffix), path))
    return sorted(curves)


def _validation_dir(traces_dir: Path, application: str) -> Path:
    pollux = traces_dir / POLLUX_DIR / application
    return pollux if validation_curves(pollux) else traces_dir / SIA_DIR / application


def _read(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in columns if column not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(path, 1, missing[0], f"missing column(s) {missing}; header is {reader.fieldnames}")
        yield from enumerate(reader, start=2)


def _placement(path: Path, line: int, row: dict[str, str]) -> tuple[int, int]:
    """(nodes, GPUs) of a placement such as ``"22"``: one digit of replicas per node."""
    raw = (row.get("placement") or "").strip()
    if not raw.isdigit() or "0" in raw:
        raise TraceError(path, line, "placement", f"expected digits 1-9 of replicas per node such as '22', got {raw!r}")
    return len(raw), sum(int(digit) for digit in raw)


def _number(path: Path, line: int, row: dict[str, str], column: str, *, minimum: float, strict: bool = False) -> float:
    raw = (row.get(column) or "").strip()
    try:
        value = float(raw)
    except ValueError:
        raise TraceError(path, line, column, f"expected a number, got {raw!r}") from None
    if not np.isfinite(value) or value < minimum or (strict and value == minimum):
        relation = ">" if strict else "≥"
        raise TraceError(path, line, column, f"expected a finite value {relation} {minimum:g}, got {raw!r}")
    return value


def _integer(path: Path, line: int, row: dict[str, str], column: str) -> int:
    value = _number(path, line, row, column, minimum=1.0)
    if value != int(value):
        raise TraceError(path, line, column, f"expected an integer, got {row.get(column)!r}")
    return int(value)


@dataclass(frozen=True)
class FitErrorRow:
    """One line of the fit-error table."""

    application: str
    gpu_type: str
    rows: int
    median_rel_error: float
    p90_rel_error: float
    rmse_log: float
    unidentified: tuple[str, ...]


def fit_error_table(fitted: dict[str, dict[str, FittedProfile]]) -> list[FitErrorRow]:
    """How well each fitted pair predicts its own measured step times, by application then GPU type."""
    return [
        FitErrorRow(app, gpu, fit.report.rows, fit.report.median_rel_error, fit.report.p90_rel_error,
                    fit.report.rmse_log, fit.report.unidentified)
        for app, by_gpu in sorted(fitted.items())
        for gpu, fit in by_gpu.items()
    ]


def format_fit_error_table(rows: list[FitErrorRow]) -> str:
    """The table as aligned text, errors in per cent."""
    lines = [f"{'application':<12} {'gpu_type':<10} {'rows':>5} {'median':>7} {'p90':>7} {'rmse_log':>8}  fixed"]
    for r in rows:
        lines.append(
            f"{r.application:<12} {r.gpu_type:<10} {r.rows:>5} {r.median_rel_error:>7.1%} {r.p90_rel_error:>7.1%}"
            f" {r.rmse_log:>8.3f}  {', '.join(r.unidentified) or '-'}"
        )
    return "\n".join(lines)
