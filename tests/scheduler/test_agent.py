"""The node agent without Celery: real processes, exit files, generations and the database."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from scheduler.backends import GpuPlace, Launch, files
from scheduler.backends.local import agent
from scheduler.backends.local.executor import to_message
from scheduler.backends.local.supervise import write_exit
from scheduler.jobs import verbs
from scheduler.models import Allocation, Gpu, Job, JobState, Node

PY = sys.executable
IGNORES_SIGTERM = "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', os.getpid(), flush=True); time.sleep(60)"  # noqa: E501
HONOURS_SIGTERM = (
    "import signal, sys, time\n"
    "def stop(*_):\n    print('checkpointed', flush=True); sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, stop); print('ready', flush=True); time.sleep(60)"
)


@pytest.fixture
def dirs(settings, tmp_path: Path) -> Path:
    settings.JOB_DIR = tmp_path / "jobs"
    settings.VAR_DIR = tmp_path / "var"
    settings.STOP_GRACE_SECONDS = 5
    return tmp_path


def wait_for(condition: Callable[[], object], seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def start(argv: list[str], job_id: int = 1, generation: int = 1, rank: int = 0) -> int:
    return agent.start_rank(argv, dict(os.environ), files.log_path(job_id, generation, rank),
                            files.exit_path(job_id, generation, rank), files.job_dir(job_id))


def log(job_id: int = 1, generation: int = 1, rank: int = 0) -> str:
    return files.tail(files.log_path(job_id, generation, rank), lines=100)


# --- processes ----------------------------------------------------------------------------


def test_a_rank_ignoring_sigterm_is_killed_after_the_grace_period(dirs: Path) -> None:
    pid = start([PY, "-c", IGNORES_SIGTERM])
    assert wait_for(lambda: "ready" in log())
    rank_pid = int(log().split()[1])
    began = time.monotonic()
    agent.stop_ranks(1, agent.LocalRun(1, 1, {0: pid}), grace=1.0)
    assert 1.0 <= time.monotonic() - began < 8
    assert not agent.alive(pid) and not agent.alive(rank_pid)  # the supervisor and the rank itself
    assert files.read_exit(1, 1, 0)["code"] == -signal.SIGKILL


def test_a_rank_honouring_sigterm_stops_at_once_and_keeps_its_exit_code(dirs: Path) -> None:
    pid = start([PY, "-c", HONOURS_SIGTERM])
    assert wait_for(lambda: "ready" in log())
    began = time.monotonic()
    agent.stop_ranks(1, agent.LocalRun(1, 1, {0: pid}), grace=30)
    assert time.monotonic() - began < 10
    assert files.read_exit(1, 1, 0)["code"] == 143  # written by the supervisor, which forwarded SIGTERM
    assert "checkpointed" in log()


def test_the_exit_code_goes_to_a_file_and_the_output_to_the_rank_log(dirs: Path) -> None:
    pid = start([PY, "-c", "import sys; print('hello'); print('oops', file=sys.stderr); sys.exit(3)"], rank=2)
    assert wait_for(lambda: files.read_exit(1, 1, 2) is not None)
    assert files.read_exit(1, 1, 2)["code"] == 3
    assert log(rank=2).splitlines() == ["hello", "oops"]
    assert wait_for(lambda: not agent.alive(pid))


def test_a_program_that_cannot_start_exits_127(dirs: Path) -> None:
    start(["/nonexistent/train"])
    assert wait_for(lambda: files.read_exit(1, 1, 0) is not None)
    assert files.read_exit(1, 1, 0)["code"] == 127
    assert "cannot start '/nonexistent/train'" in log()


# --- the environment of a rank ------------------------------------------------------------


def test_each_rank_of_a_two_node_launch_gets_its_place(settings, tmp_path: Path) -> None:
    settings.PUBLIC_URL, settings.JOB_DIR = "https://ops.example.com", tmp_path
    gpus = tuple(GpuPlace(host, index, f"{host}-{index}") for host, index in
                 [("gpu01", 0), ("gpu01", 1), ("gpu02", 2), ("gpu02", 3), ("gpu02", 5)])
    launch = Launch(7, 4, gpus, restart=True)
    envs = [agent.rank_env(launch, rank, "secret") for rank in range(5)]
    assert [env["CUDA_VISIBLE_DEVICES"] for env in envs] == ["0", "1", "2", "3", "5"]
    assert [env["RANK"] for env in envs] == ["0", "1", "2", "3", "4"]
    assert [env["LOCAL_RANK"] for env in envs] == ["0", "1", "0", "1", "2"]
    assert [env["LOCAL_WORLD_SIZE"] for env in envs] == ["2", "2", "3", "3", "3"]
    assert [env["NODE_RANK"] for env in envs] == ["0", "0", "1", "1", "1"]
    assert {(env["WORLD_SIZE"], env["NNODES"], env["MASTER_ADDR"], env["MASTER_PORT"]) for env in envs} == {
        ("5", "2", "gpu01", str(agent.master_port(7, 4)))}
    assert envs[3]["CHECKPOINT_DIR"] == str(tmp_path / "7" / "checkpoints")
    assert envs[3]["CLUSTER_OPS_REPORT_URL"] == "https://ops.example.com/api/jobs/7/report/"
    assert (envs[3]["CLUSTER_OPS_JOB_ID"], envs[3]["CLUSTER_OPS_GENERATION"]) == ("7", "4")
    assert envs[3]["CLUSTER_OPS_REPORT_TOKEN"] == "secret"


def test_a_one_node_launch_meets_on_loopback_and_each_generation_on_its_own_port() -> None:
    launch = Launch(7, 4, (GpuPlace("gpu01", 0, "a"), GpuPlace("gpu01", 1, "b")), restart=False)
    assert agent.rank_env(launch, 1, "t")["MASTER_ADDR"] == "127.0.0.1"
    ports = {agent.master_port(7, generation) for generation in range(1, 50)}
    assert len(ports) > 45 and all(20000 <= port < 32000 for port in ports)


# --- apply and poll against the database -------------------------------------------------


def running(job: Job, node: Node, gpus: int, generation: int, state: str = JobState.RUNNING,
            command: str = "") -> Launch:
    """Put ``job`` on the node's first ``gpus`` GPUs a minute ago, as a round would; its launch."""
    start_at = timezone.now() - timedelta(seconds=60)
    held = list(Gpu.objects.filter(node=node).order_by("index")[:gpus])
    for gpu in held:
        Allocation.objects.create(job=job, gpu=gpu, started_at=start_at)
    Job.objects.filter(pk=job.pk).update(state=state, generation=generation, accounted_at=start_at, command=command,
                                         started_at=start_at)
    return Launch(job.pk, generation, tuple(GpuPlace(node.hostname, gpu.index, gpu.uuid) for gpu in held), False)


