"""Trace loaders: public cluster traces → plain job records.

Malformed input raises ``TraceError`` naming the file, the line, the column and what
was expected; nothing is returned from a file that has one bad row.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class TraceError(ValueError):
    """A trace file that does not have the expected format."""

    def __init__(self, path: Path, line: int, column: str, problem: str) -> None:
        super().__init__(f"{path}, line {line}, column {column!r}: {problem}")
        self.path, self.line, self.column = path, line, column


@dataclass(frozen=True)
class TraceJob:
    """One job as a trace submitted it."""

    name: str
    submit_seconds: float  # from the trace's start
    application: str
    num_gpus: int
    batch_size: int | None = None


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
        raise TraceError(path, 1, missing[0], f"missing column(s) {missing}; header is {found}")


def _text(path: Path, line: int, row: dict[str, str], column: str) -> str:
    value = (row.get(column) or "").strip()
    if not value:
        raise TraceError(path, line, column, "expected a non-empty value")
    return value


def _number(path: Path, line: int, row: dict[str, str], column: str, kind: type, *, minimum: float):  # type: ignore[no-untyped-def]
    raw = (row.get(column) or "").strip()
    try:
        value = kind(raw)
    except ValueError:
        expected = "an integer" if kind is int else "a number"
        raise TraceError(path, line, column, f"expected {expected}, got {raw!r}") from None
    if value < minimum:
        raise TraceError(path, line, column, f"expected a value ≥ {minimum}, got {raw!r}")
    return value
