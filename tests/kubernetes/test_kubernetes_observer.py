"""Kubernetes schedules and the console watches — against a real API server, controller manager and scheduler."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.live.round import run_round
from scheduler.models import Allocation, Gpu, GpuHealth, Job, JobState, RoundStatus

from .conftest import RunningLab, wait_for

pytestmark = [pytest.mark.needs("kubernetes"), pytest.mark.timeout(300)]


def running_pods(lab: RunningLab, name: str, namespace: str = "vision") -> bool:
    return any(pod.status.phase == "Running" for pod in lab.pods_of(name, namespace))


def test_the_lab_runs_a_jobs_pod_with_the_gpu_ids_it_was_given_and_stops_it_gracefully(k8s_lab: RunningLab) -> None:
    nodes = {node.metadata.name: node for node in k8s_lab.core.list_node().items}
    assert sorted(nodes) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert nodes["gpu01"].status.allocatable["nvidia.com/gpu"] == "4"
    assert nodes["gpu03"].metadata.labels["nvidia.com/gpu.product"] == "Tesla-V100-SXM2-16GB"
    k8s_lab.job("stops", gpus=2, command="echo gpus=$CUDA_VISIBLE_DEVICES; trap 'echo checkpointed; exit 0' TERM; "
                                          "sleep 300 & wait")
    try:
        wait_for(lambda: running_pods(k8s_lab, "stops"), "the pod running")
        pod = k8s_lab.pods_of("stops")[0]
        log = k8s_lab.lab.path("pods", f"vision_{pod.metadata.name}.log")
        wait_for(lambda: log.exists() and "gpus=" in log.read_text(), "the pod's output")
        assert log.read_text().splitlines()[0] in {"gpus=0,1", "gpus=2,3"}
        k8s_lab.core.delete_namespaced_pod(pod.metadata.name, "vision", grace_period_seconds=20)
        wait_for(lambda: not any(p.metadata.uid == pod.metadata.uid for p in k8s_lab.pods_of("stops")),
                 "the pod gone once it stopped")
        assert "checkpointed" in log.read_text()  # SIGTERM first: it saved its work
    finally:
        k8s_lab.clean()


def test_observer_mirrors_jobs_made_with_the_client_and_changes_nothing(kubernetes: RunningLab) -> None:
    kubernetes.job("train", gpus=2, parallelism=2, product="NVIDIA-A100-SXM4-40GB")
    kubernetes.job("too-big", namespace="nlp", gpus=8)  # no node has 8: the scheduler says why it waits
    kubernetes.job("queued", namespace="research", gpus=1, suspend=True)
    wait_for(lambda: [pod.status.phase for pod in kubernetes.pods_of("train")] == ["Running"] * 2,
             "both pods of train running")
    wait_for(lambda: any(condition.reason == "Unschedulable" for pod in kubernetes.pods_of("too-big", "nlp")
                         for condition in pod.status.conditions or []), "too-big unschedulable")
    before = {job.metadata.uid: job.metadata.resource_version
              for namespace in ("vision", "nlp", "research") for job in kubernetes.batch.list_namespaced_job(
                  namespace).items}

    round_row = run_round()

    assert round_row.status == RoundStatus.OK and "observing Kubernetes: 3 Jobs" in round_row.note
    train = Job.objects.get(name="train")
    assert (train.tenant.name, train.state, train.min_gpus, train.gpu_type) == ("vision", JobState.RUNNING, 4, "a100")
    held = Allocation.objects.filter(job=train, ended_at__isnull=True).select_related("gpu__node")
    nodes = {pod.spec.node_name for pod in kubernetes.pods_of("train")}
    assert held.count() == 4 and {row.gpu.node.hostname for row in held} == nodes
    too_big = Job.objects.get(name="too-big")
    assert too_big.state == JobState.PENDING and "Insufficient nvidia.com/gpu" in too_big.pending_reason
    assert Job.objects.get(name="queued").pending_reason == "suspended"
    gpus = Gpu.objects.filter(uuid__startswith="k8s-")
    assert gpus.count() == 16 and {gpu.model for gpu in gpus} == {"NVIDIA-A100-SXM4-40GB", "Tesla-V100-SXM2-16GB"}
    after = {job.metadata.uid: job.metadata.resource_version
             for namespace in ("vision", "nlp", "research") for job in kubernetes.batch.list_namespaced_job(
                 namespace).items}
    assert after == before  # watched, not touched

    kubernetes.batch.delete_namespaced_job("too-big", "nlp", propagation_policy="Background")
    wait_for(lambda: not kubernetes.batch.list_namespaced_job("nlp").items, "too-big deleted")
    note = run_round().note
    assert "1 mirrored jobs deleted from Kubernetes: too-big" in note
    assert Job.objects.get(name="too-big").state == JobState.CANCELLED


def test_a_job_whose_pods_the_api_refuses_waits_with_the_controllers_event(kubernetes: RunningLab) -> None:
    """No pod, so no scheduling condition: the reason is the Job controller's Warning event."""
    quota = {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}}
    kubernetes.core.create_namespaced_resource_quota("nlp", quota)
    try:  # the quota enforced once its controller has counted what the namespace uses
        wait_for(lambda: (kubernetes.core.read_namespaced_resource_quota("gpus", "nlp").status.used or {}).get(
            "requests.nvidia.com/gpu") == "0", "the quota counted")
        kubernetes.job("over-quota", namespace="nlp", gpus=2)
        wait_for(lambda: any(event.reason == "FailedCreate" and event.involved_object.name == "over-quota"
                             for event in kubernetes.core.list_namespaced_event("nlp").items),
                 "the controller's FailedCreate")

        run_round()

        job = Job.objects.get(name="over-quota")
        assert job.state == JobState.PENDING and not kubernetes.pods_of("over-quota", "nlp")
        assert job.pending_reason.startswith("FailedCreate: Error creating: ") and "exceeded quota" in \
            job.pending_reason
    finally:
        kubernetes.core.delete_namespaced_resource_quota("gpus", "nlp")


