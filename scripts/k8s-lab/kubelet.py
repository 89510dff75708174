"""The Kubernetes lab's kubelet: four GPU nodes whose pods run as processes of this host (part of the lab, not of
the product; ``scripts/k8s_lab.py`` starts it).

    python kubelet.py ADMIN_KUBECONFIG PODS_FOLDER

It registers the nodes (``nvidia.com/gpu`` capacity and the labels NVIDIA's GPU feature discovery sets), renews
their leases and Ready condition, and for each pod bound to one of them: gives it that node's free GPU ids, runs
its first container's command and arguments with its environment (``NVIDIA_VISIBLE_DEVICES`` and
``CUDA_VISIBLE_DEVICES`` the ids given), and reports its phase and exit code. A pod being deleted gets SIGTERM,
then SIGKILL once its grace period is over, and its deletion is confirmed — so a job checkpoints as on Slurm.

The fake part is the GPU and the container runtime: no image is pulled, the command runs on this host. A node named
in ``PODS_FOLDER/../nodes-down`` (one a line) stops renewing its lease, as a node that stopped answering.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: the lab's own definitions
from k8s_lab import GPUS_PER_NODE, NODES  # noqa: E402

GPU = "nvidia.com/gpu"
HEARTBEAT_SECONDS = 5.0
ADMIT_WAIT_SECONDS = 30.0  # a pod waits this long for GPUs still held by stopping processes of deleted pods
LEASE_SECONDS = 40
TICK_SECONDS = 0.25
VERSION = "v1.37.2-lab"
log = logging.getLogger("lab-kubelet")


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class RunningPod:
    namespace: str
    name: str
    uid: str
    node: str
    devices: list[int]
    process: subprocess.Popen[bytes] | None
    started_at: datetime
    container: str
    image: str
    kill_at: float | None = None  # set once it is being deleted: SIGKILL then
    reported: bool = False


@dataclass
class Kubelet:
    core: client.CoreV1Api
    leases: client.CoordinationV1Api
    pods_folder: Path
    pods: dict[str, client.V1Pod] = field(default_factory=dict)  # by uid, as the watch last saw them
    running: dict[str, RunningPod] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)  # every pod run once: a pod never runs twice
    waiting: dict[str, float] = field(default_factory=dict)  # pods waiting for their GPUs, since when
    # Deletions confirmed: a pod a finalizer keeps in the API (ended) is not confirmed again at every change.
    confirmed: set[str] = field(default_factory=set)
    free: dict[str, list[int]] = field(default_factory=lambda: {name: list(range(GPUS_PER_NODE))
                                                                 for name, _ in NODES})
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: bool = False

    # --- nodes -----------------------------------------------------------------------------------------------

    def register(self) -> None:
        for name, product in NODES:
            labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                      "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
                      "nvidia.com/gpu.count": str(GPUS_PER_NODE)}
            body = {"metadata": {"name": name, "labels": labels}}
            try:
                self.core.create_node(body)
            except ApiException as error:
                if error.status != 409:
                    raise
                self.core.patch_node(name, {"metadata": {"labels": labels}})
        self.heartbeat(first=True)

    def down(self) -> set[str]:
        try:
            return set((self.pods_folder.parent / "nodes-down").read_text().split())
        except OSError:
            return set()

    def heartbeat(self, first: bool = False) -> None:
        stamp = now()
        for name, _ in NODES:
            if name in self.down():
                continue
            self._renew_lease(name, stamp)
            capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", GPU: str(GPUS_PER_NODE)}
            status = {
                "capacity": capacity, "allocatable": capacity,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "the lab's kubelet is posting ready status",
                                "lastHeartbeatTime": stamp.isoformat(), "lastTransitionTime": stamp.isoformat()}]
                if first else [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "the lab's kubelet is posting ready status",
                                "lastHeartbeatTime": stamp.isoformat()}],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": VERSION, "kubeProxyVersion": "", "operatingSystem": "linux",
                             "architecture": "amd64", "containerRuntimeVersion": "lab://processes",
                             "kernelVersion": "", "osImage": "", "machineID": name, "systemUUID": name,
                             "bootID": name},
            }
            try:
                self.core.patch_node_status(name, {"status": status})
            except ApiException as error:
                log.warning("node %s status: %s", name, error.reason)

    def _renew_lease(self, name: str, stamp: datetime) -> None:
        body = {"metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS,
                         "renewTime": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
        try:
            self.leases.patch_namespaced_lease(name, "kube-node-lease", body)
        except ApiException as error:
            if error.status != 404:
                raise
            self.leases.create_namespaced_lease("kube-node-lease", body)

    # --- pods ------------------------------------------------------------------------------------------------

    def watch_pods(self) -> None:
        """Keep ``pods`` as the API has the pods bound to a node: a list, then a watch; re-listed when the watch
        expires (410) or breaks."""
        ours = {name for name, _ in NODES}
        while not self.stopping:
            try:
                listing = self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName!=")
                with self.lock:
                    self.pods = {pod.metadata.uid: pod for pod in listing.items if pod.spec.node_name in ours}
                version = listing.metadata.resource_version
                while not self.stopping:
                    for event in watch.Watch().stream(self.core.list_pod_for_all_namespaces,
                                                      field_selector="spec.nodeName!=", resource_version=version,
                                                      timeout_seconds=30, allow_watch_bookmarks=True):
                        pod = event["object"]
                        if event["type"] == "ERROR" or not isinstance(pod, client.V1Pod):
                            raise ApiException(status=410)  # expired: list again
                        version = pod.metadata.resource_version
                        if event["type"] == "BOOKMARK" or pod.spec is None or pod.spec.node_name not in ours:
                            continue
                        with self.lock:
                            if event["type"] == "DELETED":
                                self.pods.pop(pod.metadata.uid, None)
                            else:
                                self.pods[pod.metadata.uid] = pod
            except ApiException as error:
                if error.status != 410:
                    log.warning("watching pods: %s", error.reason)
                    time.sleep(1)
            except Exception as error:  # a broken stream: list again
                log.warning("watching pods: %s: %s", type(error).__name__, error)
                time.sleep(1)

    def tick(self) -> None:
        with self.lock:
            pods = dict(self.pods)
        for uid, pod in pods.items():
            if pod.metadata.deletion_timestamp is not None and uid not in self.confirmed:
                self._terminate(uid, pod)
            elif uid not in self.started and pod.status.phase in (None, "Pending") and self._admits(uid, pod):
                self.started.add(uid)
                self._start(uid, pod)
        for uid, run in list(self.running.items()):
            self._check(uid, run, pods.get(uid))

    def _admits(self, uid: str, pod: client.V1Pod) -> bool:
        """Whether to start it now: its GPUs are free, or it has waited ``ADMIT_WAIT_SECONDS`` for the processes
        of pods already gone from the API to stop (then it is started, and fails if they are still busy)."""
        container = pod.spec.containers[0]
        wanted = int(((container.resources and container.resources.limits) or {}).get(GPU, 0) or 0)
        if wanted <= len(self.free[pod.spec.node_name]):
            return True
        first = self.waiting.setdefault(uid, time.monotonic())
        return time.monotonic() - first >= ADMIT_WAIT_SECONDS

    def _start(self, uid: str, pod: client.V1Pod) -> None:
        container = pod.spec.containers[0]
        wanted = int(((container.resources and container.resources.limits) or {}).get(GPU, 0) or 0)
        node = pod.spec.node_name
        if wanted > len(self.free[node]):
            self._fail(pod, "UnexpectedAdmissionError", f"node {node} has {len(self.free[node])} free {GPU}")
            return
        command = list(container.command or []) + list(container.args or [])
        if not command:
            self._fail(pod, "NoCommand", "the lab's kubelet runs a container's command; it has none")
            return
        devices, self.free[node] = self.free[node][:wanted], self.free[node][wanted:]
        visible = ",".join(map(str, devices))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"),
               "NVIDIA_VISIBLE_DEVICES": visible or "void", "CUDA_VISIBLE_DEVICES": visible,
               "HOSTNAME": pod.metadata.name, "KUBERNETES_NODE_NAME": node}
        for variable in container.env or []:
            env[variable.name] = self._value(pod, variable)
        output = open(self.pods_folder / f"{pod.metadata.namespace}_{pod.metadata.name}.log", "ab")  # noqa: SIM115
        try:
            process = subprocess.Popen(command, env=env, cwd=container.working_dir or str(self.pods_folder),
                                       stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as error:
            self.free[node] += devices
            self._fail(pod, "StartError", f"{command[0]}: {error.strerror}")
            return
        finally:
            output.close()
        run = RunningPod(pod.metadata.namespace, pod.metadata.name, uid, node, devices, process, now(),
                         container.name, container.image or "")
        self.running[uid] = run
        self._report(run, {"running": {"startedAt": run.started_at.isoformat()}}, "Running", ready=True)

    @staticmethod
    def _value(pod: client.V1Pod, variable: client.V1EnvVar) -> str:
        if variable.value is not None:
            # The lab has no cluster DNS: every pod runs on this host, so a service's name is this host.
            return "127.0.0.1" if re.fullmatch(r"[a-z0-9.-]+\.svc(\.cluster\.local)?", variable.value) else \
                variable.value
        path = variable.value_from.field_ref.field_path if variable.value_from and variable.value_from.field_ref \
            else ""
        annotation = re.fullmatch(r"metadata\.annotations\['([^']+)'\]", path)
        if annotation:
            return (pod.metadata.annotations or {}).get(annotation.group(1), "")
        return {"metadata.name": pod.metadata.name, "metadata.namespace": pod.metadata.namespace,
                "spec.nodeName": pod.spec.node_name, "metadata.uid": pod.metadata.uid}.get(path, "")

    def _terminate(self, uid: str, pod: client.V1Pod) -> None:
        run = self.running.get(uid)
        if run is not None and run.process is not None and run.process.poll() is None:
            if run.kill_at is None:
                grace = pod.metadata.deletion_grace_period_seconds
                run.kill_at = time.monotonic() + (30 if grace is None else grace)
                _signal(run.process, signal.SIGTERM)
            elif time.monotonic() >= run.kill_at:
                _signal(run.process, signal.SIGKILL)
            return
        if run is not None:
            self._check(uid, run, pod)
        try:  # what a kubelet does last: confirm the deletion
            self.core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0,
                                            body=client.V1DeleteOptions(grace_period_seconds=0,
                                                                        preconditions={"uid": uid}))
        except ApiException as error:
            if error.status not in (404, 409):
                log.warning("confirming deletion of %s: %s", pod.metadata.name, error.reason)
        self.confirmed.add(uid)
        with self.lock:
            self.pods.pop(uid, None)

    def _check(self, uid: str, run: RunningPod, pod: client.V1Pod | None) -> None:
        code = run.process.poll() if run.process is not None else None
        if code is None and pod is not None:
            return
        if code is None:  # its pod is gone: stop it now
            _signal(run.process, signal.SIGKILL)
            code = run.process.wait() if run.process is not None else -9
        self.running.pop(uid, None)
        self.free[run.node] = sorted(self.free[run.node] + run.devices)
        exit_code = code if code >= 0 else 128 - code
        if pod is not None:
            terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                          "startedAt": run.started_at.isoformat(), "finishedAt": now().isoformat()}
            self._report(run, {"terminated": terminated}, "Succeeded" if exit_code == 0 else "Failed", ready=False)

    def _report(self, run: RunningPod, state: dict, phase: str, ready: bool) -> None:
        stamp = now().isoformat()
        status = {
            "phase": phase, "hostIP": "127.0.0.1", "podIP": "127.0.0.1", "startTime": run.started_at.isoformat(),
            "conditions": [{"type": kind, "status": "True" if ready or kind in ("PodScheduled", "Initialized")
                            else "False", "lastTransitionTime": stamp}
                           for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
            "containerStatuses": [{"name": run.container, "image": run.image, "imageID": "", "ready": ready,
                                   "restartCount": 0, "started": ready, "state": state}],
        }
        try:
            self.core.patch_namespaced_pod_status(run.name, run.namespace, {"status": status})
        except ApiException as error:
            if error.status != 404:
                log.warning("status of %s: %s", run.name, error.reason)

    def _fail(self, pod: client.V1Pod, reason: str, message: str) -> None:
        try:
            self.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, {"status": {
                "phase": "Failed", "reason": reason, "message": message}})
        except ApiException as error:
            log.warning("failing %s: %s", pod.metadata.name, error.reason)

    def stop_all(self) -> None:
        """On the lab's stop: every pod's process gets SIGTERM, then SIGKILL after a few seconds."""
        self.stopping = True
        for run in self.running.values():
            _signal(run.process, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(run.process and run.process.poll() is None
                                                  for run in self.running.values()):
            time.sleep(0.1)
        for run in self.running.values():
            _signal(run.process, signal.SIGKILL)


def _signal(process: subprocess.Popen[bytes] | None, number: int) -> None:
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, number)
    except ProcessLookupError:
        pass


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(argv[1])
    pods_folder = Path(argv[2])
    pods_folder.mkdir(parents=True, exist_ok=True)
    kubelet = Kubelet(client.CoreV1Api(), client.CoordinationV1Api(), pods_folder)
    signal.signal(signal.SIGTERM, lambda *_: setattr(kubelet, "stopping", True))
    kubelet.register()
    threading.Thread(target=kubelet.watch_pods, daemon=True).start()
    last_beat = time.monotonic()
    log.info("lab kubelet: %d nodes registered", len(NODES))
    while not kubelet.stopping:
        if time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
            kubelet.heartbeat()
            last_beat = time.monotonic()
        try:
            kubelet.tick()
        except ApiException as error:
            log.warning("tick: %s", error.reason)
        time.sleep(TICK_SECONDS)
    kubelet.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
