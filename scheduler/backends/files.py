"""Where a local job's files live, under ``settings.JOB_DIR`` (shared by all nodes in a cluster).

    JOB_DIR/<job id>/                            the ranks' working directory
    JOB_DIR/<job id>/checkpoints/                CHECKPOINT_DIR: the job's own checkpoints
    JOB_DIR/<job id>/logs/gen<g>-rank<r>.log     stdout and stderr of rank r of generation g
    JOB_DIR/<job id>/run/gen<g>-rank<r>.exit     its exit code (``supervise.write_exit``)
    JOB_DIR/<job id>/run/gen<g>-<host>.started   the agent of <host> started its ranks of g
    JOB_DIR/<job id>/logs/slurm.log              on Slurm: the batch script's output, every run appended
    JOB_DIR/<job id>/.job                        on Slurm: which job the folder is (``claim_job_dir``)
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

from django.conf import settings

_LOG_NAME = re.compile(r"gen(\d+)-rank(\d+)\.log")
SLURM_LOG = "slurm.log"  # JOB_DIR/<job id>/logs/slurm.log: stdout and stderr of the job's Slurm batch script


def job_tag(report_token: str) -> str:
    """A job's tag: a hash of its secret, telling two jobs of one id apart (its folder, its Slurm comment, its
    Kubernetes Job)."""
    return hashlib.sha256(report_token.encode()).hexdigest()[:12]


def job_dir(job_id: int) -> Path:
    return Path(settings.JOB_DIR) / str(job_id)


OWNER_MARK = ".job"  # JOB_DIR/<job id>/.job: which job the folder is (a tag from its secret)


def claim_job_dir(job_id: int, tag: str) -> Path:
    """The job's folder, made sure to be this job's: one left by another job of the same id (a console database
    reset or replaced over the same ``JOB_DIR``) is moved aside to ``<id>.stale-<its tag>``, never resumed from
    or deleted. ``tag``: a hash of the job's secret (``records.job_comment``'s)."""
    folder = job_dir(job_id)
    mark = folder / OWNER_MARK
    try:
        found = mark.read_text().strip()
    except FileNotFoundError:
        found = tag  # a new folder, or one made before folders were marked: taken as this job's
    if found != tag:
        folder.rename(folder.with_name(f"{folder.name}.stale-{found}-{int(time.time())}"))
    folder.mkdir(parents=True, exist_ok=True)
    if not mark.exists():
        mark.write_text(tag + "\n")
    return folder


def checkpoint_dir(job_id: int) -> Path:
    return job_dir(job_id) / "checkpoints"


def log_path(job_id: int, generation: int, rank: int) -> Path:
    return job_dir(job_id) / "logs" / f"gen{generation}-rank{rank}.log"


def exit_path(job_id: int, generation: int, rank: int) -> Path:
    return job_dir(job_id) / "run" / f"gen{generation}-rank{rank}.exit"


def started_path(job_id: int, generation: int, hostname: str) -> Path:
    return job_dir(job_id) / "run" / f"gen{generation}-{hostname}.started"


def read_exit(job_id: int, generation: int, rank: int) -> dict[str, Any] | None:
    """``{"code": int, "at": unix time}`` once the rank has ended, else None."""
    try:
        return json.loads(exit_path(job_id, generation, rank).read_text())
    except FileNotFoundError:
        return None


def tail(path: Path, lines: int = 20, max_bytes: int = 16384) -> str:
    """The last ``lines`` lines of a file (reading at most its last ``max_bytes``); empty if absent."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(path.stat().st_size - max_bytes, 0))
            data = handle.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def log_tails(job_id: int, lines: int = 30, limit: int = 8) -> list[tuple[str, str]]:
    """(file name, tail) of the job's rank logs, newest generation first, then by rank; at most ``limit``."""
    logs = []
    for path in (job_dir(job_id) / "logs").glob("gen*-rank*.log"):
        match = _LOG_NAME.fullmatch(path.name)
        if match:
            logs.append((-int(match[1]), int(match[2]), path))
    slurm = job_dir(job_id) / "logs" / SLURM_LOG  # a Slurm job's one log, every run appended
    first = [(SLURM_LOG, tail(slurm, lines))] if slurm.exists() else []
    return first + [(path.name, tail(path, lines)) for _, _, path in sorted(logs)[:limit - len(first)]]
