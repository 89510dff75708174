"""``make run`` on a Kubernetes cluster (``CLUSTER_BACKEND=kubernetes``): the console set up from what it has.

Instead of the simulated demo: the inventory is read from the Nodes, the tenants are the namespaces (but
Kubernetes' own: ``kube-*``, ``default``), the scheduler's executor is ``kubernetes-observer`` and rounds come every
``KUBERNETES_ROUND_SECONDS``.
"""

from __future__ import annotations

from django.conf import settings

from scheduler.backends.cluster_nodes import sync_inventory
from scheduler.backends.kubernetes.client import connect
from scheduler.backends.kubernetes.records import node_record
from scheduler.live.config import update_settings
from scheduler.models import ExecutorKind, Tenant

POLICY = "sia-profiled"  # what forecasts and what-ifs run by default; the cluster's scheduler decides
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def seed_kubernetes() -> dict[str, int]:
    """Inventory, tenants and settings from the cluster. Idempotent."""
    kube = connect()
    nodes = [node_record(raw) for raw in kube.list_all("list", "nodes", kube.core.list_node)]
    sync_inventory("k8s", [node for node in nodes if node.gpus > 0 and node.name])
    tenants = 0
    for namespace in kube.list_all("list", "namespaces", kube.core.list_namespace):
        name = str((namespace.get("metadata") or {}).get("name") or "")
        if name and name not in SYSTEM_NAMESPACES and not name.startswith("kube-"):
            tenants += Tenant.objects.get_or_create(name=name[:100])[1]
    update_settings(executor=ExecutorKind.KUBERNETES_OBSERVER, policy=POLICY,
                    round_seconds=settings.KUBERNETES_ROUND_SECONDS)
    return {"nodes": sum(1 for node in nodes if node.gpus), "tenants": tenants}
