"""The ``batch/v1`` Job the console writes for one of its jobs, and the same Job read back with its pods.

A console job's Job is Indexed, one pod per decided node, each asking ``nvidia.com/gpu`` for its share, pinned to
its node by node affinity and kept one per node by anti-affinity; a waiting job's is suspended, with one pod of its
smallest size. Labels carry the console's id and a tag from a hash of the job's secret (its name holds the tag too),
so another job of the same id never has the same name. Rank and world size reach the pods through annotations,
which a suspended Job's pods may change where its containers may not. Its pods carry the console's accounting
finalizer: a pod deleted by a resize or a preemption stays in the API, ended, with its times, until its Job is
deleted (``release_orphans``), so GPU time is charged and reconciled from every pod Kubernetes ran.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

from scheduler.backends import Launch
from scheduler.backends.files import checkpoint_dir, job_tag
from scheduler.backends.kubernetes.records import GPU, OWNER_LABEL, pod_gpus, pod_running, time_of
from scheduler.models import Job, JobState

JOB_LABEL, TAG_LABEL = "cluster-ops.io/job", "cluster-ops.io/tag"
REASON_ANNOTATION = "cluster-ops.io/reason"
ACCOUNTING_FINALIZER = "cluster-ops.io/accounting"  # its pods stay, ended, until its Job is deleted
WAITING_STATES = (JobState.PENDING, JobState.PREEMPTED)
WORLD_ANNOTATION = "cluster-ops.io/world-size"  # on its pods: how many there are (WORLD_SIZE)
MASTER_PORT_BASE = 29_500


def job_name(job: Job) -> str:
    """Its Job's name: the console id and the tag, so another job of the same id never has the same name."""
    return f"cluster-ops-{job.pk}-{job_tag(job.report_token)}"


def waiting_reason(job: Job) -> str:
    return " ".join(f"Cluster Ops: {job.pending_reason or 'queued'}".split())[:200]


@dataclass(frozen=True)
class Placement:
    nodes: tuple[str, ...]  # rank order
    per_node: int

    @classmethod
    def of(cls, launch: Launch) -> Placement:
        counts = Counter(gpu.hostname for gpu in launch.gpus)
        return cls(tuple(launch.hosts), min(counts.values()))

    def same_as(self, other: Placement) -> bool:
        """The same nodes and GPUs per node, whichever rank each node has."""
        return sorted(self.nodes) == sorted(other.nodes) and self.per_node == other.per_node


def manifest(job: Job, placement: Placement | None, suspend: bool) -> dict[str, Any]:
    """The Job for ``job``: ``placement``'s pods (none yet: one pod of its smallest size, suspended)."""
    name, tag = job_name(job), job_tag(job.report_token)
    labels = {JOB_LABEL: str(job.pk), TAG_LABEL: tag}
    owner = _label_value(job.owner.username if job.owner else "")
    if owner:
        labels[OWNER_LABEL] = owner
    pods = len(placement.nodes) if placement else 1
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": job.tenant.name, "labels": labels,
                     "annotations": {REASON_ANNOTATION: waiting_reason(job) if suspend else ""}},
        "spec": {
            "suspend": suspend, "completionMode": "Indexed", "completions": pods, "parallelism": pods,
            "backoffLimit": 0, "podReplacementPolicy": "Failed",
            "template": {"metadata": {"labels": labels, "annotations": {WORLD_ANNOTATION: str(pods)},
                                      "finalizers": [ACCOUNTING_FINALIZER]},
                         "spec": _pod_spec(job, placement, name)},
        },
    }


def _pod_spec(job: Job, placement: Placement | None, name: str) -> dict[str, Any]:
    per_node = placement.per_node if placement else max(job.min_gpus, 1)
    environment = {
        "CLUSTER_OPS_JOB_ID": str(job.pk), "CHECKPOINT_DIR": str(checkpoint_dir(job.pk)),
        "CLUSTER_OPS_REPORT_URL": f"{settings.PUBLIC_URL}/api/jobs/{job.pk}/report/",
        "CLUSTER_OPS_REPORT_TOKEN": job.report_token,
        # Rank 0's pod by its DNS name (the Job's headless subdomain); each job its own port.
        "MASTER_ADDR": f"{name}-0.{name}.{job.tenant.name}.svc", "MASTER_PORT": str(MASTER_PORT_BASE + job.pk % 10_000),
    }
    env: list[dict[str, Any]] = [{"name": key, "value": value} for key, value in environment.items()]
    # From the pod's annotations: a suspended Job's containers cannot change, its pods' annotations can.
    for variable, annotation in (("RANK", "batch.kubernetes.io/job-completion-index"),
                                 ("WORLD_SIZE", WORLD_ANNOTATION), ("NNODES", WORLD_ANNOTATION)):
        field_path = f"metadata.annotations['{annotation}']"
        env.append({"name": variable, "valueFrom": {"fieldRef": {"fieldPath": field_path}}})
    spec: dict[str, Any] = {
        "restartPolicy": "Never", "subdomain": name,
        "terminationGracePeriodSeconds": settings.STOP_GRACE_SECONDS,
        "containers": [{"name": "train", "image": settings.KUBERNETES_JOB_IMAGE,
                        "command": ["/bin/bash", "-c", f"exec {job.command}"], "env": env,
                        "resources": {"limits": {GPU: per_node}}}],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {JOB_LABEL: str(job.pk)}}, "topologyKey": "kubernetes.io/hostname"}]}},
    }
    if placement:
        spec["affinity"]["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                   "values": list(placement.nodes)}]}]}}
    return spec


def _label_value(text: str) -> str:
    """A label value from ``text``: up to 63 letters, digits, ``-_.``, starting and ending alphanumeric."""
    kept = "".join(character if character.isalnum() or character in "-_." else "-" for character in text)[:63]
    return kept.strip("-_.")


@dataclass
class KubeJob:
    """One of the console's Jobs as the API has it, with its pods."""

    raw: Mapping[str, Any]
    pods: list[Mapping[str, Any]]

    @property
    def uid(self) -> str:
        return str(self.raw["metadata"]["uid"])

    @property
    def name(self) -> str:
        return str(self.raw["metadata"]["name"])

    @property
    def suspended(self) -> bool:
        return bool((self.raw.get("spec") or {}).get("suspend"))

    def condition(self, kind: str) -> Mapping[str, Any] | None:
        return next((condition for condition in (self.raw.get("status") or {}).get("conditions") or []
                     if condition.get("type") == kind and condition.get("status") == "True"), None)

    def running_pods(self) -> list[Mapping[str, Any]]:
        return [pod for pod in self.pods if pod_running(pod)]

    def placement(self) -> Placement:
        """Where its pods run now, in rank order."""
        running = sorted(self.running_pods(), key=completion_index)
        per_node = pod_gpus(running[0].get("spec") or {}) if running else 0
        return Placement(tuple(str((pod.get("spec") or {}).get("nodeName") or "") for pod in running), per_node)


def completion_index(pod: Mapping[str, Any]) -> int:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get("batch.kubernetes.io/job-completion-index")
    return int(str(value)) if str(value).isdigit() else 0


def container_started(pod: Mapping[str, Any]) -> datetime | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = status.get("state") or {}
        moment = time_of((state.get("running") or state.get("terminated") or {}).get("startedAt"))
        if moment:
            return moment
    return time_of((pod.get("status") or {}).get("startTime"))
