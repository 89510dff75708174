"""The console schedules, a real Kubernetes executes: its queue as suspended Jobs, a start, a resize by suspend and
resume that keeps progress, a preemption, a cancel, a Job deleted behind its back, a namespace it lacks."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from scheduler.backends.kubernetes.accounting import read_pod_runs, reconcile
from scheduler.backends.kubernetes.client import connect
from scheduler.backends.kubernetes.jobs import ACCOUNTING_FINALIZER, REASON_ANNOTATION, job_name
from scheduler.jobs import verbs
from scheduler.live.config import scheduler_settings
from scheduler.live.round import run_round
from scheduler.models import Allocation, ExecutorKind, Job, JobState, RoundMemory, Tenant

from .conftest import REPO, RunningLab, wait_for

pytestmark = [pytest.mark.needs("kubernetes", "torch"), pytest.mark.timeout(600)]  # torch: the example job
START = re.compile(r"rank=0 world_size=(\d+) start_step=(\d+) resumed=(True|False) local_batch=\d+ devices=(\S+)")


def training_command(steps: int = 4000, step_seconds: float = 0.05) -> str:
    """The example elastic job: checkpoints every 10 steps and on SIGTERM, resumes from its checkpoint."""
    return (f"{sys.executable} {REPO / 'examples' / 'elastic_train.py'} --steps {steps} "
            f"--step-seconds {step_seconds} --checkpoint-every 10 --log-every 10 --report-every 1000000")


@pytest.fixture
def scheduling(kubernetes: RunningLab, settings: Any, tmp_path: Any) -> Iterator[RunningLab]:
    """The console deciding (Tiresias), Kubernetes running its jobs, their folders in this test's own."""
    settings.JOB_DIR = tmp_path / "jobs"
    row = scheduler_settings()
    row.executor, row.policy = ExecutorKind.KUBERNETES, "tiresias"
    row.save()
    for namespace in kubernetes.module.TENANTS:
        Tenant.objects.get_or_create(name=namespace)
    yield kubernetes


def logs(lab: RunningLab, job: Job) -> str:
    """Every pod log of the job's Job, in the lab's pods folder (the lab's kubelet writes them)."""
    pattern = f"{job.tenant.name}_{job_name(job)}-*"
    paths = sorted(lab.lab.path("pods").glob(pattern), key=lambda path: path.stat().st_ctime)  # the pods in order
    return "".join(path.read_text() for path in paths)


def starts(lab: RunningLab, job: Job) -> list[tuple[int, int, bool, str]]:
    """(world size, start step, resumed, CUDA_VISIBLE_DEVICES) of each start of rank 0."""
    return [(int(world), int(step), resumed == "True", devices)
            for world, step, resumed, devices in START.findall(logs(lab, job))]


def last_step(lab: RunningLab, job: Job) -> int:
    steps = re.findall(r"step=(\d+) loss", logs(lab, job))
    return max(map(int, steps)) if steps else 0


def kube_job(lab: RunningLab, job: Job) -> Any:
    return lab.batch.read_namespaced_job(job_name(job), job.tenant.name)


def running_pods(lab: RunningLab, job: Job, count: int, per_pod: int) -> list[Any]:
    def ready() -> list[Any] | None:
        pods = [pod for pod in lab.core.list_namespaced_pod(job.tenant.name, label_selector=f"job-name={job_name(job)}")
                .items if pod.metadata.deletion_timestamp is None]
        fine = len(pods) == count and all(pod.status.phase == "Running" and pod.spec.containers[0].resources.limits[
            "nvidia.com/gpu"] == str(per_pod) for pod in pods)
        return pods if fine else None
    return wait_for(ready, f"{count} pods of {per_pod} GPUs running for {job.name}", timeout=120)


def submitted(name: str, gpus: int, gpu_type: str, tenant: str = "vision") -> Job:
    return verbs.submit_job(tenant=tenant, name=name, workload_profile="cifar10", total_work=1000, min_gpus=gpus,
                            max_gpus=gpus, gpu_type=gpu_type, command=training_command())


