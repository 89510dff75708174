"""New workloads drawn from Philly's job list the way the Pollux authors drew theirs: held-out inputs.

The Pollux and Sia validation files (``pollux/workloads-<load>/``, ``sia/workloads/philly/``) are eight fixed draws
of the Pollux authors' generator (Qiao et al., OSDI'21; ``petuum/adaptdl`` ``simulator/workload.py``), and this
product's policies were built and chosen on them. This module draws new ones as that generator describes, so a
policy can be checked on workloads it was never run on (``validate_pollux --seed``, ``validate_sia --sets
philly-sampled``). Our code, written from the generator's description; the draws are ours (our random streams),
not the authors' files at other seeds:

- Philly's jobs that ran at least a minute and used under 1,000 GPU-hours, submitted within ``hours`` hours of
  the day from ``start_hour`` (every day of the trace: the generator keeps the time of day, not the date);
- ``jobs`` of them drawn without replacement; each arrives at its time of day less ``start_hour``;
- its application by its GPU-time (``workload.assign_profile``: Pollux's buckets, even within one);
- its requested GPUs and batch one of the application's ``CONFIGURATIONS``, evenly.

Pollux ran 80, 160, 240 and 320 jobs for its loads 0.5–2.0 (160 × load); Sia's Philly files are the 160-job ones
with every ncf job made a cifar10 job (``SIA_APPLICATIONS``).
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .traces import POLLUX_COLUMNS, TraceJob, load_philly
from .workload import assign_profile

PHILLY_JOBS = Path("philly") / "philly_jobs_sia_pollux.csv"  # under TRACES_DIR: Pollux's `traces/philly.csv`
# Each application's (GPUs, batch size) requests: those of Pollux's generator, which draws one of the configurations
# its models run at 50–80 % scaling efficiency on 16 × 4 T4 (``applications.py``, ``get_configurations(0.5, 0.8)``),
# as its 1.0–2.0 load files show them.
CONFIGURATIONS: Mapping[str, tuple[tuple[int, int], ...]] = {
    "bert": ((6, 384), (8, 384), (12, 384), (16, 384)),
    "cifar10": ((6, 2048), (8, 2048), (12, 4096), (16, 4096)),
    "deepspeech2": ((6, 320), (8, 320), (12, 640)),
    "imagenet": ((24, 3200), (32, 6400), (48, 6400)),
    "ncf": ((1, 32768),),
    "yolov3": ((4, 64),),
}
SIA_APPLICATIONS: Mapping[str, str] = {"ncf": "cifar10"}  # Sia's Philly files: Pollux's, ncf jobs made cifar10
JOBS_AT_LOAD_1 = 160  # the jobs of each of the authors' files at load 1.0 (Sia's Philly files too); × load elsewhere
MIN_SECONDS = 60.0
MAX_GPU_SECONDS = 1000 * 3600.0
DAY = 86_400.0
MAX_JOBS = 10_000
VERSION = 1  # of the draw: a change to it must not reuse files written by an earlier one


def sample_jobs(philly: Sequence[TraceJob], jobs: int, seed: int, *, start_hour: int = 2, hours: int = 8,
                renamed: Mapping[str, str] | None = None) -> list[TraceJob]:
    """``jobs`` jobs drawn from Philly's job list (``load_philly``) at ``seed``, in arrival order and named
    ``<application>-<n>`` as the authors' files are; ``renamed`` maps an application to the one that replaces it.

    Raises ``ValueError`` for a bound out of range or a window with fewer jobs than asked for."""
    if not 1 <= jobs <= MAX_JOBS or not 0 <= start_hour < 24 or not 1 <= hours <= 24:
        raise ValueError(f"jobs must be 1–{MAX_JOBS}, start_hour 0–23 and hours 1–24")
    window = [job for job in philly if _eligible(job) and _seconds_into(job, start_hour) < hours * 3600]
    if len(window) < jobs:
        raise ValueError(f"jobs: the window holds {len(window)} eligible jobs, fewer than {jobs}")
    rng = random.Random(seed)
    drawn = sorted(rng.sample(window, jobs), key=lambda job: (_seconds_into(job, start_hour), job.name))
    out = []
    for n, job in enumerate(drawn):
        application = assign_profile(job, seed)
        application = (renamed or {}).get(application, application)
        gpus, batch = rng.choice(CONFIGURATIONS[application])
        out.append(TraceJob(name=f"{application}-{n}", submit_seconds=_seconds_into(job, start_hour),
                            application=application, num_gpus=gpus, batch_size=batch))
    return out


def _eligible(job: TraceJob) -> bool:
    gpu_seconds = job.gpu_seconds
    return (job.submitted_at is not None and job.duration is not None and job.duration >= MIN_SECONDS
            and gpu_seconds is not None and gpu_seconds < MAX_GPU_SECONDS)


def _seconds_into(job: TraceJob, start_hour: int) -> float:
    """Seconds from ``start_hour`` o'clock to the job's submission, on the day it was submitted (mod one day)."""
    moment = job.submitted_at
    assert moment is not None  # _eligible
    of_day = moment.hour * 3600 + moment.minute * 60 + moment.second
    return (of_day - start_hour * 3600) % DAY


def sampled_workload(traces_dir: Path, cache_dir: Path, jobs: int, seed: int,
                     renamed: Mapping[str, str] | None = None) -> Path:
    """The path of the workload file (the authors' columns, ``POLLUX_COLUMNS``) of ``sample_jobs`` at these
    settings from ``traces_dir``'s Philly job list, written under ``cache_dir`` once and whole (a file is renamed into
    place only when complete). Raises ``FileNotFoundError`` where that list is missing."""
    source = (traces_dir / PHILLY_JOBS).resolve()
    stat = source.stat()  # another job list (or this one changed) is another draw
    key = f"{VERSION}:{source}:{stat.st_size}:{stat.st_mtime_ns}:{jobs}:{seed}:{sorted((renamed or {}).items())}"
    path = cache_dir / f"philly-sampled-{hashlib.sha256(key.encode()).hexdigest()[:16]}.csv"
    if path.exists():
        return path
    drawn = sample_jobs(_philly(traces_dir), jobs, seed, renamed=renamed)
    cache_dir.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=cache_dir, suffix=".partial")
    with os.fdopen(handle, "w", newline="") as out:
        out.write(",".join(POLLUX_COLUMNS) + "\n")
        for job in drawn:
            out.write(f"{job.name},{job.submit_seconds:.0f},{job.application},{job.num_gpus},{job.batch_size}\n")
    os.replace(partial, path)
    return path


def default_cache_dir() -> Path:
    """This user's cache of drawn files under the system's temporary directory: its own, readable by it alone, so no
    other user of the machine can plant a "draw" there (``PermissionError`` when it is a link or someone else's)."""
    folder = Path(tempfile.gettempdir()) / f"cluster-ops-sampled-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.is_symlink() or folder.stat().st_uid != os.getuid():
        raise PermissionError(f"{folder} is not a folder of this user's own: sampled workloads are not read from it")
    return folder


_LOADED: dict[Path, list[TraceJob]] = {}


def _philly(traces_dir: Path) -> list[TraceJob]:
    """Philly's job list, read once per process (82,247 rows)."""
    path = traces_dir / PHILLY_JOBS
    if path not in _LOADED:
        _LOADED[path] = load_philly(path)
    return _LOADED[path]
