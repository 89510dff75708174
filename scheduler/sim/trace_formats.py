"""Our own workload format, format detection, and ``load_trace``: any trace file → simulator input.

The native format is a CSV whose rows are ``WorkloadJob``s, one job a row, columns in
any order (``NATIVE_COLUMNS``):

============  ========  ==============================================================
column        needed    meaning
============  ========  ==============================================================
id            yes       job id, unique in the file
submit_time   yes       seconds from the trace's start, ≥ 0
min_gpus      yes       fewest GPUs the job runs on, ≥ 1
max_gpus      no        most GPUs, ≥ min_gpus; empty or absent: = min_gpus (rigid)
tenant        no        empty or absent: ``default``
profile       no        workload profile (bert, cifar10, deepspeech2, imagenet, ncf,
                        yolov3); empty or absent: a rigid trace job without one
total_work    with a    work in the profile's units (scale-invariant iterations);
              profile   must be empty for a job without a profile
duration      without   seconds the job runs at min_gpus; must be empty for a job
              profile   with a profile
batch_size    no        global batch size the user asked for, ≥ 1
gpu_type      no        GPU type the job needs (t4, v100, a100, ...); empty: any
============  ========  ==============================================================

``write_native`` writes every column, so a converted trace can be saved, edited and read back.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from scheduler.bounds import MAX_BATCH_SIZE, MAX_GPUS, MAX_TOTAL_WORK

from .records import WorkloadJob
from .traces import (
    ITP_COLUMNS,
    PHILLY_COLUMNS,
    POLLUX_COLUMNS,
    TraceError,
    TraceJob,
    _number,
    _optional_number,
    _require_columns,
    _text,
    load_itp,
    load_philly,
    load_pollux_workload,
    load_sia_workload,
    reading_trace,
)
from .workload import DEFAULT_MAX_GPUS_FACTOR, DEFAULT_TENANT, to_workload

NATIVE_REQUIRED = ("id", "submit_time", "min_gpus")
NATIVE_COLUMNS = (*NATIVE_REQUIRED, "max_gpus", "tenant", "profile", "total_work", "duration", "batch_size", "gpu_type")

TRACE_LOADERS: Mapping[str, Callable[[Path], list[TraceJob]]] = {
    "pollux": load_pollux_workload, "sia": load_sia_workload, "philly": load_philly, "itp": load_itp,
}
# Columns that identify a format in a header, checked in this order; Sia's workloads
# share Pollux's header and are detected as "pollux" (the same loader).
SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    ("native", frozenset(NATIVE_REQUIRED)),
    ("pollux", frozenset(POLLUX_COLUMNS)),
    ("philly", frozenset(PHILLY_COLUMNS)),
    ("itp", frozenset({*ITP_COLUMNS, "submission_time"})),
    ("itp", frozenset({*ITP_COLUMNS, "submit_time"})),
)
FORMATS = ("auto", "native", *TRACE_LOADERS)


@reading_trace
def detect_format(path: Path) -> str:
    """The format of a trace file, from its header; ``TraceError`` naming the header when unknown."""
    with path.open(newline="") as handle:
        header = [column.strip() for column in next(csv.reader(handle), [])]
    for name, columns in SIGNATURES:
        if columns <= set(header):
            return name
    known = "; ".join(f"{name}: {','.join(sorted(columns))}" for name, columns in SIGNATURES)
    raise TraceError(path, 1, "(header)", f"unknown trace format; known formats need {known}")


@reading_trace
def load_trace_jobs(path: Path, format: str = "auto") -> list[TraceJob]:
    """The jobs of a public trace (any format but native) as the trace gives them."""
    name = detect_format(path) if format == "auto" else format
    if name == "native":
        raise TraceError(path, 1, "(header)", "our own format holds simulator jobs: read it with load_native")
    if name not in TRACE_LOADERS:
        raise ValueError(f"unknown trace format {name!r}; expected one of {['auto', *TRACE_LOADERS]}")
    return TRACE_LOADERS[name](path)


@reading_trace
def load_trace(
    path: Path, format: str = "auto", *, elastic: bool = False, seed: int = 0,
    max_gpus_factor: int = DEFAULT_MAX_GPUS_FACTOR,
) -> list[WorkloadJob]:
    """Simulator input from any trace file: native rows as written, other formats through ``to_workload``.

    ``format`` is one of ``FORMATS``; ``auto`` reads the header. ``elastic``, ``seed`` and
    ``max_gpus_factor`` apply to public traces only (see ``scheduler.sim.workload``).
    """
    if format not in FORMATS:
        raise ValueError(f"unknown trace format {format!r}; expected one of {list(FORMATS)}")
    name = detect_format(path) if format == "auto" else format
    if name == "native":
        return load_native(path)
    jobs = load_trace_jobs(path, name)
    return to_workload(jobs, elastic=elastic, seed=seed, max_gpus_factor=max_gpus_factor)


def load_native(path: Path) -> list[WorkloadJob]:
    """Read our own format (see the module docstring), in file order."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        _require_columns(path, reader.fieldnames, NATIVE_REQUIRED)
        jobs: list[WorkloadJob] = []
        seen: dict[str, int] = {}
        for line, row in enumerate(reader, start=2):
            jobs.append(_native_row(path, line, row))
            if jobs[-1].id in seen:
                raise TraceError(path, line, "id", f"duplicate id, first on line {seen[jobs[-1].id]}")
            seen[jobs[-1].id] = line
    return jobs


def _native_row(path: Path, line: int, row: dict[str, str]) -> WorkloadJob:
    low = _number(path, line, row, "min_gpus", int, minimum=1, maximum=MAX_GPUS)
    high = _optional_number(path, line, row, "max_gpus", int, minimum=low, maximum=MAX_GPUS)
    profile = (row.get("profile") or "").strip() or None
    return WorkloadJob(
        id=_text(path, line, row, "id"),
        submit_time=_number(path, line, row, "submit_time", float, minimum=0),
        tenant=(row.get("tenant") or "").strip() or DEFAULT_TENANT,
        min_gpus=low, max_gpus=low if high is None else high,
        total_work=_native_work(path, line, row, profile),
        profile=profile,
        batch_size=_optional_number(path, line, row, "batch_size", int, minimum=1, maximum=MAX_BATCH_SIZE),
        gpu_type=(row.get("gpu_type") or "").strip() or None,
    )


def _native_work(path: Path, line: int, row: dict[str, str], profile: str | None) -> float:
    """``total_work`` for a job with a profile, ``duration`` for one without; the other must be empty."""
    needed, other = ("total_work", "duration") if profile else ("duration", "total_work")
    if (row.get(other) or "").strip():
        kind = f"with profile {profile!r}" if profile else "without a profile"
        raise TraceError(path, line, other, f"must be empty for a job {kind}: give {needed}")
    work: float = _number(path, line, row, needed, float, minimum=0, maximum=MAX_TOTAL_WORK)
    return work


def write_native(path: Path, jobs: Iterable[WorkloadJob]) -> None:
    """Write jobs in our own format, every column; ``load_native`` reads them back equal."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(NATIVE_COLUMNS)
        for job in jobs:
            work = ("", repr(job.total_work)) if job.profile is None else (repr(job.total_work), "")
            writer.writerow([
                job.id, repr(job.submit_time), job.min_gpus, job.max_gpus, job.tenant, job.profile or "",
                *work, "" if job.batch_size is None else job.batch_size, job.gpu_type or "",
            ])
