"""``make run`` on a Kubernetes cluster (``CLUSTER_BACKEND=kubernetes``): the console set up from what it has.

Instead of the simulated demo: the inventory is read from the Nodes, the tenants are the namespaces (but
Kubernetes' own, ``kube-*`` and ``default``, and those labelled ``cluster-ops.io/tenant=false``, such as the
console's own), the scheduler's executor is ``kubernetes`` (or ``kubernetes-observer``
with ``KUBERNETES_MODE=observe``) and rounds come every ``KUBERNETES_ROUND_SECONDS``. On the lab of
``make k8s-lab`` (``KUBERNETES_DEMO_JOBS`` > 0, which the lab prints) a few elastic example jobs are submitted,
as ``lab_examples``' contended plan: whole-node jobs fill the nodes, smaller ones arrive a minute later.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.conf import settings

from scheduler.backends.cluster_nodes import sync_inventory
from scheduler.backends.kubernetes.client import KubernetesRefused, connect
from scheduler.backends.kubernetes.records import KubeNode, node_record
from scheduler.lab_examples import MissingTorch, Nodes, submit_examples
from scheduler.live.config import update_settings
from scheduler.models import ExecutorKind, Tenant

POLICY = "sia-profiled"  # two GPU types, elastic jobs: what Sia is for
TENANT_LABEL = "cluster-ops.io/tenant"
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def seed_kubernetes(now: datetime) -> dict[str, int]:
    """Inventory, tenants and settings from the cluster; the lab's example jobs when asked for. Idempotent."""
    kube = connect()
    nodes = [node_record(raw) for raw in kube.list_all("list", "nodes", kube.core.list_node)]
    sync_inventory("k8s", [node for node in nodes if node.gpus > 0 and node.name])
    tenants = 0
    for namespace in kube.list_all("list", "namespaces", kube.core.list_namespace):
        metadata = namespace.get("metadata") or {}
        name = str(metadata.get("name") or "")
        if (name and name not in SYSTEM_NAMESPACES and not name.startswith("kube-")
                and (metadata.get("labels") or {}).get(TENANT_LABEL) != "false"):
            tenants += Tenant.objects.get_or_create(name=name[:100])[1]
    observing = settings.KUBERNETES_MODE == "observe"
    update_settings(executor=ExecutorKind.KUBERNETES_OBSERVER if observing else ExecutorKind.KUBERNETES,
                    policy=POLICY, round_seconds=settings.KUBERNETES_ROUND_SECONDS)
    try:
        jobs = 0 if observing else submit_examples(settings.KUBERNETES_DEMO_JOBS, now,
                                                   crowd=crowd([node for node in nodes if node.gpus]))
    except MissingTorch as missing:
        raise KubernetesRefused(str(missing)) from None
    return {"nodes": sum(1 for node in nodes if node.gpus), "tenants": tenants, "jobs": jobs}


def crowd(nodes: list[KubeNode]) -> Nodes | None:
    """What the example jobs fill: the most common node size, and the nodes with GPUs."""
    if not nodes:
        return None
    return Nodes(gpus=Counter(node.gpus for node in nodes).most_common(1)[0][0], count=len(nodes))
