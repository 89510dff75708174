"""A real Kubernetes for the Kubernetes back-end's tests, started once per session by ``scripts/k8s_lab.py``.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler are Kubernetes' own programs (v1.37.2), and Kueue's
controller (v0.17.0) with its CRDs, built from the Go module proxy once per machine. The one fake is at the hardware
seam: the lab's kubelet runs each pod as a process of this host and its GPUs are ids it hands out (there is no GPU
and no container runtime). Each test leaves the lab as it found it: its Jobs and pods deleted, its nodes back in
service.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes import client, config

from scheduler.live.config import scheduler_settings
from scheduler.models import ExecutorKind
from tests import prerequisites
from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
# Away from `make k8s-lab`'s 16443, so a lab an operator runs is left alone; another checkout's suite may pick its own.
LAB_PORT = int(os.environ.get("K8S_TEST_LAB_PORT") or 26443)
pytestmark = pytest.mark.needs("kubernetes")


class RunningLab:
    """The lab, and its administrator's view of the API (what `kubectl` would show)."""

    def __init__(self, module: ModuleType, lab: Any) -> None:
        self.module, self.lab = module, lab
        self.api = config.new_client_from_config(str(lab.path("admin.kubeconfig")))
        self.core, self.batch = client.CoreV1Api(self.api), client.BatchV1Api(self.api)

    def environment(self) -> dict[str, str]:
        return self.lab.environment()

    def job(self, name: str, namespace: str = "vision", gpus: int = 1, command: str = "sleep 300",
            parallelism: int = 1, suspend: bool = False, product: str = "", queue: str = "") -> client.V1Job:
        """A Job as a user would create it with kubectl: ``parallelism`` pods, each asking ``gpus``; in Kueue's
        LocalQueue ``queue`` if given."""
        container = {"name": "main", "image": "lab/python", "command": ["/bin/sh", "-c", command],
                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}
        pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
        if product:
            pod_spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
        labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
                "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                         "suspend": suspend, "template": {"spec": pod_spec}}}
        return self.batch.create_namespaced_job(namespace, body)

    def pods_of(self, name: str, namespace: str = "vision") -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items

    def clean(self) -> None:
        """Delete every Job and pod in the tenants' namespaces, and bring every node back."""
        for namespace in self.module.TENANTS:
            for job in self.batch.list_namespaced_job(namespace).items:
                self.batch.delete_namespaced_job(job.metadata.name, namespace, propagation_policy="Background",
                                                 grace_period_seconds=0)
        self.lab.path("nodes-down").unlink(missing_ok=True)
        for name, _ in self.module.NODES:
            self.core.patch_node(name, {"spec": {"unschedulable": False, "taints": None}})
        wait_for(self._no_pods_left, "every pod gone", timeout=60)

    def _no_pods_left(self) -> bool:
        """Delete what is left, releasing the finalizers no console round releases here; whether none was left."""
        left = False
        for namespace in self.module.TENANTS:
            for pod in self.core.list_namespaced_pod(namespace).items:
                left = True
                if pod.metadata.finalizers:
                    self.core.patch_namespaced_pod(pod.metadata.name, namespace, {"metadata": {"finalizers": None}})
                if pod.metadata.deletion_timestamp is None:
                    self.core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
        return not left


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """``condition()``'s first true value, asked every quarter second."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"no {what} within {timeout:g} s")


@pytest.fixture(scope="session")
def k8s_lab() -> Iterator[RunningLab]:
    prerequisites.require("kubernetes")
    module = load_script("k8s_lab")
    # The lab empties its folder once it has checked that no lab runs there (ports free).
    lab = module.Lab(Path(tempfile.gettempdir()) / f"cluster-ops-k8s-lab-{LAB_PORT}", LAB_PORT, kueue=True)
    module.start(lab)
    try:
        yield RunningLab(module, lab)
    finally:
        module.stop(lab, quiet=True)


@pytest.fixture
def kubernetes(k8s_lab: RunningLab, settings: Any, db: None) -> Iterator[RunningLab]:
    """The lab, the console pointed at it as its ServiceAccount (observing), and a clean cluster afterwards."""
    settings.KUBECONFIG = k8s_lab.environment()["KUBECONFIG"]
    row = scheduler_settings()
    row.executor = ExecutorKind.KUBERNETES_OBSERVER
    row.save()
    try:
        yield k8s_lab
    finally:
        k8s_lab.clean()
