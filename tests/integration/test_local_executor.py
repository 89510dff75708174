"""The local executor end to end: real Redis, a real node agent (a Celery worker process) and real
PyTorch ranks of ``examples/elastic_train.py``, rescaled 1 → 2 → 1 GPUs by live rounds until done."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from celery import Celery
from django.db import connection

from cluster_ops.celery import app as default_app
from scheduler import inventory
from scheduler.backends import files
from scheduler.jobs import verbs
from scheduler.live import round as rounds
from scheduler.live.config import scheduler_settings
from scheduler.models import Allocation, Job, JobState, SchedulerSettings, Tenant

from .conftest import wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.needs("torch"),
]

HOST = "agent-test-node"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elastic_train.py"
STEPS = 400
# Whole lines only: a line being written while the test reads must not count.
LOG_LINE = re.compile(r"step=(\d+) loss=([\d.]+) world_size=(\d+)\n")
START_LINE = re.compile(
    r"rank=(\d+) world_size=(\d+) start_step=(\d+) resumed=(True|False) local_batch=\d+ devices=\S+\n")


def database_url() -> str:
    """The test database, as DATABASE_URL for the agent process."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user, password = quote(db["USER"] or "", safe=""), quote(db["PASSWORD"] or "", safe="")
    return f"postgres://{user}:{password}@{quote(db['HOST'] or '', safe='')}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def agent_worker(redis_url: str, repo_root: Path, tmp_path: Path, settings) -> Iterator[Path]:
    """A node agent for HOST on the test database and Redis; yields its log file."""
    settings.JOB_DIR = tmp_path / "jobs"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "cluster_ops.settings", "REDIS_URL": redis_url,
           "DATABASE_URL": database_url(), "VAR_DIR": str(tmp_path / "var"), "JOB_DIR": str(settings.JOB_DIR),
           "NODE_HOSTNAME": HOST, "STOP_GRACE_SECONDS": "20", "PUBLIC_URL": "http://127.0.0.1:9"}
    log = tmp_path / "agent.log"
    command = [sys.executable, "-m", "celery", "-A", "cluster_ops", "worker", "-Q", f"node.{HOST},celery",
               "--pool", "threads", "--concurrency", "2", "-n", f"agent@{HOST}", "--without-mingle",
               "--without-gossip", "--loglevel", "INFO"]
    with log.open("wb") as output:
        worker = subprocess.Popen(command, cwd=repo_root, env=env, stdout=output, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        assert wait_until(lambda: "ready." in log.read_text(), 60), log.read_text()
        yield log
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        kill_ranks_left(tmp_path / "var" / "agent" / HOST)


def kill_ranks_left(agent_dir: Path) -> None:
    for state in agent_dir.glob("*.json"):
        for pid in json.loads(state.read_text())["pids"].values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def redis_is_current(redis_celery_app: Celery) -> Iterator[Celery]:
    """The executor publishes through the current Celery app: here, the one on the real Redis."""
    redis_celery_app.set_current()
    yield redis_celery_app
    default_app.set_current()




def read_log(job_id: int, generation: int, rank: int) -> str:
    path = files.log_path(job_id, generation, rank)
    return path.read_text() if path.exists() else ""


def losses(job_id: int, generation: int) -> list[tuple[int, float, int]]:
    """(step, loss, world size) as rank 0 logged them in one generation."""
    found = LOG_LINE.findall(read_log(job_id, generation, 0))
    return [(int(step), float(loss), int(world)) for step, loss, world in found]


def start_of(job_id: int, generation: int, rank: int) -> tuple[int, int, bool] | None:
    """(world size, start step, resumed) from a rank's first line, once it has printed it."""
    match = START_LINE.search(read_log(job_id, generation, rank))
    return (int(match[2]), int(match[3]), match[4] == "True") if match else None


def logged_past(job_id: int, generation: int, step: int) -> Callable[[], bool]:
    return lambda: any(logged >= step for logged, _, _ in losses(job_id, generation))


def round_with(job: Job, low: int, high: int) -> None:
    verbs.set_gpu_bounds(job, low, high)
    row = rounds.run_round()
    assert row is not None and row.status == "ok" and row.decisions == 1, row and row.error


def test_an_elastic_job_runs_is_rescaled_twice_resumes_and_succeeds(
    agent_worker: Path, redis_is_current: Celery, tenant: Tenant
) -> None:
    specs = [inventory.GpuSpec(i, f"GPU-{HOST}-{i}", "NVIDIA A100-SXM4-80GB", 81920, 400) for i in range(2)]
    inventory.register_node(HOST, specs)
    scheduler_settings()
    SchedulerSettings.objects.filter(pk=1).update(executor="local", policy="fifo")
    job = verbs.submit_job(tenant=tenant, name="elastic", workload_profile="cifar10", total_work=STEPS * 64,
                              min_gpus=1, max_gpus=2)
    Job.objects.filter(pk=job.pk).update(
        command=f"{sys.executable} {EXAMPLE} --steps {STEPS} --step-seconds 0.02 --checkpoint-every 1000")
    diagnose = lambda: agent_worker.read_text()[-4000:]  # noqa: E731

    round_with(job, 1, 1)  # generation 1: one rank
    assert wait_until(logged_past(job.pk, 1, 60), 60), diagnose()

    round_with(job, 2, 2)  # generation 2: two ranks, resumed from the checkpoint written on SIGTERM
    assert wait_until(lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING, 60), diagnose()
    assert wait_until(lambda: start_of(job.pk, 2, 1) and losses(job.pk, 2), 60), diagnose()
    resumed_at = start_of(job.pk, 2, 0)
    assert resumed_at is not None and resumed_at[2] and resumed_at[1] >= 60
    assert start_of(job.pk, 2, 1) == resumed_at and resumed_at[0] == 2
    assert wait_until(logged_past(job.pk, 2, resumed_at[1] + 60), 60), diagnose()

    round_with(job, 1, 1)  # generation 3: one rank again, until the end
    assert wait_until(lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING, 60), diagnose()
    assert wait_until(lambda: rounds.run_round() and Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 60), \
        diagnose()

    job.refresh_from_db()
    assert (job.error, job.restarts, job.progress) == ("", 2, job.total_work)
    assert job.attained_gpu_seconds > 0 and not Allocation.objects.filter(job=job, ended_at__isnull=True).exists()
    exits = {(g, r): files.read_exit(job.pk, g, r)["code"] for g, r in [(1, 0), (2, 0), (2, 1), (3, 0)]}
    assert (exits[(1, 0)], exits[(3, 0)]) == (143, 0)  # stopped after its checkpoint; finished
    # Stopped too; whatever code a stopped rank ends with (gloo may abort a process group being torn
    # down, rarely), a rank of a superseded generation never fails the job.
    assert exits[(2, 0)] != 0 and exits[(2, 1)] != 0
    final = start_of(job.pk, 3, 0)
    assert final is not None and final[0] == 1 and final[2] and final[1] > resumed_at[1]
    assert {world for _, _, world in losses(job.pk, 2)} == {2}
    first, last = losses(job.pk, 1), losses(job.pk, 3)
    assert last[-1][0] == STEPS
    assert max(loss for _, loss, _ in last) < first[0][1]  # it learned, across both rescales