def test_the_console_queue_is_suspended_jobs_with_the_reason_and_a_placed_job_runs_on_its_gpus(
        scheduling: RunningLab) -> None:
    run_round()  # the inventory
    placed = submitted("fits", 2, "v100", tenant="nlp")
    blocker = submitted("blocker", 8, "a100")  # every A100 of the lab: two pods of four
    run_round()
    waiting = submitted("waits", 4, "a100")

    run_round()

    waiting.refresh_from_db()
    queued = kube_job(scheduling, waiting)
    assert queued.spec.suspend and queued.metadata.annotations[REASON_ANNOTATION].startswith("Cluster Ops: ")
    assert waiting.state == JobState.PENDING and waiting.cluster_job_id == queued.metadata.uid
    pods = running_pods(scheduling, placed, 1, 2)
    placed.refresh_from_db()
    held = Allocation.objects.filter(job=placed, ended_at__isnull=True).select_related("gpu__node")
    assert {row.gpu.node.hostname for row in held} == {pods[0].spec.node_name}
    assert pods[0].spec.node_name in {"gpu03", "gpu04"}
    first = wait_for(lambda: starts(scheduling, placed), "the job's start in its log", timeout=180)
    assert first[0][:3] == (1, 0, False) and first[0][3].count(",") == 1  # two GPUs, from step 0

    running_pods(scheduling, blocker, 2, 4)

    verbs.cancel_job(Job.objects.get(pk=placed.pk))
    run_round()
    wait_for(lambda: not scheduling.batch.list_namespaced_job("nlp").items, "the cancelled job's Job deleted")
    # Its pods waited for the console's accounting finalizer: released with the Job gone, they go.
    wait_for(lambda: (run_round(), not scheduling.core.list_namespaced_pod("nlp").items)[1], "its pods gone")


def test_a_resize_suspends_patches_and_resumes_the_same_job_from_its_checkpoint(scheduling: RunningLab) -> None:
    run_round()
    job = submitted("grow", 2, "a100")
    run_round()
    running_pods(scheduling, job, 1, 2)
    wait_for(lambda: last_step(scheduling, job) >= 30, "30 steps at 2 GPUs", timeout=180)
    uid = kube_job(scheduling, job).metadata.uid

    verbs.set_gpu_bounds(job, 8, 8)  # both A100 nodes: two pods of four
    round_row = run_round()

    assert round_row.rescales == 1
    pods = running_pods(scheduling, job, 2, 4)
    assert {pod.spec.node_name for pod in pods} == {"gpu01", "gpu02"}
    assert kube_job(scheduling, job).metadata.uid == uid  # the same Job, suspended, patched and resumed
    runs = wait_for(lambda: len(found := starts(scheduling, job)) >= 2 and found, "the job's restart in its log",
                    timeout=180)
    world, step, resumed, devices = runs[-1]
    assert world == 2 and resumed and step >= 30 and devices.count(",") == 3  # from its checkpoint, on 2 × 4 GPUs
    wait_for(lambda: (run_round(), Job.objects.get(pk=job.pk).state)[1] == JobState.RUNNING, "running again")
    measured = RoundMemory.objects.get(pk=1).restarts
    assert len(measured) == 1 and 0 < measured[0] < 120  # this cluster's restart delay, from suspend to training
    # The pod the resize deleted is kept, ended, with its times: the GPU time reconciles over every pod.
    pods = scheduling.core.list_namespaced_pod("vision", label_selector=f"job-name={job_name(job)}").items
    kept = [pod for pod in pods if pod.metadata.deletion_timestamp]
    assert len(pods) == 3 and len(kept) == 1 and kept[0].status.phase in ("Succeeded", "Failed")
    assert ACCOUNTING_FINALIZER in kept[0].metadata.finalizers
    job.refresh_from_db()
    account = {account.console_id: account for account in reconcile(read_pod_runs(connect(
        scheduling.environment()["K8S_LAB_ADMIN_KUBECONFIG"])), job.accounted_at)}[job.pk]  # up to its last count
    assert not account.partial and abs(account.difference) <= 0.01 * account.pod_gpu_seconds


def test_preemption_suspends_the_job_and_it_resumes_later(scheduling: RunningLab) -> None:
    row = scheduler_settings()
    row.policy_config = {"thresholds": [30.0]}  # Tiresias: past 30 GPU-seconds a job yields to a newcomer
    row.save()
    run_round()
    old = submitted("old", 8, "v100")
    run_round()
    running_pods(scheduling, old, 2, 4)

    def charged_past_the_first_queue() -> bool:
        run_round()
        return Job.objects.get(pk=old.pk).attained_gpu_seconds > 30.0

    wait_for(charged_past_the_first_queue, "more than 30 GPU-seconds charged to the first job")
    wait_for(lambda: last_step(scheduling, old) >= 10, "a checkpoint of the first job", timeout=180)
    new = submitted("new", 8, "v100", tenant="nlp")

    round_row = run_round()

    assert round_row.preemptions == 1
    assert Job.objects.get(pk=old.pk).state == JobState.PREEMPTED
    wait_for(lambda: kube_job(scheduling, old).spec.suspend, "the preempted Job suspended")
    running_pods(scheduling, new, 2, 4)
    stopped_at = last_step(scheduling, old)

    verbs.cancel_job(Job.objects.get(pk=new.pk))
    run_round()
    running_pods(scheduling, old, 2, 4)
    runs = wait_for(lambda: len(found := starts(scheduling, old)) >= 2 and found, "the resumed job's start",
                    timeout=180)
    assert runs[-1][2] and runs[-1][1] >= stopped_at - 10  # resumed from its last checkpoint


