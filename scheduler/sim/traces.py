"""Trace loaders: public cluster traces → plain job records (``TraceJob``).

One loader per format (see each folder's PROVENANCE.md under ``shared/traces``):

* Pollux and Sia workloads, ``name,time,application,num_replicas,batch_size``;
* Philly's job list ``philly_jobs_sia_pollux.csv``, ``timestamp,duration,num_gpus,gpu_time,cluster``;
* Microsoft ITP (ElasticFlow): ``raw/clusterNN.csv``, ``job_id,submission_time,duration,num_gpu``,
  and ElasticFlow's variants, which add ``model_name``, ``batch_size`` and a deadline.

Malformed input raises ``TraceError`` naming the file, the line, the column and what
was expected; nothing is returned from a file that has one bad row. Our own format and
the auto-detecting ``load_trace`` are in ``trace_formats.py``.
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class TraceError(ValueError):
    """A trace file that does not have the expected format.

    The message names the file, the line, the column and what was expected, and never quotes the file's contents:
    what-if errors are stored and shown, and a trace may be any file a user pointed at.
    """

    def __init__(self, path: Path, line: int, column: str, problem: str) -> None:
        super().__init__(f"{path}, line {line}, column {column!r}: {problem}")
        self.path, self.line, self.column = path, line, column


MAX_TRACE_BYTES = 512 * 2**20  # the Philly list is 5 MB; larger is not a trace the simulator should hold in memory
MAX_TRACE_SECONDS = 10 * 365 * 86_400.0  # submission times and durations: ten years of trace at most


def reading_trace(load: Callable[..., T]) -> Callable[..., T]:
    """Wrap a loader taking the trace's path first: a file too large, not UTF-8 text or not CSV is a ``TraceError``."""

    @functools.wraps(load)
    def guarded(path: Path, *args: Any, **kwargs: Any) -> T:
        try:
            if path.stat().st_size > MAX_TRACE_BYTES:
                raise TraceError(path, 0, "(file)", f"larger than {MAX_TRACE_BYTES // 2**20} MiB")
            return load(path, *args, **kwargs)
        except UnicodeDecodeError:
            raise TraceError(path, 0, "(file)", "not a UTF-8 text file") from None
        except csv.Error:
            raise TraceError(path, 0, "(file)", "not a CSV file") from None

    return guarded


@dataclass(frozen=True)
class TraceJob:
    """One job as a trace submitted it; fields a trace does not give are None.

    ``application`` is the workload the trace names ("" when it names none, as Philly
    and ITP's raw lists); ``duration`` the seconds it ran at ``num_gpus``; ``tenant``
    its cluster or virtual cluster; ``gpu_time`` the GPU-seconds the trace reports.
    """

    name: str
    submit_seconds: float  # from the trace's start
    application: str
    num_gpus: int
    batch_size: int | None = None
    duration: float | None = None
    tenant: str | None = None
    gpu_time: float | None = None
    submitted_at: datetime | None = None  # the trace's own clock time, where it has one (Philly's local time)

    @property
    def gpu_seconds(self) -> float | None:
        """GPU-time used: the trace's own figure, else duration × GPUs, else None."""
        if self.gpu_time is not None:
            return self.gpu_time
        return None if self.duration is None else self.duration * self.num_gpus


POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


