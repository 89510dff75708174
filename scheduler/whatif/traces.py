"""Which trace files a what-if may read, and how a stored scenario names one.

A what-if names its trace **relative** to one of two roots, never by an absolute path:

* ``philly/philly_jobs_sia_pollux.csv`` — a public trace under ``TRACES_DIR``;
* ``history:history-<hash>.csv`` — this cluster's own history, written under ``VAR_DIR/whatif`` (``history.py``).

``resolve`` turns a name into a path inside its root, following symlinks first, so neither ``../``, an absolute
path nor a link that points outside lets a what-if read any other file. Errors name the field and the rule, and
never quote a file's contents.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.exceptions import ValidationError

from scheduler.sim.trace_formats import detect_format
from scheduler.sim.traces import TraceError

HISTORY_PREFIX = "history:"
RULE = ("Name a trace relative to TRACES_DIR (e.g. philly/philly_jobs_sia_pollux.csv) or this cluster's history "
        "(history:<file>); absolute paths and '..' are refused.")


def history_dir() -> Path:
    return Path(settings.VAR_DIR) / "whatif"


def history_name(path: Path) -> str:
    """How a scenario names a history trace written at ``path`` (a file directly under ``history_dir()``)."""
    return HISTORY_PREFIX + path.name


def resolve(name: str, field: str = "trace") -> Path:
    """The file a scenario's trace ``name`` refers to, inside its root; ``ValidationError`` on ``field`` otherwise."""
    root, relative = _root_and_relative(name, field)
    try:
        base = root.resolve(strict=True)
        path = (base / relative).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, a symlink loop, a name the filesystem refuses
        raise ValidationError({field: f"No trace {_quoted(name)}. {RULE}"}) from None
    if not path.is_relative_to(base) or not path.is_file():
        raise ValidationError({field: f"No trace {_quoted(name)} inside its folder. {RULE}"})
    return path


def _root_and_relative(name: str, field: str) -> tuple[Path, PurePosixPath]:
    if not isinstance(name, str) or not name or "\x00" in name or "\\" in name:
        raise ValidationError({field: RULE})
    history = name.startswith(HISTORY_PREFIX)
    relative = PurePosixPath(name.removeprefix(HISTORY_PREFIX))
    if relative.is_absolute() or ".." in relative.parts or not relative.parts or (history and len(relative.parts) > 1):
        raise ValidationError({field: RULE})
    return (history_dir() if history else Path(settings.TRACES_DIR)), relative


def _quoted(name: str) -> str:
    return repr(name if len(name) <= 80 else name[:77] + "...")


def display_name(name: str) -> str:
    """A trace's short name for labels: its file name, history or not."""
    return PurePosixPath(name.removeprefix(HISTORY_PREFIX)).name


@lru_cache(maxsize=4)
def trace_files(traces_dir: str) -> list[tuple[str, str]]:
    """(path relative to ``traces_dir``, format) of every CSV there whose header names a trace format."""
    found = []
    root = Path(traces_dir)
    for path in sorted(root.rglob("*.csv")):
        try:
            found.append((str(path.relative_to(root)), detect_format(path)))
        except (TraceError, OSError, UnicodeDecodeError):
            continue  # profiles, machine lists, anything that is not a job trace
    return found