def test_a_job_deleted_behind_the_consoles_back_is_reported_not_recreated(scheduling: RunningLab) -> None:
    run_round()
    job = submitted("doomed", 1, "v100")
    run_round()
    running_pods(scheduling, job, 1, 1)
    scheduling.batch.delete_namespaced_job(job_name(job), "vision", propagation_policy="Background")
    wait_for(lambda: not scheduling.batch.list_namespaced_job("vision").items, "the Job gone")

    note = run_round().note

    assert f"job {job.pk}: its Kubernetes Job was deleted outside the console" in note
    job.refresh_from_db()
    assert job.state == JobState.FAILED and "deleted outside the console" in job.error
    assert not scheduling.batch.list_namespaced_job("vision").items  # never recreated


def test_a_tenant_without_its_namespace_is_refused_by_the_field(scheduling: RunningLab) -> None:
    Tenant.objects.create(name="nowhere")  # the console has it; the cluster has no such namespace
    with pytest.raises(ValidationError) as refused:
        verbs.submit_job(tenant="nowhere", name="lost", workload_profile="cifar10", total_work=10,
                         command="true")
    assert "no namespace 'nowhere'" in str(refused.value.message_dict["tenant"])
    assert not Job.objects.filter(name="lost").exists()


def test_gpu_hours_reconcile_with_the_pods_lifetimes_within_one_percent(scheduling: RunningLab) -> None:
    run_round()
    jobs = [verbs.submit_job(tenant=tenant, name=f"short-{tenant}", workload_profile="cifar10", total_work=1000,
                             min_gpus=gpus, max_gpus=gpus, gpu_type="v100", command="sleep 6")
            for tenant, gpus in (("vision", 2), ("nlp", 4))]
    run_round()

    def all_done() -> bool:
        run_round()
        return all(Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED for job in jobs)

    wait_for(all_done, "both short jobs finished", timeout=120)

    accounts = {account.console_id: account for account in reconcile(read_pod_runs(connect(
        scheduling.environment()["K8S_LAB_ADMIN_KUBECONFIG"])), timezone.now())}
    for job, gpus in zip(jobs, (2, 4), strict=True):
        account = accounts[job.pk]
        assert not account.partial and account.pod_gpu_seconds >= gpus * 5  # each pod ran its six seconds
        assert abs(account.difference) <= 0.01 * account.pod_gpu_seconds


def test_a_waiting_job_resumed_outside_the_console_is_reported_and_suspended_again(scheduling: RunningLab) -> None:
    run_round()
    blocker = submitted("blocker", 8, "v100")
    run_round()
    running_pods(scheduling, blocker, 2, 4)
    waiting = submitted("waits", 4, "v100", tenant="nlp")
    run_round()
    assert kube_job(scheduling, waiting).spec.suspend
    scheduling.batch.patch_namespaced_job(job_name(waiting), "nlp", {"spec": {"suspend": False}})  # kubectl patch

    note = run_round().note

    assert f"job {waiting.pk}: its Job {job_name(waiting)} was resumed outside the console while it waits" in note
    assert kube_job(scheduling, waiting).spec.suspend
    assert Job.objects.get(pk=waiting.pk).state == JobState.PENDING


def test_a_node_that_stops_answering_loses_its_gpus_and_its_job_moves(scheduling: RunningLab) -> None:
    run_round()
    job = submitted("moves", 2, "v100")
    run_round()
    first = running_pods(scheduling, job, 1, 2)[0].spec.node_name
    other = ({"gpu03", "gpu04"} - {first}).pop()
    wait_for(lambda: last_step(scheduling, job) >= 10, "a checkpoint", timeout=180)
    scheduling.lab.path("nodes-down").write_text(f"{first}\n")  # its kubelet stops renewing it
    scheduling.core.patch_node_status(first, {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}})

    note = run_round().note

    assert f"GPUs lost with their nodes: {first} (not ready" in note
    moved = running_pods(scheduling, job, 1, 2)
    assert moved[0].spec.node_name == other
    runs = wait_for(lambda: len(found := starts(scheduling, job)) >= 2 and found, "the moved job's start",
                    timeout=180)
    assert runs[-1][2] and runs[-1][1] >= 10  # resumed from its checkpoint on the other node
