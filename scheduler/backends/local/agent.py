"""The node agent: runs this machine's ranks of each job, as the local executor asks.

An agent is a Celery worker on a GPU machine consuming ``node.<NODE_HOSTNAME>`` (see the
manual, Cluster back-ends). Its two tasks, thin wrappers in ``scheduler/tasks.py``:

- ``apply(message)`` makes this node run exactly its part of one generation of a job.
  Idempotent by (job, generation): a generation not above the one this node already runs,
  or below the job's generation in the database (stale), is ignored. Otherwise the job's
  ranks here are stopped (SIGTERM, ``STOP_GRACE_SECONDS``, SIGKILL) and one process per
  local GPU is started under ``supervise.py`` (beside it), which writes its exit code to a file.
- ``poll()`` reads those exit files and records what they mean in the database: every rank
  of the job's current generation exited 0 → succeeded; one exited non-zero or vanished →
  failed, with the tail of its log as the error. A rank stopped for a rescale or a
  preemption belongs to an older generation, so it is never judged.

What this node runs is remembered in ``VAR_DIR/agent/<hostname>/<job id>.json``: the ranks
run in their own sessions and outlive a worker restart, which then carries on.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from scheduler.backends import GpuPlace, Launch, charge_gpu_time, files, finish_jobs
from scheduler.backends.local.executor import from_message
from scheduler.backends.local.supervise import write_exit
from scheduler.models import ACTIVE_STATES, FINISHED_STATES, Allocation, Job, JobState

SUPERVISOR = Path(__file__).resolve().parent / "supervise.py"
# Not handed to jobs: the product's own secrets, which a worker's environment holds.
PRIVATE_VARIABLES = ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ADMIN_PASSWORD")
_children: dict[int, subprocess.Popen[bytes]] = {}  # supervisors this process started, to reap them


@dataclass(frozen=True)
class LocalRun:
    """What this node runs of a job: one generation's ranks (global rank → supervisor pid)."""

    generation: int
    world_size: int
    pids: dict[int, int]


@dataclass(frozen=True)
class Outcome:
    state: str
    at: datetime
    reason: str
    error: str = ""


# --- applying a launch ------------------------------------------------------------------


def apply(message: dict[str, Any], hostname: str | None = None, grace: float | None = None) -> str:
    """Make this node run its ranks of ``message`` (a ``Launch``); says what it did."""
    launch, hostname = from_message(message), hostname or settings.NODE_HOSTNAME
    _reap()
    with job_lock(hostname, launch.job_id):
        run = read_run(hostname, launch.job_id)
        if run is not None and launch.generation <= run.generation:
            return f"ignored: generation {launch.generation}, this node runs {run.generation}"
        job = Job.objects.filter(pk=launch.job_id).values_list("generation", "command", "report_token").first()
        if job is None or launch.generation < job[0]:
            return f"ignored: generation {launch.generation} is stale"
        if run is not None:
            stop_ranks(launch.job_id, run, settings.STOP_GRACE_SECONDS if grace is None else grace)
        try:
            run = start_ranks(launch, hostname, shlex.split(job[1]), job[2])
        except ValueError as error:  # no command, or one shlex cannot split
            record(launch.job_id, launch.generation,
                   Outcome(JobState.FAILED, timezone.now(), f"failed: {error}", str(error)))
            run = LocalRun(launch.generation, 0, {})
        write_run(hostname, launch.job_id, run)
        if run.pids:
            report_started(launch, hostname)
    return f"generation {launch.generation}: {len(run.pids)} rank(s) started here"


def ranked(launch: Launch) -> list[GpuPlace]:
    """The launch's GPUs in rank order: node by node (rank 0 on the first node), in GPU order within one."""
    hosts = launch.hosts
    return sorted(launch.gpus, key=lambda gpu: hosts.index(gpu.hostname))


def master_port(job_id: int, generation: int) -> int:
    """The same port on every node, new for each generation; in 20000–31999, below Linux's ephemeral range."""
    digest = hashlib.blake2b(f"{job_id}:{generation}".encode(), digest_size=4).digest()
    return 20000 + int.from_bytes(digest, "big") % 12000


