"""``bench_kubernetes``: a live round with the console's queue as suspended Jobs, and the observer's mirror of a large
Kubernetes cluster, timed against the lab.

``jobs`` rigid console jobs (1–4 GPUs, an hour of ``sleep``) under the ``kubernetes`` executor (FIFO: no resize, so
no suspend waits): the first rounds make their suspended Jobs (``QUEUE_CREATES`` a round) and start what fits; then
``rounds`` more rounds are timed, each reading the nodes, every Job and pod of the console's, the policy, the writes.

``pods`` pods asking for one GPU each are created in the lab's namespaces (eight at a time, through the API, with a
scheduling gate, so that they wait as pods of a busy cluster wait, without the scheduler's churn), then one
``kubernetes-observer`` round mirrors them (every row made) and another (every row read again), in a throwaway
database beside the configured one. Every pod made is deleted at the end. It refuses a lab that has pods already:
the figures would not be its own.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from django.utils import timezone

from scheduler.backends.kubernetes.client import Kube
from scheduler.backends.kubernetes.executor import release_finalizer
from scheduler.backends.kubernetes.jobs import JOB_LABEL
from scheduler.live.config import update_settings
from scheduler.live.round import run_round
from scheduler.models import ExecutorKind, Job, JobState, SchedulingRound, Tenant

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


CLEANUP_TIMEOUT = 600.0  # deleting thousands of objects takes the API server longer than a round's call


def delete_pods(kube: Kube) -> None:
    kube = dataclasses.replace(kube, timeout=CLEANUP_TIMEOUT)
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


def round_with_queue(kube: Kube, jobs: int, rounds: int, seed: int = 0) -> dict[str, Any]:
    update_settings(executor=ExecutorKind.KUBERNETES, policy="fifo")
    chance = random.Random(seed)
    tenants = [Tenant.objects.get_or_create(name=name)[0] for name in NAMESPACES]
    now = timezone.now()
    Job.objects.bulk_create(
        Job(tenant=chance.choice(tenants), name=f"bench-{number}", workload_profile="", total_work=3600.0,
            min_gpus=(gpus := chance.randint(1, 4)), max_gpus=gpus, expected_seconds=3600.0, command="sleep 3600",
            submitted_at=now - timedelta(seconds=jobs - number))
        for number in range(jobs))
    warm_up: list[float] = []
    while Job.objects.filter(state=JobState.PENDING, cluster_job_id="").exists() and len(warm_up) < jobs:
        warm_up.append(timed(run_round)[0])
    walls = [timed(run_round)[0] for _ in range(rounds)]
    ok = list(SchedulingRound.objects.order_by("-pk")[:rounds])
    return {"jobs": jobs, "suspended_jobs": sum(1 for job in kube.list_all(
                "list", "jobs", kube.batch.list_job_for_all_namespaces) if (job.get("spec") or {}).get("suspend")),
            "running": Job.objects.filter(state=JobState.RUNNING).count(), "queueing_rounds": len(warm_up),
            "queueing_s": round(sum(warm_up), 1), "rounds": rounds,
            "median_ms": round(statistics.median(walls) * 1000, 1), "max_ms": round(max(walls) * 1000, 1),
            "snapshot_ms": round(statistics.median(row.snapshot_ms or 0 for row in ok), 1),
            "launch_ms": round(statistics.median(row.launch_ms or 0 for row in ok), 1)}


def delete_jobs(kube: Kube) -> None:
    """The console's Jobs, and their pods: released from the console's accounting finalizer, as its next round
    would release them."""
    kube = dataclasses.replace(kube, timeout=CLEANUP_TIMEOUT)
    for namespace in NAMESPACES:
        kube.call("delete", "jobs", kube.batch.delete_collection_namespaced_job, namespace,
                  label_selector=JOB_LABEL, propagation_policy="Background", grace_period_seconds=0)
    release_finalizer(kube, list(kube.list_all("list", "pods", kube.core.list_pod_for_all_namespaces,
                                               label_selector=JOB_LABEL)))


def wait_until_no_pods(kube: Kube, timeout: float = 300.0) -> None:
    """Until the deleted Jobs' pods are gone (the mirror's figures must be its own)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(True for _ in kube.list_all("list", "pods", kube.core.list_pod_for_all_namespaces)):
            return
        time.sleep(1)
    raise RuntimeError(f"the console's pods were not gone within {timeout:g} s")
