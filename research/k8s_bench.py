"""``bench_kubernetes``: the observer's mirror of a large Kubernetes cluster, timed against the lab.

``pods`` pods asking for one GPU each are created in the lab's namespaces (eight at a time, through the API, with a
scheduling gate, so that they wait as pods of a busy cluster wait, without the scheduler's churn), then one
``kubernetes-observer`` round mirrors them (every row made) and another (every row read again), in a throwaway
database beside the configured one. Every pod made is deleted at the end. It refuses a lab that has pods already:
the figures would not be its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from scheduler.backends.kubernetes.client import Kube
from scheduler.live.config import update_settings
from scheduler.live.round import run_round
from scheduler.models import ExecutorKind, Job

NAMESPACES = ("research", "vision", "nlp")
LABEL = "cluster-ops.io/bench"
GATE = "cluster-ops.io/bench-hold"  # a scheduling gate: the pods wait, unscheduled, until it is removed
CREATORS = 8


def timed(step: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = step()
    return time.perf_counter() - started, result


def refuse_a_busy_lab(kube: Kube) -> None:
    pods = sum(1 for _ in kube.list_all("list", "pods", kube.core.list_pod_for_all_namespaces))
    if pods:
        raise RuntimeError(f"the cluster has {pods} pods: bench_kubernetes needs a lab with none (restart it)")


def pod(number: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"bench-{number}", "labels": {LABEL: "yes"}},
            "spec": {"schedulingGates": [{"name": GATE}], "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "lab/none", "command": ["true"],
                                     "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


def create_pods(kube: Kube, count: int) -> float:
    def create(number: int) -> None:
        kube.call("create", "pods", kube.core.create_namespaced_pod, NAMESPACES[number % len(NAMESPACES)],
                  pod(number))

    started = time.perf_counter()
    with ThreadPoolExecutor(CREATORS) as pool:
        list(pool.map(create, range(count)))
    return time.perf_counter() - started


def delete_pods(kube: Kube) -> None:
    for namespace in NAMESPACES:
        kube.call("delete", "pods", kube.core.delete_collection_namespaced_pod, namespace,
                  label_selector=f"{LABEL}=yes", grace_period_seconds=0)


def mirror(kube: Kube, count: int) -> dict[str, Any]:
    update_settings(executor=ExecutorKind.KUBERNETES_OBSERVER)
    created = create_pods(kube, count)
    first, first_row = timed(run_round)
    again, again_row = timed(run_round)
    listed, _ = timed(lambda: sum(1 for _ in kube.list_all("list", "pods", kube.core.list_pod_for_all_namespaces)))
    return {"pods": count, "creating_s": round(created, 1), "mirrored": Job.objects.count(),
            "first_round_ms": round(first * 1000, 1), "next_round_ms": round(again * 1000, 1),
            "listing_pods_ms": round(listed * 1000, 1),
            "first_status": first_row.status if first_row else None, "note": (again_row.note if again_row else "")}
