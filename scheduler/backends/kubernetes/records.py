"""What Cluster Ops reads from Kubernetes, as plain JSON: nodes with GPUs, and Jobs and pods that ask for them.

A node's GPUs are its allocatable ``nvidia.com/gpu`` and their type the product label NVIDIA's GPU feature discovery
sets (``nvidia.com/gpu.product``); it is usable unless NotReady, cordoned or tainted NoExecute. A workload is a
``batch/v1`` Job with its pods (one console job), or a pod no Job owns; its GPUs are what its pods ask for
(``nvidia.com/gpu`` limits, or requests), its nodes those its running pods are on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.backends.mirror import ObservedJob
from scheduler.bounds import MAX_GPUS
from scheduler.core.gpu_types import gpu_type_key
from scheduler.models import JobState

GPU = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
OWNER_LABEL = "cluster-ops.io/owner"  # the console user a Job belongs to (a label: Kubernetes has no owner field)
REASON_LENGTH = 300
MAX_NODE_GPUS = 256


@dataclass(frozen=True)
class KubeNode:
    name: str
    gpu_type: str
    gpus: int
    state: str  # ready, not ready, cordoned, tainted
    reason: str = ""

    @property
    def usable(self) -> bool:
        return self.state == "ready"


def node_record(raw: Mapping[str, Any]) -> KubeNode:
    metadata, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    ready: Mapping[str, Any] = next((condition for condition in status.get("conditions") or []
                  if condition.get("type") == "Ready"), {})
    evicting = [taint for taint in spec.get("taints") or [] if taint.get("effect") == "NoExecute"]
    if ready.get("status") != "True":
        state, reason = "not ready", str(ready.get("reason") or ready.get("message") or "")
    elif spec.get("unschedulable"):
        state, reason = "cordoned", ""
    elif evicting:
        state, reason = "tainted", ", ".join(str(taint.get("key") or "") for taint in evicting)
    else:
        state, reason = "ready", ""
    return KubeNode(name=str(metadata.get("name") or ""), gpu_type=str((metadata.get("labels") or {}).get(
        PRODUCT_LABEL) or ""), gpus=quantity((status.get("allocatable") or {}).get(GPU)), state=state,
        reason=reason[:REASON_LENGTH])


def quantity(value: Any) -> int:
    """A whole-number resource quantity (``"4"``, 4); anything else — fractions, suffixes, garbage — is 0."""
    text = str(value if value is not None else "").strip()
    return int(text) if text.isdigit() and len(text) < 7 else 0


def pod_gpus(pod_spec: Mapping[str, Any]) -> int:
    """What a pod asks for: its containers' ``nvidia.com/gpu`` (limit, else request), summed, and at least its
    largest init container's."""
    def asked(container: Mapping[str, Any]) -> int:
        resources = container.get("resources") or {}
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        return quantity(limits.get(GPU)) or quantity(requests.get(GPU))

    main = sum(asked(container) for container in pod_spec.get("containers") or [])
    init = max((asked(container) for container in pod_spec.get("initContainers") or []), default=0)
    return max(main, init)