def load_pollux_workload(path: Path) -> list[TraceJob]:
    """Read a Pollux ``workloads-*/workload-N.csv`` (columns in ``POLLUX_COLUMNS``)."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        _require_columns(path, reader.fieldnames, POLLUX_COLUMNS)
        return [_pollux_row(path, line, row) for line, row in enumerate(reader, start=2)]


def _pollux_row(path: Path, line: int, row: dict[str, str]) -> TraceJob:
    return TraceJob(
        name=_text(path, line, row, "name"),
        submit_seconds=_number(path, line, row, "time", float, minimum=0),
        application=_text(path, line, row, "application"),
        num_gpus=_number(path, line, row, "num_replicas", int, minimum=1),
        batch_size=_number(path, line, row, "batch_size", int, minimum=1),
    )


def load_sia_workload(path: Path) -> list[TraceJob]:
    """Read a Sia ``workloads/<trace>/workload-N.csv``: the Pollux format, same columns."""
    return load_pollux_workload(path)


PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus")  # and, optional, gpu_time and cluster
PHILLY_TIME_FORMAT = "YYYY-MM-DD HH:MM:SS"
NAIVE_EPOCH = datetime(1970, 1, 1)


def load_philly(path: Path) -> list[TraceJob]:
    """Read Philly's job list; jobs are named ``philly-<row>`` (0-based, file order).

    Timestamps are local time strings without a zone: they are read as naive times and
    turned into seconds from the earliest submission (as Pollux's generator did), so a
    daylight-saving change shifts later jobs by its hour. ``cluster`` (the VC) is the tenant.
    """
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        _require_columns(path, reader.fieldnames, PHILLY_COLUMNS)
        rows = [(line, _philly_time(path, line, row), row) for line, row in enumerate(reader, start=2)]
    start = min((submitted for _, submitted, _ in rows), default=NAIVE_EPOCH)
    return [_philly_row(path, line, row, submitted, start) for line, submitted, row in rows]


def _philly_time(path: Path, line: int, row: dict[str, str]) -> datetime:
    raw = (row.get("timestamp") or "").strip()
    try:
        moment: datetime | None = datetime.fromisoformat(raw)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is not None:
        raise TraceError(path, line, "timestamp", f"expected a local time {PHILLY_TIME_FORMAT}")
    return moment


def _philly_row(path: Path, line: int, row: dict[str, str], submitted: datetime, start: datetime) -> TraceJob:
    return TraceJob(
        name=f"philly-{line - 2}",
        submit_seconds=(submitted - start).total_seconds(),  # wall-clock arithmetic: no zone, no DST
        application="",
        num_gpus=_number(path, line, row, "num_gpus", int, minimum=1),
        duration=_number(path, line, row, "duration", float, minimum=0),
        tenant=(row.get("cluster") or "").strip() or None,
        gpu_time=_optional_number(path, line, row, "gpu_time", float, maximum=1e15),
        submitted_at=submitted,
    )


# submission_time: raw/ and elasticflow/ cluster files; submit_time: ElasticFlow's own traces
# (elasticVpollux_e.csv, philly_103959) and Tiresias' job files, which this loader reads too.
ITP_SUBMIT_COLUMNS = ("submission_time", "submit_time")
ITP_COLUMNS = ("job_id", "duration", "num_gpu")


def load_itp(path: Path) -> list[TraceJob]:
    """Read an ITP trace: ``raw/clusterNN.csv`` or an ElasticFlow variant of it.

    Times are seconds from the trace's start as the file gives them (not rebased). The
    ElasticFlow files' ``model_name`` becomes the application and ``batch_size`` is kept;
    their synthesised deadlines and iteration counts are not read. There is no tenant column.
    """
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        found = reader.fieldnames or []
        submit = next((column for column in ITP_SUBMIT_COLUMNS if column in found), ITP_SUBMIT_COLUMNS[0])
        _require_columns(path, found, (*ITP_COLUMNS, submit))
        return [_itp_row(path, line, row, submit) for line, row in enumerate(reader, start=2)]


def _itp_row(path: Path, line: int, row: dict[str, str], submit: str) -> TraceJob:
    return TraceJob(
        name=_text(path, line, row, "job_id"),
        submit_seconds=_number(path, line, row, submit, float, minimum=0),
        application=(row.get("model_name") or "").strip(),
        num_gpus=_number(path, line, row, "num_gpu", int, minimum=1),
        batch_size=_optional_number(path, line, row, "batch_size", int, minimum=1),
        duration=_number(path, line, row, "duration", float, minimum=0),
    )


def pollux_total_progress(application_dir: Path) -> float:
    """Progress at which a Pollux job of this application completes.

    The unit is AdaScale's scale-invariant iterations; a job is done when it reaches
    the last row of its validation curve at the initial (smallest) batch size.
    """
    curves = sorted(application_dir.glob("validation-*.csv"), key=lambda p: int(p.stem.split("-")[1]))
    if not curves:
        raise TraceError(application_dir, 0, "validation-*.csv", "no validation curve in this folder")
    with curves[0].open(newline="") as handle:
        reader = csv.DictReader(handle)
        _require_columns(curves[0], reader.fieldnames, ("progress",))
        rows = list(enumerate(reader, start=2))
    if not rows:
        raise TraceError(curves[0], 2, "progress", "expected at least one row")
    line, last = rows[-1]
    return _number(curves[0], line, last, "progress", float, minimum=0)


def _require_columns(path: Path, found: Sequence[str] | None, expected: tuple[str, ...]) -> None:
    missing = [column for column in expected if column not in (found or [])]
    if missing:
        raise TraceError(path, 1, missing[0], f"missing column(s) {missing}")


def _text(path: Path, line: int, row: dict[str, str], column: str) -> str:
    value = (row.get(column) or "").strip()
    if not value:
        raise TraceError(path, line, column, "expected a non-empty value")
    return value


def _number(path: Path, line: int, row: dict[str, str], column: str, kind: type, *, minimum: float,  # type: ignore[no-untyped-def]
            maximum: float = MAX_TRACE_SECONDS):
    raw = (row.get(column) or "").strip()
    expected = "an integer" if kind is int else "a number"
    try:
        value = kind(raw)
    except (ValueError, OverflowError):
        raise TraceError(path, line, column, f"expected {expected}") from None
    if not math.isfinite(value):
        raise TraceError(path, line, column, f"expected {expected}, not infinite or NaN")
    if value < minimum:
        raise TraceError(path, line, column, f"expected a value ≥ {minimum}")
    if value > maximum:
        raise TraceError(path, line, column, f"expected a value ≤ {maximum:g}")
    return value


def _optional_number(path: Path, line: int, row: dict[str, str], column: str, kind: type, *, minimum: float = 0,  # type: ignore[no-untyped-def]
                     maximum: float = MAX_TRACE_SECONDS):
    """Like ``_number``, but an absent column or an empty cell gives None."""
    if not (row.get(column) or "").strip():
        return None
    return _number(path, line, row, column, kind, minimum=minimum, maximum=maximum)
