"""The console schedules, a real Slurm executes: start, resize, preemption, a drained node, an outage."""

from __future__ import annotations

import pwd
import re
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from scheduler.backends.files import SLURM_LOG, job_dir
from scheduler.backends.slurm.client import parse_gres
from scheduler.backends.slurm.executor import REQUEUE_WAIT_SECONDS
from scheduler.jobs import verbs
from scheduler.live.config import scheduler_settings
from scheduler.live.round import run_round
from scheduler.models import (
    Allocation,
    ClusterLogin,
    Gpu,
    GpuHealth,
    Job,
    JobState,
    RescaleEvent,
    RescaleKind,
    RoundMemory,
    RoundStatus,
)
from tests.api.conftest import token_client

from .conftest import RunningLab, training_command, wait_for

pytestmark = [pytest.mark.needs("slurm", "torch"), pytest.mark.timeout(600)]  # torch: the example job
START = re.compile(r"start_step=(\d+) resumed=(True|False) local_batch=\d+ devices=(\S+)")


def log_of(job: Job) -> str:
    path = Path(job_dir(job.pk)) / "logs" / "slurm.log"
    return path.read_text() if path.exists() else ""


def starts(job: Job) -> list[tuple[int, bool, str]]:
    """(start step, resumed, CUDA_VISIBLE_DEVICES) of each start of the example job, from its log."""
    return [(int(step), resumed == "True", devices) for step, resumed, devices in START.findall(log_of(job))]


def last_step(job: Job) -> int:
    steps = re.findall(r"step=(\d+) loss", log_of(job))
    return int(steps[-1]) if steps else 0


def held_by_console(job: Job) -> dict[str, int]:
    """Node → GPUs of the job's open allocations."""
    held: dict[str, int] = {}
    for hostname in Allocation.objects.filter(job=job, ended_at__isnull=True).values_list("gpu__node__hostname",
                                                                                          flat=True):
        held[hostname] = held.get(hostname, 0) + 1
    return held


def running_in_slurm(slurm: RunningLab, job: Job, gpus: int) -> dict[str, str]:
    """Wait until the job's Slurm job runs with ``gpus`` per node; its squeue line."""
    job.refresh_from_db()
    return wait_for(lambda: (line := slurm.squeue(job.cluster_job_id)).get("state") == "RUNNING"
                    and line["gres"].endswith(f":{gpus}") and line, f"Slurm job of {job} running on {gpus} GPUs")


def started(slurm: RunningLab, name: str, gpus: int, gpu_type: str, tenant: str = "vision") -> tuple[Job, dict]:
    """A rigid example job submitted and placed by a round; with its squeue line once it runs in Slurm."""
    run_round()  # the inventory
    job = verbs.submit_job(tenant=tenant, name=name, workload_profile="cifar10", total_work=1000,
                              min_gpus=gpus, max_gpus=gpus, gpu_type=gpu_type, command=training_command())
    run_round()
    return job, running_in_slurm(slurm, job, gpus if gpus <= 4 else 4)


def test_inventory_comes_from_slurm(slurm: RunningLab) -> None:
    result = run_round()
    assert result.status == RoundStatus.OK
    gpus = Gpu.objects.values_list("node__hostname", "index", "model")
    assert len(gpus) == 16
    assert {(host, model) for host, _, model in gpus} == {
        ("gpu01", "a100"), ("gpu02", "a100"), ("gpu03", "v100"), ("gpu04", "v100")}


