"""Slurm schedules and the console watches; the console's GPU-hours against sacct; bad input refused by name."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from cluster_ops.reports.content import build_content
from cluster_ops.reports.periods import Period
from scheduler.backends.slurm.accounting import reconcile
from scheduler.backends.slurm.client import JobSpec, RestTransport, SlurmRefused, SlurmUnavailable, connect
from scheduler.jobs import verbs
from scheduler.live.config import scheduler_settings
from scheduler.live.round import run_round
from scheduler.models import Allocation, ClusterFairness, ClusterLogin, ExecutorKind, Job, JobState, Tenant
from tests.api.conftest import token_client

from .conftest import RunningLab, training_command, wait_for

pytestmark = [pytest.mark.needs("slurm", "torch"), pytest.mark.timeout(600)]  # torch: the example job


def observe_only() -> None:
    row = scheduler_settings()
    row.executor = ExecutorKind.SLURM_OBSERVER
    row.save()


def test_observer_mirrors_jobs_submitted_with_sbatch_and_changes_nothing(slurm: RunningLab) -> None:
    observe_only()
    running = slurm.run("sbatch", "--parsable", "-A", "vision", "-J", "observed", "--gres=gpu:a100:3",
                        "--time=10", "--wrap", "sleep 300").strip()
    wait_for(lambda: slurm.squeue(running).get("state") == "RUNNING", "the sbatch job running")
    waiting = slurm.run("sbatch", "--parsable", "-A", "nlp", "--gres=gpu:v100:4", "--time=5", "--begin=now+3600",
                        "--wrap", "sleep 10").strip()  # waits an hour: Slurm's reason is BeginTime
    before = {job_id: slurm.squeue(job_id) for job_id in (running, waiting)}

    round_row = run_round()

    assert "observing Slurm" in round_row.note
    mirrored = Job.objects.get(cluster_job_id=running)
    assert (mirrored.tenant.name, mirrored.name, mirrored.state) == ("vision", "observed", JobState.RUNNING)
    assert (mirrored.min_gpus, mirrored.gpu_type, mirrored.time_limit_seconds) == (3, "a100", 600)
    assert mirrored.expected_seconds is None  # a limit, not an estimate: the forecast predicts its run
    assert mirrored.cluster_user == slurm.run("squeue", "-h", "-j", running, "-o", "%u").strip()
    assert mirrored.cluster_priority is not None
    reading = ClusterFairness.objects.get()  # Slurm's own fair share, read by the round
    users = {(row["account"], row["user"]) for row in reading.data["shares"]}
    assert {("research", "alice"), ("vision", "alice"), ("vision", "bob"), ("nlp", "bob")} <= users
    assert all(0 <= row["fair_share"] <= 1 for row in reading.data["shares"] if row["user"])
    held = Allocation.objects.filter(job=mirrored, ended_at__isnull=True)
    assert held.count() == 3 and {a.gpu.node.hostname for a in held} == {before[running]["nodes"]}
    pending = Job.objects.get(cluster_job_id=waiting)
    assert (pending.state, pending.pending_reason) == (JobState.PENDING, "BeginTime")  # Slurm's own reason
    assert {job_id: slurm.squeue(job_id) for job_id in (running, waiting)} == before  # nothing changed in Slurm

    slurm.run("scancel", running)
    wait_for(lambda: slurm.squeue(running).get("state") in {"CANCELLED", None} or not slurm.squeue(running),
             "the cancel")
    run_round()
    mirrored.refresh_from_db()
    assert mirrored.state == JobState.CANCELLED
    assert not Allocation.objects.filter(job=mirrored, ended_at__isnull=True).exists()
    assert mirrored.attained_gpu_seconds > 0


def test_gpu_hours_agree_with_sacct_after_a_start_a_resize_and_a_finish(slurm: RunningLab) -> None:
    started = timezone.now() - timedelta(minutes=1)
    run_round()
    job = verbs.submit_job(tenant="research", name="ledger", workload_profile="cifar10", total_work=1000,
                              min_gpus=1, max_gpus=1, gpu_type="a100", command=training_command(steps=150))
    run_round()
    wait_for(lambda: "step=40 " in _log(job), "40 steps")
    verbs.set_gpu_bounds(job, 2, 2)
    run_round()  # requeue at 2 GPUs
    wait_for(lambda: (run_round(), Job.objects.get(pk=job.pk).state)[1] == JobState.SUCCEEDED,
             "the job finished", timeout=120)

    job.refresh_from_db()
    result = reconcile(connect(), started, timezone.now() + timedelta(minutes=1), timezone.now())
    account = next(a for a in result.jobs if int(job.cluster_job_id) in a.slurm_ids)
    assert account.console_id == job.pk
    # Two runs (1 GPU, then 2): the console charged what Slurm ran, up to the seconds a requeue takes to land.
    assert account.slurm_gpu_seconds > 0
    assert abs(account.difference) <= max(5.0, 0.05 * account.slurm_gpu_seconds), account
    totals = result.totals("tenant")["research"]
    assert abs(totals[0] - totals[1]) <= max(5.0, 0.05 * totals[1])

    # A report of the period says how its GPU-hours (allocations: requeue windows included) stand beside sacct's.
    report = build_content(Period("custom", started, timezone.now() + timedelta(minutes=1)), None, timezone.now())
    beside = [note for note in report.notes if "beside Slurm's accounting" in note]
    assert beside and re.search(r"research \d+\.\d\d here, \d+\.\d\d in sacct \([+-]\d+\.\d%\)", beside[0])


def _log(job: Job) -> str:
    from scheduler.backends.files import job_dir

    path = job_dir(job.pk) / "logs" / "slurm.log"
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize(("field", "body", "message"), [
    ("script_path", {"script_path": "../../../etc/passwd"}, "folder of allowed scripts"),
    ("script_path", {"script_path": "/etc/passwd"}, "folder of allowed scripts"),
    ("script_path", {"script_path": "missing.sh"}, "No executable script"),
    ("gpu_type", {"gpu_type": "h100"}, "No h100 GPUs"),
    ("tenant", {"tenant": "no-such-account"}, "not an account in Slurm"),
])
def test_bad_submissions_are_refused_by_name_and_write_nothing(slurm: RunningLab, operator: User, field: str,
                                                                body: dict[str, str], message: str) -> None:
    run_round()  # the inventory
    Tenant.objects.get_or_create(name="no-such-account")  # a console tenant that Slurm has no account for
    response = token_client(operator).post("/api/jobs/", {
        "tenant": "vision", "name": "bad", "workload_profile": "cifar10", "total_work": 10, **body,
    }, format="json")

    assert response.status_code == 400
    assert message in json.dumps(response.json()[field])
    assert "root:" not in response.content.decode()  # never a file's contents
    assert not Job.objects.filter(name="bad").exists()


def test_a_script_in_the_allowed_folder_runs(slurm: RunningLab, operator: User) -> None:
    ClusterLogin.objects.create(user=operator, login="alice")  # a user of the lab's nodes, in vision
    run_round()
    folder = Path(slurm.lab.environment()["SLURM_SCRIPT_DIR"])
    script = folder / "hello.sh"
    script.write_text("#!/bin/bash\necho hello from $SLURM_JOB_ID on $CUDA_VISIBLE_DEVICES\n")
    script.chmod(0o755)
    response = token_client(operator).post("/api/jobs/", {
        "tenant": "vision", "name": "scripted", "workload_profile": "cifar10", "total_work": 10,
        "script_path": "hello.sh"}, format="json")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.script_path == str(script.resolve())
    run_round()
    wait_for(lambda: (run_round(), Job.objects.get(pk=job.pk).state)[1] == JobState.SUCCEEDED, "the script's end")
    assert "hello from" in _log(job)


def test_a_slurm_refusal_names_slurms_error(slurm: RunningLab) -> None:
    client = connect()
    with pytest.raises(SlurmRefused, match=r"Invalid account.*Slurm error 2045"):
        client.rest.submit(JobSpec(name="x", account="nobody", script="#!/bin/bash\ntrue\n", comment="",
                                   working_directory="/tmp", output="/dev/null", gres="gpu:a100:1"))


@pytest.fixture
def odd_server() -> Iterator[str]:
    """A server that answers like a broken proxy in front of slurmrestd: HTML, then nothing useful."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = b"<html>secret internal page root:x:0:0</html>"
            self.send_response(502 if self.path.endswith("nodes") else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_rest_error_body_that_is_not_slurms_is_named_not_echoed(odd_server: str) -> None:
    transport = RestTransport(odd_server, "root", "token", timeout=3)
    with pytest.raises(SlurmRefused) as refused:
        transport.call("GET", "/openapi")
    assert "not JSON" in str(refused.value) and "secret" not in str(refused.value)
    with pytest.raises(SlurmUnavailable) as bad_gateway:  # a proxy's 502: Slurm is away, the round skips
        transport.call("GET", "/slurm/v0.0.38/nodes")
    assert "HTTP 502" in str(bad_gateway.value) and "root:x" not in str(bad_gateway.value)


def test_no_answer_is_unavailable_within_the_timeout() -> None:
    transport = RestTransport("http://127.0.0.1:9", "root", "token", timeout=2)  # port 9: nobody listens
    with pytest.raises(SlurmUnavailable, match="no answer"):
        transport.call("GET", "/openapi")


def test_sacct_history_becomes_the_what_ifs_history(slurm: RunningLab) -> None:
    """The last days of sacct mirrored: each job's real length is what the what-if replays."""
    from django.core.management import call_command

    from scheduler.whatif.history import history_workload

    run_round()
    ran = slurm.run("sbatch", "--parsable", "-A", "nlp", "--gres=gpu:v100:2", "--wrap", "sleep 3").strip()
    wait_for(lambda: slurm.squeue(ran).get("state", "COMPLETED") == "COMPLETED", "the job to end")
    # slurmctld sends a job's records to slurmdbd asynchronously: squeue can say it ended before sacct has its
    # allocation, and the import mirrors only the jobs sacct shows with GPUs. Wait on the import's own query (its
    # window of days, JSON), which a CI run once saw lag behind ``sacct -j``.
    wait_for(lambda: _accounted(int(ran)), "sacct's window of the last day to hold the job's end and its GPUs")

    call_command("slurm_import_history", "--days", "1")

    job = Job.objects.get(cluster_job_id=ran)
    assert (job.state, job.tenant.name, job.min_gpus) == (JobState.SUCCEEDED, "nlp", 2)
    assert 2 <= job.total_work <= 10 and job.total_work == job.progress  # seconds it ran
    replayed = {w.id: w for w in history_workload(timezone.now() - timedelta(days=1), timezone.now())}
    assert replayed[str(job.pk)].total_work == job.total_work and replayed[str(job.pk)].profile is None


def _accounted(job_id: int) -> bool:
    now = timezone.now()
    runs = connect().commands.accounting(now - timedelta(days=1), now)
    return any(run.job_id == job_id and run.state.startswith("COMPLETED") and run.gpus > 0 for run in runs)