@pytest.mark.django_db
def test_a_launch_starts_one_process_per_gpu_then_poll_records_success(dirs: Path, job: Job, node: Node) -> None:
    command = f"{PY} -c \"import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], 'gpu', os.environ['CUDA_VISIBLE_DEVICES'])\""  # noqa: E501
    launch = running(job, node, 2, generation=3, state=JobState.RESCALING, command=command)
    assert agent.apply(to_message(launch), hostname="node1") == "generation 3: 2 rank(s) started here"
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING  # every node (one) started its ranks
    assert wait_for(lambda: all(files.read_exit(job.pk, 3, rank) for rank in (0, 1)))
    assert agent.poll("node1") == {job.pk: JobState.SUCCEEDED}
    job.refresh_from_db()
    assert (job.state, job.progress, job.generation, job.error) == (JobState.SUCCEEDED, job.total_work, 4, "")
    assert job.attained_gpu_seconds == pytest.approx(120, abs=10)
    assert not Allocation.objects.filter(job=job, ended_at__isnull=True).exists()
    assert log(job.pk, 3, 1) == "rank 1 of 2 gpu 1"
    assert agent.poll("node1") == {job.pk: "stopped: the job is over"}  # nothing of a finished job is kept
    assert agent.read_run("node1", job.pk) is None


