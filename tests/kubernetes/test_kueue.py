"""Kubernetes schedules through Kueue and the console watches: Kueue's admission, and why it holds a Job, mirrored —
against Kueue's own controller and CRDs in the lab."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from scheduler.live.round import run_round
from scheduler.models import Job, JobState, RoundStatus

from .conftest import RunningLab, wait_for

pytestmark = [pytest.mark.needs("kubernetes"), pytest.mark.timeout(300)]
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"


@pytest.fixture
def kueue(kubernetes: RunningLab) -> Iterator[client.CustomObjectsApi]:
    """A ClusterQueue of 4 GPUs and its LocalQueue ``team`` in vision, removed afterwards."""
    custom = client.CustomObjectsApi(kubernetes.api)
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}})
    custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": "gpus"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]}})
    custom.create_namespaced_custom_object(GROUP, VERSION, "vision", "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": "team"},
        "spec": {"clusterQueue": "gpus"}})
    try:
        yield custom
    finally:
        kubernetes.clean()  # the Jobs first: their Workloads go with them, then the queues can
        custom.delete_namespaced_custom_object(GROUP, VERSION, "vision", "localqueues", "team")
        custom.delete_cluster_custom_object(GROUP, VERSION, "clusterqueues", "gpus")
        custom.delete_cluster_custom_object(GROUP, VERSION, "resourceflavors", "gpu")


def workload_of(custom: client.CustomObjectsApi, job: client.V1Job) -> dict[str, Any] | None:
    items = custom.list_namespaced_custom_object(GROUP, VERSION, "vision", "workloads")["items"]
    return next((item for item in items if any(owner["uid"] == job.metadata.uid
                                               for owner in item["metadata"].get("ownerReferences") or [])), None)


def condition(workload: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    return next((item for item in ((workload or {}).get("status") or {}).get("conditions") or []
                 if item["type"] == kind), {})


def test_observer_mirrors_what_kueue_admits_and_why_it_holds_the_rest(kubernetes: RunningLab,
                                                                      kueue: client.CustomObjectsApi) -> None:
    # Created suspended and labelled with the queue, as Kueue's defaulting webhook would leave them.
    first = kubernetes.job("first", gpus=4, suspend=True, queue="team")
    wait_for(lambda: condition(workload_of(kueue, first), "Admitted").get("status") == "True", "first admitted")
    second = kubernetes.job("second", gpus=4, suspend=True, queue="team")
    wait_for(lambda: condition(workload_of(kueue, second), "QuotaReserved").get("message"), "second held by Kueue")
    wait_for(lambda: [pod.status.phase for pod in kubernetes.pods_of("first")] == ["Running"], "first running")
    before = {job.metadata.name: job.metadata.resource_version
              for job in kubernetes.batch.list_namespaced_job("vision").items}

    row = run_round()

    assert row.status == RoundStatus.OK and "observing Kubernetes: 2 Jobs" in row.note
    assert Job.objects.get(name="first").state == JobState.RUNNING
    held = Job.objects.get(name="second")
    message = " ".join(condition(workload_of(kueue, second), "QuotaReserved")["message"].split())
    assert held.state == JobState.PENDING and held.pending_reason == f"suspended: Kueue: {message}"[:300]
    assert "insufficient unused quota for nvidia.com/gpu" in held.pending_reason
    assert {job.metadata.name: job.metadata.resource_version
            for job in kubernetes.batch.list_namespaced_job("vision").items} == before  # watched, not touched

    kubernetes.batch.delete_namespaced_job("first", "vision", propagation_policy="Background")
    wait_for(lambda: condition(workload_of(kueue, second), "Admitted").get("status") == "True",
             "second admitted once first is gone")
    wait_for(lambda: any(pod.status.phase == "Running" for pod in kubernetes.pods_of("second")), "second running")
    run_round()
    held.refresh_from_db()
    assert (held.state, held.pending_reason) == (JobState.RUNNING, "")