def rank_env(launch: Launch, rank: int, token: str) -> dict[str, str]:
    """The variables one rank gets (torch.distributed's ``env://`` names plus ours)."""
    gpus, hosts = ranked(launch), launch.hosts
    gpu = gpus[rank]
    local = [r for r, other in enumerate(gpus) if other.hostname == gpu.hostname]
    return {
        "CUDA_VISIBLE_DEVICES": str(gpu.index),
        "WORLD_SIZE": str(len(gpus)), "RANK": str(rank),
        "LOCAL_RANK": str(local.index(rank)), "LOCAL_WORLD_SIZE": str(len(local)),
        "NNODES": str(len(hosts)), "NODE_RANK": str(hosts.index(gpu.hostname)),
        "MASTER_ADDR": hosts[0] if len(hosts) > 1 else "127.0.0.1",
        "MASTER_PORT": str(master_port(launch.job_id, launch.generation)),
        "CHECKPOINT_DIR": str(files.checkpoint_dir(launch.job_id)),
        "CLUSTER_OPS_JOB_ID": str(launch.job_id), "CLUSTER_OPS_GENERATION": str(launch.generation),
        "CLUSTER_OPS_REPORT_TOKEN": token,
        "CLUSTER_OPS_REPORT_URL": f"{settings.PUBLIC_URL}/api/jobs/{launch.job_id}/report/",
    }


def start_ranks(launch: Launch, hostname: str, argv: list[str], token: str) -> LocalRun:
    """Start this node's ranks of ``launch`` (none when it has none here)."""
    gpus = ranked(launch)
    local = [rank for rank, gpu in enumerate(gpus) if gpu.hostname == hostname]
    if local and not argv:
        raise ValueError("the job has no command")
    base = {key: value for key, value in os.environ.items() if key not in PRIVATE_VARIABLES}
    files.checkpoint_dir(launch.job_id).mkdir(parents=True, exist_ok=True)
    job, generation = launch.job_id, launch.generation
    pids = {
        rank: start_rank(argv, {**base, **rank_env(launch, rank, token)}, files.log_path(job, generation, rank),
                         files.exit_path(job, generation, rank), files.job_dir(job))
        for rank in local
    }
    return LocalRun(generation, len(gpus), pids)