@pytest.mark.django_db
def test_a_rank_exiting_non_zero_fails_the_job_with_the_end_of_its_log(dirs: Path, job: Job, node: Node) -> None:
    running(job, node, 2, generation=2)
    agent.write_run("node1", job.pk, agent.LocalRun(2, 2, {0: os.getpid(), 1: os.getpid()}))
    for folder in (files.exit_path(job.pk, 2, 0).parent, files.log_path(job.pk, 2, 1).parent):
        folder.mkdir(parents=True)
    write_exit(files.exit_path(job.pk, 2, 0), 0)
    files.log_path(job.pk, 2, 1).write_text("step=10\nTraceback (most recent call last):\nValueError: boom\n")
    write_exit(files.exit_path(job.pk, 2, 1), 2)
    assert agent.poll("node1") == {job.pk: JobState.FAILED}
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert job.error.startswith("rank 1 exited with code 2") and job.error.endswith("ValueError: boom")
    assert job.rescale_events.first().reason == "failed: rank 1 exited with code 2"


@pytest.mark.django_db
def test_a_rank_that_vanished_without_an_exit_code_fails_the_job(dirs: Path, job: Job, node: Node) -> None:
    running(job, node, 1, generation=2)
    gone = start([PY, "-c", "pass"], job.pk, generation=9)  # a pid that has ended
    assert wait_for(lambda: not agent.alive(gone))
    agent.write_run("node1", job.pk, agent.LocalRun(2, 1, {0: gone}))
    assert agent.poll("node1") == {job.pk: JobState.FAILED}
    assert "vanished without an exit code" in Job.objects.get(pk=job.pk).error


@pytest.mark.django_db
def test_ranks_still_running_and_older_generations_are_not_judged(dirs: Path, job: Job, node: Node) -> None:
    running(job, node, 2, generation=5)
    agent.write_run("node1", job.pk, agent.LocalRun(5, 2, {0: os.getpid(), 1: os.getpid()}))
    files.exit_path(job.pk, 5, 0).parent.mkdir(parents=True)
    write_exit(files.exit_path(job.pk, 5, 0), 0)
    assert agent.poll("node1") == {job.pk: "running"}  # rank 1 still runs
    write_exit(files.exit_path(job.pk, 5, 1), -15)  # stopped by us for generation 6
    Job.objects.filter(pk=job.pk).update(generation=6)
    assert agent.poll("node1") == {job.pk: "superseded: a newer launch is on its way"}
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING


@pytest.mark.django_db
def test_stale_and_repeated_generations_are_ignored(dirs: Path, job: Job, node: Node) -> None:
    launch = running(job, node, 1, generation=3, command=f"{PY} -c 'import time; time.sleep(60)'")
    older = Launch(job.pk, 2, launch.gpus, False)
    assert agent.apply(to_message(older), hostname="node1") == "ignored: generation 2 is stale"
    assert agent.read_run("node1", job.pk) is None and not files.log_path(job.pk, 2, 0).exists()
    agent.apply(to_message(launch), hostname="node1")
    first = agent.read_run("node1", job.pk)
    assert agent.apply(to_message(launch), hostname="node1") == "ignored: generation 3, this node runs 3"
    assert agent.read_run("node1", job.pk) == first
    stop = Launch(job.pk, 4, (), False)  # the job left this node
    Job.objects.filter(pk=job.pk).update(generation=4)
    assert agent.apply(to_message(stop), hostname="node1", grace=5) == "generation 4: 0 rank(s) started here"
    assert agent.read_run("node1", job.pk) is None and not agent.alive(first.pids[0])
    assert files.read_exit(job.pk, 3, 0)["code"] == -signal.SIGTERM


@pytest.mark.django_db
def test_poll_stops_the_ranks_of_a_cancelled_job(dirs: Path, job: Job, node: Node) -> None:
    launch = running(job, node, 1, generation=1, command=f"{PY} -c 'import time; time.sleep(60)'")
    agent.apply(to_message(launch), hostname="node1")
    pid = agent.read_run("node1", job.pk).pids[0]
    verbs.cancel_job(job)
    assert agent.poll("node1") == {job.pk: "stopped: the job is over"}
    assert not agent.alive(pid) and agent.read_run("node1", job.pk) is None


@pytest.mark.django_db
def test_a_job_without_a_command_fails_at_launch(dirs: Path, job: Job, node: Node) -> None:
    launch = running(job, node, 1, generation=1)
    agent.apply(to_message(launch), hostname="node1")
    job.refresh_from_db()
    assert (job.state, job.rescale_events.first().reason) == (JobState.FAILED, "failed: the job has no command")