def time_of(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass
class Workload:
    """A Job and its pods, or a pod alone."""

    kind: str  # "Job" or "Pod"
    raw: Mapping[str, Any]
    pods: list[Mapping[str, Any]] = field(default_factory=list)
    admission: str = ""  # Kueue's reason where it holds the Job
    warning: str = ""  # the newest Warning event on the Job or one of its pods ("reason: message")


def workloads(jobs: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> list[Workload]:
    """The Jobs whose pods ask for GPUs, each with its pods, and the GPU pods no Job owns."""
    by_uid = {str((job.get("metadata") or {}).get("uid")): Workload("Job", job) for job in jobs}
    alone: list[Workload] = []
    for pod in pods:
        owner = next((reference for reference in (pod.get("metadata") or {}).get("ownerReferences") or []
                      if reference.get("kind") == "Job" and reference.get("controller")), None)
        if owner is not None and str(owner.get("uid")) in by_uid:
            by_uid[str(owner["uid"])].pods.append(pod)
        elif owner is None and pod_gpus(pod.get("spec") or {}) > 0:
            alone.append(Workload("Pod", pod, [pod]))
    with_gpus = [workload for workload in by_uid.values()
                 if pod_gpus((((workload.raw.get("spec") or {}).get("template") or {}).get("spec")) or {}) > 0]
    return with_gpus + alone


def observed(workload: Workload, now: datetime) -> ObservedJob:
    """A workload in the console's words: its namespace as the tenant, its state, why it waits, its GPUs."""
    metadata, spec, status = (workload.raw.get(key) or {} for key in ("metadata", "spec", "status"))
    pod_spec = ((spec.get("template") or {}).get("spec") or {}) if workload.kind == "Job" else spec
    per_pod = pod_gpus(pod_spec)
    running = _running_pods(workload)
    per_node: dict[str, int] = {}
    for pod in running:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        per_node[node] = per_node.get(node, 0) + pod_gpus(pod.get("spec") or {})
    state, ended_at = _state(workload, running)
    starts = [moment for pod in workload.pods if (moment := time_of((pod.get("status") or {}).get("startTime")))]
    width = max(int((spec.get("parallelism") if workload.kind == "Job" else 1) or 1), 1)
    return ObservedJob(
        key=str(metadata.get("uid") or ""), name=str(metadata.get("name") or ""),
        tenant=str(metadata.get("namespace") or ""), user=str((metadata.get("labels") or {}).get(OWNER_LABEL) or ""),
        state=state, running=bool(running), reason=_reason(workload) if state == JobState.PENDING else "",
        gpus_per_node=per_node, requested_gpus=min(per_pod * width, MAX_GPUS), gpu_type=wanted_type(pod_spec),
        submitted_at=time_of(metadata.get("creationTimestamp")) or now,
        started_at=min(starts) if starts else None, ended_at=ended_at,
        time_limit_seconds=_deadline(spec if workload.kind == "Job" else {}),
        runs=tuple((gpus, started, ended) for gpus, started, ended in container_runs(workload.pods)),
    )


def waits_unsuspended(workload: Workload) -> bool:
    """Whether it waits for a reason its Job's suspension does not give (then events may say why)."""
    suspended = workload.kind == "Job" and (workload.raw.get("spec") or {}).get("suspend")
    return not suspended and _state(workload, _running_pods(workload))[0] == JobState.PENDING


def _running_pods(workload: Workload) -> list[Mapping[str, Any]]:
    return [pod for pod in workload.pods if pod_running(pod)]


def pod_running(pod: Mapping[str, Any]) -> bool:
    """Running and not being deleted."""
    return _phase(pod) == "Running" and not (pod.get("metadata") or {}).get("deletionTimestamp")


def pod_ended(pod: Mapping[str, Any]) -> bool:
    """Its containers have stopped for good (Succeeded or Failed): its GPUs are free."""
    return _phase(pod) in ("Succeeded", "Failed")


def container_runs(pods: Iterable[Mapping[str, Any]]) -> list[tuple[int, datetime, datetime | None]]:
    """(GPUs, start, end or None while running) of each pod that asked for GPUs and ran, from its first
    container's state as the API gives it (whole seconds)."""
    runs = []
    for pod in pods:
        gpus = pod_gpus(pod.get("spec") or {})
        states = [status.get("state") or {} for status in (pod.get("status") or {}).get("containerStatuses") or []]
        running = next((state["running"] for state in states if state.get("running")), None)
        finished = next((state["terminated"] for state in states if state.get("terminated")), None)
        started = time_of((running or finished or {}).get("startedAt"))
        if gpus > 0 and started is not None:
            runs.append((gpus, started, None if running else time_of((finished or {}).get("finishedAt"))))
    return runs


def wanted_type(pod_spec: Mapping[str, Any]) -> str:
    """The GPU type a pod is pinned to by its node selector's product label (as ``gpu_type_key`` names it)."""
    product = (pod_spec.get("nodeSelector") or {}).get(PRODUCT_LABEL)
    return gpu_type_key(str(product)) if product else ""


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _condition(raw: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((condition for condition in (raw.get("status") or {}).get("conditions") or []
                 if condition.get("type") == kind and condition.get("status") == "True"), None)


def _state(workload: Workload, running: list[Mapping[str, Any]]) -> tuple[str, datetime | None]:
    """Its console state and, once ended, when."""
    if workload.kind == "Pod":
        phase = _phase(workload.raw)
        ended = time_of(_last_finish(workload.raw))
        if phase == "Succeeded":
            return JobState.SUCCEEDED, ended
        if phase == "Failed":
            return JobState.FAILED, ended
        return (JobState.RUNNING if running else JobState.PENDING), None
    for kind, state in (("Complete", JobState.SUCCEEDED), ("Failed", JobState.FAILED)):
        condition = _condition(workload.raw, kind)
        if condition is not None:
            return state, time_of((workload.raw.get("status") or {}).get("completionTime")) or time_of(
                condition.get("lastTransitionTime"))
    return (JobState.RUNNING if running else JobState.PENDING), None


def _last_finish(pod: Mapping[str, Any]) -> str:
    finishes = [((status.get("state") or {}).get("terminated") or {}).get("finishedAt") or ""
                for status in (pod.get("status") or {}).get("containerStatuses") or []]
    return max(finishes, default="")


def _reason(workload: Workload) -> str:
    """Why it waits: suspended (and Kueue's reason); else its first waiting pod's scheduling condition, else a
    container that cannot start (an image that cannot be pulled…), else the newest Warning event on it."""
    if workload.kind == "Job" and (workload.raw.get("spec") or {}).get("suspend"):
        return ("suspended" + (f": {workload.admission}" if workload.admission else ""))[:REASON_LENGTH]
    for pod in workload.pods:
        unscheduled = next((condition for condition in (pod.get("status") or {}).get("conditions") or []
                            if condition.get("type") == "PodScheduled" and condition.get("status") == "False"), None)
        if unscheduled is not None:
            return _one_line(unscheduled.get("reason") or "Unschedulable", unscheduled.get("message"))
    for pod in workload.pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") and waiting.get("reason") != "ContainerCreating":
                return _one_line(waiting["reason"], waiting.get("message"))
    if workload.warning:
        return _one_line(workload.warning)
    return "waiting for its pods" if workload.kind == "Job" else "Pending"


def warnings_by_object(events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The newest Warning event of each object (by uid), as "reason: message"."""
    newest: dict[str, tuple[str, str]] = {}
    for event in events:
        if event.get("type") != "Warning":
            continue
        uid = str((event.get("involvedObject") or {}).get("uid") or "")
        when = str(event.get("lastTimestamp") or event.get("eventTime") or
                   (event.get("metadata") or {}).get("creationTimestamp") or "")
        if uid and (uid not in newest or when >= newest[uid][0]):
            newest[uid] = (when, _one_line(event.get("reason") or "Warning", event.get("message")))
    return {uid: text for uid, (_, text) in newest.items()}


def add_warnings(found: Iterable[Workload], warnings: Mapping[str, str]) -> None:
    """Each workload's newest warning: its Job's own, else its pods' (the first pod that has one)."""
    for workload in found:
        uids = [(workload.raw.get("metadata") or {}).get("uid")] + [
            (pod.get("metadata") or {}).get("uid") for pod in workload.pods]
        workload.warning = next((warnings[str(uid)] for uid in uids if str(uid) in warnings), "")


def _one_line(reason: object, message: object = None) -> str:
    text = f"{reason}: {message}" if message else str(reason)
    return " ".join(text.split())[:REASON_LENGTH]


def _deadline(spec: Mapping[str, Any]) -> float | None:
    """A Job's ``activeDeadlineSeconds``: its time limit."""
    value = spec.get("activeDeadlineSeconds")
    return float(value) if isinstance(value, int) and value > 0 else None