def test_a_job_submitted_through_the_api_runs_in_slurm_as_its_owner_on_the_decided_gpus(slurm: RunningLab,
                                                                                        operator: User) -> None:
    """The owner's cluster login (set in admin; here alice, a Unix user of the lab's nodes) is the Slurm job's user:
    in squeue, in sacct and as the owner of the files it writes."""
    ClusterLogin.objects.create(user=operator, login="alice")
    run_round()  # the inventory
    response = token_client(operator).post("/api/jobs/", {
        "tenant": "vision", "name": "resnet", "workload_profile": "cifar10", "total_work": 1000,
        "min_gpus": 2, "max_gpus": 2, "gpu_type": "v100", "command": training_command(),
    }, format="json")
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])

    round_row = run_round()

    assert round_row.starts == 1
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.cluster_job_id
    line = running_in_slurm(slurm, job, 2)
    decided = held_by_console(job)
    assert decided == {line["nodes"]: 2}  # exactly the node the console decided, with its GPU count
    assert parse_gres(line["gres"]) == ("v100", 2)  # squeue says gres:gpu:… (22.05) or gres/gpu:… (24.11)
    first = wait_for(lambda: starts(job), "the job's first start in its log")
    assert first[0][2].count(",") == 1  # CUDA_VISIBLE_DEVICES names the 2 GPUs Slurm allocated
    assert RescaleEvent.objects.filter(job=job, kind=RescaleKind.START).exists()
    assert slurm.run("squeue", "-h", "-j", job.cluster_job_id, "-o", "%u").strip() == "alice"
    assert wait_for(lambda: slurm.run("sacct", "-n", "-X", "-j", job.cluster_job_id, "-o", "User%20").strip(),
                    "the job in sacct") == "alice"
    alice = pwd.getpwnam("alice").pw_uid
    assert (job_dir(job.pk) / "logs" / SLURM_LOG).stat().st_uid == alice  # written by the job, as alice
    assert job_dir(job.pk).stat().st_uid == alice


def test_a_submission_slurm_would_refuse_for_its_owner_is_a_400_naming_the_field(slurm: RunningLab,
                                                                                  operator: User) -> None:
    """bob may submit to vision and nlp, not research; a login that is no Unix name cannot be a Slurm user."""
    run_round()
    login = ClusterLogin.objects.create(user=operator, login="bob")
    job = {"tenant": "research", "name": "x", "workload_profile": "cifar10", "total_work": 1000, "min_gpus": 1,
           "max_gpus": 1, "command": "true"}
    refused = token_client(operator).post("/api/jobs/", job, format="json")
    assert refused.status_code == 400
    assert "Slurm user 'bob' may not submit to account 'research'" in refused.json()["tenant"][0]
    assert token_client(operator).post("/api/jobs/", {**job, "tenant": "nlp"}, format="json").status_code == 201
    login.login = "Bob Smith"
    login.save()
    refused = token_client(operator).post("/api/jobs/", {**job, "tenant": "nlp"}, format="json")
    assert refused.status_code == 400 and "is not a Unix user name" in refused.json()["owner"][0]
    assert Job.objects.filter(tenant__name="research").count() == 0 and Job.objects.count() == 1


def test_a_resize_from_2_to_4_gpus_is_checkpoint_requeue_resize_release_and_keeps_progress(
        slurm: RunningLab) -> None:
    job, _ = started(slurm, "grow", 2, "a100")
    wait_for(lambda: last_step(job) >= 30, "30 steps at 2 GPUs")
    slurm_id = job.cluster_job_id

    verbs.set_gpu_bounds(job, 4, 4)
    round_row = run_round()

    assert round_row.rescales == 1
    line = running_in_slurm(slurm, job, 4)
    job.refresh_from_db()
    assert job.cluster_job_id == slurm_id  # the same Slurm job, requeued and resized
    assert held_by_console(job) == {line["nodes"]: 4}
    both = wait_for(lambda: len(runs := starts(job)) >= 2 and runs, "the job's restart in its log")
    step, resumed, devices = both[-1]
    assert resumed and step >= 30  # it resumed from its checkpoint, not from zero
    assert devices.count(",") == 3  # and now sees 4 GPUs
    assert "restarts=1" in slurm.run("scontrol", "show", "job", slurm_id).replace("Restarts=", "restarts=")
    assert RescaleEvent.objects.filter(job=job, kind=RescaleKind.RESCALE).exists()
    run_round()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING  # rescaling → running once Slurm runs it again
    measured = RoundMemory.objects.get(pk=1).restarts
    assert len(measured) == 1 and 0 < measured[0] < 120  # this cluster's restart delay, from requeue to training