def start_rank(argv: list[str], env: dict[str, str], log: Path, exit_file: Path, cwd: Path) -> int:
    """Start one rank under the supervisor, in a session of its own; returns the supervisor's pid."""
    for folder in (log.parent, exit_file.parent, cwd):
        folder.mkdir(parents=True, exist_ok=True)
    exit_file.unlink(missing_ok=True)
    command = [sys.executable, str(SUPERVISOR), "--log", str(log), "--exit-file", str(exit_file), "--cwd", str(cwd),
               "--", *argv]
    child = subprocess.Popen(command, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _children[child.pid] = child
    return child.pid


def stop_ranks(job_id: int, run: LocalRun, grace: float) -> None:
    """SIGTERM each rank's supervisor (it passes it on), then SIGKILL the sessions still alive after ``grace``."""
    live = [pid for pid in run.pids.values() if alive(pid)]
    for pid in live:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [pid for pid in live if alive(pid)]
    for pid in live:
        _signal(pid, signal.SIGKILL, group=True)  # the supervisor and the rank: both in session ``pid``
    for rank, pid in run.pids.items():
        _wait_gone(pid)
        # A supervisor killed, or stopped before it could set up its handler, wrote no exit file.
        if files.read_exit(job_id, run.generation, rank) is None:
            code = -signal.SIGKILL if pid in live else -signal.SIGTERM
            write_exit(files.exit_path(job_id, run.generation, rank), code)


def alive(pid: int) -> bool:
    """Whether a supervisor still runs (a zombie does not)."""
    child = _children.get(pid)
    if child is not None:
        if child.poll() is None:
            return True
        _children.pop(pid, None)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _reap() -> None:
    """Collect the supervisors this process started that have ended, so none lingers as a zombie."""
    for pid in list(_children):
        alive(pid)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _signal(pid: int, signum: int, group: bool = False) -> None:
    try:
        os.killpg(pid, signum) if group else os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _wait_gone(pid: int, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def report_started(launch: Launch, hostname: str) -> None:
    """Mark this node's ranks started; the last node to do so turns a rescaling job back to running."""
    marker = files.started_path(launch.job_id, launch.generation, hostname)
    marker.touch()
    # Every node writes its marker before it looks, so the last one to write sees them all.
    if all(files.started_path(launch.job_id, launch.generation, host).exists() for host in launch.hosts):
        Job.objects.filter(pk=launch.job_id, generation=launch.generation, state=JobState.RESCALING).update(
            state=JobState.RUNNING)


# --- polling exit codes -------------------------------------------------------------------


def poll(hostname: str | None = None) -> dict[int, str]:
    """Check every job this node runs; returns what was found per job id."""
    hostname = hostname or settings.NODE_HOSTNAME
    _reap()
    found = {}
    for path in sorted(_agent_dir(hostname).glob("*.json")):
        job_id = int(path.stem)
        with job_lock(hostname, job_id):
            run = read_run(hostname, job_id)
            if run is not None:
                found[job_id] = _check(hostname, job_id, run)
    return found


def _check(hostname: str, job_id: int, run: LocalRun) -> str:
    job = Job.objects.filter(pk=job_id).values_list("state", "generation").first()
    if job is None or job[0] in FINISHED_STATES:  # cancelled or deleted meanwhile: nothing of it may run
        stop_ranks(job_id, run, settings.STOP_GRACE_SECONDS)
        forget_run(hostname, job_id)
        return "stopped: the job is over"
    if job[1] != run.generation or job[0] not in ACTIVE_STATES:
        return "superseded: a newer launch is on its way"
    outcome = judge(job_id, run)
    if outcome is None:
        return "running"
    return outcome.state if record(job_id, run.generation, outcome) else "running"


def judge(job_id: int, run: LocalRun) -> Outcome | None:
    """What the exit files of one generation say: succeeded, failed, or nothing yet (None)."""
    exits = {rank: files.read_exit(job_id, run.generation, rank) for rank in range(run.world_size)}
    for rank, result in exits.items():
        if result is not None and result["code"] != 0:
            return _failure(job_id, run.generation, rank, _at(result["at"]), _code_text(result["code"]))
    for rank, pid in run.pids.items():
        # Read again after: a supervisor writes its exit file just before it exits.
        if exits[rank] is None and not alive(pid) and files.read_exit(job_id, run.generation, rank) is None:
            return _failure(job_id, run.generation, rank, timezone.now(), "vanished without an exit code")
    if all(result is not None for result in exits.values()):
        at = max(_at(result["at"]) for result in exits.values() if result is not None)
        return Outcome(JobState.SUCCEEDED, at, "finished: every rank exited 0")
    return None


def _failure(job_id: int, generation: int, rank: int, at: datetime, what: str) -> Outcome:
    log = files.tail(files.log_path(job_id, generation, rank))
    return Outcome(JobState.FAILED, at, f"failed: rank {rank} {what}", f"rank {rank} {what}; its log ends:\n{log}")


def _code_text(code: int) -> str:
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


def _at(unix_time: float) -> datetime:
    return datetime.fromtimestamp(unix_time, tz=UTC)


def record(job_id: int, generation: int, outcome: Outcome) -> bool:
    """End the job as ``outcome`` says, if it still runs that generation; whether it did."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id, generation=generation, state__in=ACTIVE_STATES).first()
        if job is None:
            return False
        held = Allocation.objects.filter(job=job, ended_at__isnull=True)
        # Clocks of nodes differ: never end before the allocation began or the time already counted.
        started = held.aggregate(start=Max("started_at"))["start"]
        at = max(moment for moment in (outcome.at, started, job.accounted_at) if moment is not None)
        charge_gpu_time(job, held.count(), at)
        if outcome.state == JobState.SUCCEEDED:
            job.progress = max(job.progress, job.total_work)
        finish_jobs([job], {job.pk: at}, outcome.state, outcome.reason)
        Job.objects.filter(pk=job.pk).update(error=outcome.error)
    return True


# --- what this node runs ------------------------------------------------------------------


def _agent_dir(hostname: str) -> Path:
    return Path(settings.VAR_DIR) / "agent" / hostname


@contextmanager
def job_lock(hostname: str, job_id: int) -> Iterator[None]:
    """One apply or poll of a job at a time on this node (across worker processes and threads)."""
    folder = _agent_dir(hostname)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{job_id}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def read_run(hostname: str, job_id: int) -> LocalRun | None:
    try:
        data = json.loads((_agent_dir(hostname) / f"{job_id}.json").read_text())
    except FileNotFoundError:
        return None
    return LocalRun(data["generation"], data["world_size"], {int(rank): pid for rank, pid in data["pids"].items()})


def write_run(hostname: str, job_id: int, run: LocalRun) -> None:
    """Remember ``run`` (a generation with no ranks here is forgotten: the database's generation guards it)."""
    if not run.pids:
        forget_run(hostname, job_id)
        return
    path = _agent_dir(hostname) / f"{job_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"generation": run.generation, "world_size": run.world_size, "pids": run.pids}))
    os.replace(temporary, path)


def forget_run(hostname: str, job_id: int) -> None:
    (_agent_dir(hostname) / f"{job_id}.json").unlink(missing_ok=True)