def test_a_finished_job_is_mirrored_with_its_gpu_time(kubernetes: RunningLab) -> None:
    kubernetes.job("short", gpus=1, command="sleep 2")
    wait_for(lambda: kubernetes.batch.read_namespaced_job("short", "vision").status.succeeded, "short done")
    run_round()
    short = Job.objects.get(name="short")
    assert short.state == JobState.SUCCEEDED and short.finished_at is not None
    (pod,) = kubernetes.pods_of("short")
    ran = pod.status.container_statuses[0].state.terminated
    assert short.attained_gpu_seconds == (ran.finished_at - ran.started_at).total_seconds() >= 2  # its pod's time


@pytest.mark.parametrize("how", ["cordoned", "tainted", "not ready"])
def test_a_node_out_of_service_loses_its_gpus_within_one_round_and_gets_them_back(kubernetes: RunningLab,
                                                                                  how: str) -> None:
    run_round()
    if how == "cordoned":
        kubernetes.core.patch_node("gpu04", {"spec": {"unschedulable": True}})
    elif how == "tainted":
        kubernetes.core.patch_node("gpu04", {"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}})
    else:  # it stops answering: the lab's kubelet no longer renews it, and it is reported NotReady
        kubernetes.lab.path("nodes-down").write_text("gpu04\n")
        kubernetes.core.patch_node_status("gpu04", {"status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}})

    note = run_round().note

    assert f"GPUs lost with their nodes: gpu04 ({how}" in note
    assert set(Gpu.objects.filter(node__hostname="gpu04").values_list("health", flat=True)) == {GpuHealth.LOST}
    kubernetes.clean()
    wait_for(lambda: "nodes back in service: gpu04" in run_round().note, "gpu04 back", timeout=30)


def test_api_server_away_skips_the_round_with_the_reason_and_writes_nothing(kubernetes: RunningLab, settings,
                                                                            tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = json.loads(Path(settings.KUBECONFIG).read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # nothing listens there
    settings.KUBECONFIG = str(tmp_path / "away.kubeconfig")
    Path(settings.KUBECONFIG).write_text(json.dumps(config))

    row = run_round()

    assert row.status == RoundStatus.SKIPPED and "no answer to list nodes" in row.error
    assert not Job.objects.exists() and not Gpu.objects.exists()


def test_rbac_refusal_names_the_verb_and_the_resource(kubernetes: RunningLab, settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lab = kubernetes.module
    kubernetes.core.create_namespaced_service_account("cluster-ops", {"metadata": {"name": "nobody"}})
    try:
        token = kubernetes.core.create_namespaced_service_account_token(
            "nobody", "cluster-ops", {"spec": {"expirationSeconds": 600}}).status.token
        settings.KUBECONFIG = str(lab.write_kubeconfig(kubernetes.lab, "nobody", {"token": token}))

        row = run_round()

        assert row.status == RoundStatus.SKIPPED
        assert "forbids the console to list nodes (RBAC)" in row.error
    finally:
        kubernetes.core.delete_namespaced_service_account("nobody", "cluster-ops")
