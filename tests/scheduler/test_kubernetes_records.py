"""The Kubernetes back-end's pure parts, without a lab: what it reads from the API's JSON and the Job it writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.backends import GpuPlace, Launch
from scheduler.backends.kubernetes.executor import still_leaving
from scheduler.backends.kubernetes.jobs import (
    JOB_LABEL,
    TAG_LABEL,
    WORLD_ANNOTATION,
    KubeJob,
    Placement,
    job_name,
    manifest,
)
from scheduler.backends.kubernetes.records import (
    Workload,
    add_warnings,
    node_record,
    observed,
    pod_gpus,
    quantity,
    waits_unsuspended,
    warnings_by_object,
    workloads,
)
from scheduler.backends.mirror import charge_runs
from scheduler.jobs import verbs
from scheduler.models import Job, JobState, Tenant

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def stamp(seconds: int) -> str:
    return (NOW + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(("value", "count"), [
    ("4", 4), (8, 8), ("500m", 0), ("1e3", 0), ("-1", 0), ("99999999", 0), (None, 0), ("4\n", 4), ("", 0),
])
def test_a_gpu_quantity_is_a_bounded_whole_number_or_none(value: object, count: int) -> None:
    assert quantity(value) == count


def test_a_node_is_usable_only_ready_uncordoned_and_untainted() -> None:
    ready = {"type": "Ready", "status": "True"}
    base = {"metadata": {"name": "gpu01", "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}},
            "status": {"allocatable": {"nvidia.com/gpu": "4"}, "conditions": [ready]}}
    node = node_record(base)
    assert (node.gpus, node.gpu_type, node.usable) == (4, "NVIDIA-A100-SXM4-40GB", True)
    assert node_record({**base, "spec": {"unschedulable": True}}).state == "cordoned"
    tainted = node_record({**base, "spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}})
    assert tainted.state == "tainted" and tainted.reason == "maintenance"
    assert node_record({**base, "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}).usable
    gone = node_record({**base, "status": {**base["status"], "conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}})
    assert (gone.state, gone.reason, gone.usable) == ("not ready", "NodeStatusUnknown", False)


def test_a_pod_asks_for_its_containers_gpus_limits_first() -> None:
    spec = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}},
                           {"resources": {"requests": {"nvidia.com/gpu": "1"}}}],
            "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    assert pod_gpus(spec) == 4  # the init container's 4 outweigh the 2 + 1 that run together
    assert pod_gpus({"containers": [{"resources": {"limits": {"nvidia.com/gpu": "lots"}}}]}) == 0


def test_a_job_and_its_pods_are_one_workload_and_a_waiting_one_says_why() -> None:
    job = {"metadata": {"uid": "u1", "name": "train", "namespace": "vision", "creationTimestamp": stamp(0)},
           "spec": {"parallelism": 2, "template": {"spec": {
               "nodeSelector": {"nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB"},
               "containers": [{"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}}
    pending = {"metadata": {"name": "train-abc", "namespace": "vision", "ownerReferences": [
        {"kind": "Job", "uid": "u1", "controller": True}]}, "spec": job["spec"]["template"]["spec"],
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                        "reason": "Unschedulable",
                                                        "message": "0/4 nodes are available:\n4 Insufficient gpu"}]}}
    lone_cpu_pod = {"metadata": {"uid": "u2", "name": "web"}, "spec": {"containers": [{}]}}
    found = workloads([job], [pending, lone_cpu_pod])
    assert [item.kind for item in found] == ["Job"]
    seen = observed(found[0], NOW)
    assert (seen.key, seen.tenant, seen.state, seen.requested_gpus, seen.gpu_type) == (
        "u1", "vision", JobState.PENDING, 8, "v100")
    assert seen.reason == "Unschedulable: 0/4 nodes are available: 4 Insufficient gpu"  # one line
    suspended = Workload("Job", {**job, "spec": {**job["spec"], "suspend": True}}, [], admission="Kueue: no quota")
    assert observed(suspended, NOW).reason == "suspended: Kueue: no quota"


def test_a_waiting_job_without_a_scheduling_condition_says_what_events_or_its_containers_say() -> None:
    job = {"metadata": {"uid": "j1", "name": "train", "namespace": "nlp"},
           "spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}
    events = [
        {"type": "Warning", "reason": "FailedCreate", "involvedObject": {"uid": "j1"}, "lastTimestamp": stamp(5),
         "message": 'Error creating: pods "train-x" is forbidden: exceeded quota: gpus'},
        {"type": "Warning", "reason": "Older", "involvedObject": {"uid": "j1"}, "lastTimestamp": stamp(1)},
        {"type": "Normal", "reason": "SuccessfulCreate", "involvedObject": {"uid": "j1"}, "lastTimestamp": stamp(9)},
        {"type": "Warning", "reason": "Other", "involvedObject": {"uid": "someone-else"}, "lastTimestamp": stamp(9)},
    ]
    found = workloads([job], [])
    assert waits_unsuspended(found[0])
    assert observed(found[0], NOW).reason == "waiting for its pods"  # before the events are read
    add_warnings(found, warnings_by_object(events))
    assert observed(found[0], NOW).reason == 'FailedCreate: Error creating: pods "train-x" is forbidden: exceeded ' \
                                             'quota: gpus'
    pulling = {"metadata": {"uid": "p1", "name": "train-y", "namespace": "nlp", "ownerReferences": [
        {"kind": "Job", "uid": "j1", "controller": True}]}, "spec": job["spec"]["template"]["spec"],
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
                   "containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff",
                                                                "message": "Back-off pulling image lab/nope"}}}]}}
    found = workloads([job], [pulling])
    add_warnings(found, warnings_by_object(events))
    assert observed(found[0], NOW).reason == "ImagePullBackOff: Back-off pulling image lab/nope"
    suspended = workloads([{**job, "spec": {**job["spec"], "suspend": True}}], [])
    assert not waits_unsuspended(suspended[0])  # its suspension says why: no events read for it


def test_gpu_time_is_each_runs_time_however_the_rounds_fall() -> None:
    """Two pods of 2 GPUs, one ending early; counted in three rounds, the total is what they ran."""
    job = Job(attained_gpu_seconds=0.0, accounted_at=None)
    runs = [(2, NOW, NOW + timedelta(seconds=10)), (2, NOW, None)]
    charge_runs(job, runs, ended=False, now=NOW + timedelta(seconds=7))  # counted to 5 s (2 s of lag)
    charge_runs(job, runs, ended=False, now=NOW + timedelta(seconds=9))  # to 7 s
    charge_runs(job, [(2, NOW, NOW + timedelta(seconds=10)), (2, NOW, NOW + timedelta(seconds=20))], ended=True,
                now=NOW + timedelta(seconds=30))
    assert job.attained_gpu_seconds == 2 * 10 + 2 * 20


def test_placements_match_whatever_rank_each_node_has() -> None:
    one = Placement(("gpu01", "gpu02"), 4)
    assert one.same_as(Placement(("gpu02", "gpu01"), 4))
    assert not one.same_as(Placement(("gpu01", "gpu03"), 4)) and not one.same_as(Placement(("gpu01", "gpu02"), 2))
    launch = Launch(1, 1, tuple(GpuPlace(host, index, f"{host}-{index}") for host in ("gpu02", "gpu01")
                                for index in range(2)), restart=False)
    assert Placement.of(launch) == Placement(("gpu02", "gpu01"), 2)


@pytest.mark.django_db
def test_a_waiting_job_is_one_suspended_pod_and_a_placed_one_a_pod_per_node(tenant: Tenant) -> None:
    job = verbs.submit_job(tenant=tenant, name="x", workload_profile="cifar10", total_work=10, min_gpus=2,
                           max_gpus=8, command="python train.py")
    job = Job.objects.select_related("tenant", "owner").get(pk=job.pk)
    waiting = manifest(job, None, suspend=True)
    assert waiting["spec"]["suspend"] and waiting["spec"]["parallelism"] == 1
    assert waiting["metadata"]["name"] == job_name(job) and waiting["metadata"]["namespace"] == tenant.name
    labels = waiting["metadata"]["labels"]
    assert labels[JOB_LABEL] == str(job.pk) and len(labels[TAG_LABEL]) == 12
    placed = manifest(job, Placement(("gpu01", "gpu02"), 4), suspend=False)["spec"]
    assert (placed["parallelism"], placed["completions"]) == (2, 2)
    template = placed["template"]
    assert template["metadata"]["annotations"][WORLD_ANNOTATION] == "2"
    container = template["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 4
    env = {item["name"]: item for item in container["env"]}
    assert "value" not in env["WORLD_SIZE"] and "RANK" in env  # from the pod's annotations: changeable when resized
    nodes = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert nodes["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["gpu01", "gpu02"]


def test_a_job_whose_pods_do_not_stop_is_named_with_their_nodes_and_what_frees_them(tenant: Tenant) -> None:
    job = verbs.submit_job(tenant=tenant.name, name="stuck", workload_profile="cifar10", total_work=10,
                           command="true")
    pods = [{"spec": {"nodeName": "gpu04"}, "status": {"phase": "Running"}},
            {"spec": {"nodeName": "gpu03"}, "status": {"phase": "Failed"}}]  # stopped: not named
    note = still_leaving(job, KubeJob({"metadata": {"uid": "u", "name": "n"}}, pods))
    assert note.startswith(f"job {job.pk}: placed anew once its pods on gpu04 have stopped;")
    assert "node.kubernetes.io/out-of-service" in note