def test_two_resizes_in_one_round_are_requeued_together(slurm: RunningLab) -> None:
    first, _ = started(slurm, "first", 1, "v100")
    second, _ = started(slurm, "second", 1, "v100", tenant="nlp")
    for job in (first, second):
        wait_for(lambda job=job: last_step(job) >= 10, f"{job} checkpointed once")
        verbs.set_gpu_bounds(job, 2, 2)

    round_row = run_round()

    assert round_row.rescales == 2
    for job in (first, second):
        running_in_slurm(slurm, job, 2)
    assert round_row.launch_ms < REQUEUE_WAIT_SECONDS * 1000  # one wait for both, not one each


def test_preemption_requeues_and_holds_and_the_job_resumes_later(slurm: RunningLab) -> None:
    """Tiresias with a 30 GPU-second first queue: a long runner is preempted by a newcomer, then resumes."""
    set_policy_config({"thresholds": [30.0]})
    old, _ = started(slurm, "old", 8, "v100")
    wait_for(lambda: last_step(old) >= 20, "20 steps of the first job")

    def charged_past_the_first_queue() -> bool:
        run_round()  # charges its Slurm time (whole seconds, as Slurm counts them)
        old.refresh_from_db()
        return old.attained_gpu_seconds > 30.0

    # by service charged, not by steps: how long 20 steps take depends on the machine
    wait_for(charged_past_the_first_queue, "more than 30 GPU-seconds charged to the first job")
    new = verbs.submit_job(tenant="nlp", name="new", workload_profile="cifar10", total_work=1000,
                              min_gpus=8, max_gpus=8, gpu_type="v100", command=training_command())

    round_row = run_round()

    assert round_row.preemptions == 1 and round_row.starts == 1
    old.refresh_from_db()
    assert old.state == JobState.PREEMPTED
    held = wait_for(lambda: (line := slurm.squeue(old.cluster_job_id)).get("state") == "PENDING" and line,
                    "the preempted job back in Slurm's queue")
    assert "held" in held["reason"] or held["reason"] == "JobHeldUser"
    running_in_slurm(slurm, new, 4)
    stopped_at = last_step(old)

    verbs.cancel_job(Job.objects.get(pk=new.pk))
    resumed = run_round()  # the cancel reaches Slurm, and the freed GPUs go back to the preempted job

    assert resumed.starts == 1
    # one look: the cancelled job may leave Slurm's queue between two calls
    assert slurm.squeue(new.cluster_job_id).get("state") != "RUNNING"
    running_in_slurm(slurm, old, 4)
    runs = wait_for(lambda: len(r := starts(old)) >= 2 and r, "the resumed job's start")
    assert runs[-1][1] and runs[-1][0] >= stopped_at - 10  # resumed from its last checkpoint


def test_a_node_drained_mid_job_moves_its_job(slurm: RunningLab) -> None:
    job, line = started(slurm, "moved", 2, "v100")
    first_node = line["nodes"]

    slurm.run("scontrol", "update", f"NodeName={first_node}", "State=DRAIN", "Reason=hardware check")
    round_row = run_round()

    assert Gpu.objects.filter(node__hostname=first_node).exclude(health=GpuHealth.LOST).count() == 0
    assert "hardware check" in round_row.note
    line = wait_for(lambda: (line := slurm.squeue(job.cluster_job_id)).get("state") == "RUNNING"
                    and line["nodes"] != first_node and line, "the job running on another node")
    job.refresh_from_db()
    assert held_by_console(job) == {line["nodes"]: 2}


def test_a_slurm_outage_skips_rounds_loses_nothing_and_reconciles_after(slurm: RunningLab) -> None:
    running, _ = started(slurm, "survivor", 1, "a100")
    events_before = RescaleEvent.objects.count()

    slurm.stop_controller()
    try:
        waiting = verbs.submit_job(tenant="nlp", name="arrived meanwhile", workload_profile="cifar10",
                                      total_work=1000, min_gpus=1, max_gpus=1, gpu_type="a100",
                                      command=training_command())
        outage_began = time.monotonic()
        skipped = []
        while time.monotonic() - outage_began < 60:  # a minute without Slurm: every round skipped, none hangs
            began = time.monotonic()
            skipped.append(run_round())
            assert time.monotonic() - began < 30
            time.sleep(5)
    finally:
        slurm.start_controller()

    assert skipped and all(row.status == RoundStatus.SKIPPED for row in skipped)
    assert "could not be read" in skipped[0].error and "slurmrestd" in skipped[0].error
    assert RescaleEvent.objects.count() == events_before  # nothing decided, nothing written
    waiting.refresh_from_db()
    assert waiting.state == JobState.PENDING and not waiting.cluster_job_id

    back = wait_for(lambda: (row := run_round()).status == RoundStatus.OK and row, "a round once Slurm is back")
    assert back.starts == 1
    running_in_slurm(slurm, waiting, 1)
    running.refresh_from_db()
    assert running.state == JobState.RUNNING and slurm.squeue(running.cluster_job_id)["state"] == "RUNNING"


def test_a_slurm_job_the_console_does_not_know_is_reported_and_left_alone(slurm: RunningLab) -> None:
    stranger = slurm.run("sbatch", "--parsable", "-A", "research", "--gres=gpu:1", "--comment=cluster-ops:999999",
                         "--wrap", "sleep 120").strip()
    round_row = wait_for(lambda: (row := run_round()) and f"Slurm job {stranger}" in row.note and row,
                         "the stranger reported")
    assert "left alone" in round_row.note
    assert slurm.squeue(stranger)["state"] in {"RUNNING", "PENDING"}
    assert not Job.objects.filter(cluster_job_id=stranger).exists()


def set_policy_config(config: dict[str, object]) -> None:
    row = scheduler_settings()
    row.policy_config = config
    row.save()


def test_waiting_console_jobs_are_held_in_squeue_found_again_and_cancelled_with_them(slurm: RunningLab) -> None:
    """squeue shows the console's queue: a job that waits is held in Slurm under its comment; placed, the same
    Slurm job is pinned and released; a console that lost the Slurm id finds it again by the comment; a cancel in
    the console cancels it."""
    run_round()  # the inventory
    fillers = [verbs.submit_job(tenant="vision", name=f"fill-{n}", workload_profile="cifar10", total_work=1000,
                                min_gpus=4, max_gpus=4, gpu_type="a100", command="sleep 300") for n in range(2)]
    waiting = verbs.submit_job(tenant="vision", name="waits", workload_profile="cifar10", total_work=1000,
                               min_gpus=4, max_gpus=4, gpu_type="a100", command="sleep 300")
    run_round()
    waiting.refresh_from_db()
    assert waiting.state == JobState.PENDING and waiting.cluster_job_id
    line = slurm.squeue(waiting.cluster_job_id)
    assert line["state"] == "PENDING" and line["reason"] == "JobHeldUser"
    note = slurm.run("squeue", "-h", "-j", waiting.cluster_job_id, "-O", "admin_comment:200").strip()
    assert note.startswith("Cluster Ops: ")  # the console's reason, where squeue shows it
    for filler in fillers:  # placed: pinned, released, and started by Slurm
        running_in_slurm(slurm, filler, 4)
    held = {i for i, state, comment in (row.split("|") for row in slurm.run(
        "squeue", "-h", "-t", "PENDING", "-o", "%i|%T|%k").split()) if comment.startswith("cluster-ops:")}
    assert held == {waiting.cluster_job_id}  # the console's waiting jobs, and only those

    first = waiting.cluster_job_id
    Job.objects.filter(pk=waiting.pk).update(cluster_job_id="")  # a console that lost the answer
    run_round()
    waiting.refresh_from_db()
    assert waiting.cluster_job_id == first  # found again by its comment, not submitted twice
    assert len(slurm.run("squeue", "-h", "-t", "PENDING", "-o", "%i").split()) == 1

    verbs.cancel_job(waiting)
    run_round()
    assert wait_for(lambda: slurm.squeue(waiting.cluster_job_id).get("state") in (None, "CANCELLED"),
                    "the held Slurm job cancelled with its console job")
    assert all(job.refresh_from_db() or job.state == JobState.RUNNING for job in fillers)
