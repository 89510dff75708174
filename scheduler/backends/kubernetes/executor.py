"""The console schedules, Kubernetes executes: each console job is one ``batch/v1`` Job, suspended while it waits.

A waiting console job becomes, from the round after its submission, a suspended Indexed Job in its tenant's
namespace, so ``kubectl get jobs`` shows the console's queue, with the console's reason as the annotation
``cluster-ops.io/reason``. A placement makes it one pod per decided node — each asking ``nvidia.com/gpu`` for its
share, pinned to its node by node affinity, one per node by anti-affinity — and resumes it. A resize or a move to
other nodes suspends it (the Job controller deletes its pods gracefully: SIGTERM, the job checkpoints), waits until
its pods are gone, patches the nodes, the count and the GPUs per pod (Kubernetes lets a suspended Job change them)
and resumes it; a preemption suspends it; a cancel deletes it. GPUs are asked for per pod, one count for every
node: placement spreads a job evenly (``even_spread``).

Every Job carries the console's job id and a tag from a hash of the job's secret (labels), and its name holds the
tag, so a console job id seen again (another database, a reset one) never claims another's Job. Every call has a
timeout; the API server away skips the round (``KubernetesUnavailable``), nothing written. A Job deleted outside
the console ends its job as failed and the round says so; never recreated behind an operator's back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, ClassVar

from django.core.exceptions import ValidationError
from django.db import transaction

from scheduler.backends import (
    Launch,
    acknowledge,
    finish_jobs,
    measure_restart,
    refuse_scripts,
    register_backend,
)
from scheduler.backends.cluster_nodes import sync_inventory
from scheduler.backends.files import checkpoint_dir, claim_job_dir, job_tag
from scheduler.backends.kubernetes.accounting import api_comparison
from scheduler.backends.kubernetes.client import (
    Kube,
    KubernetesError,
    KubernetesRefused,
    KubernetesUnavailable,
    connect,
)
from scheduler.backends.kubernetes.jobs import (
    ACCOUNTING_FINALIZER,
    JOB_LABEL,
    REASON_ANNOTATION,
    TAG_LABEL,
    WAITING_STATES,
    KubeJob,
    Placement,
    container_started,
    job_name,
    manifest,
    waiting_reason,
)
from scheduler.backends.kubernetes.records import container_runs, node_record, pod_ended, time_of
from scheduler.backends.mirror import charge_runs
from scheduler.bulk import update_many
from scheduler.core.types import ClusterSnapshot
from scheduler.models import ACTIVE_STATES, FINISHED_STATES, Job, JobState

logger = logging.getLogger(__name__)

QUEUE_CREATES = 100  # suspended Jobs made for waiting console jobs per round (the rest the next rounds)
# The console's reasons written to waiting Jobs: for at most this long a round (one patch each; the rest next rounds),
# so a queue of thousands whose reasons move every round never slows the round.
REASON_SECONDS = 0.25
SUSPEND_WAIT_SECONDS = 60.0  # in all, per round, for suspended Jobs' pods to leave before they are placed anew


@dataclass
class KubernetesExecutor:
    """The round's executor on a Kubernetes cluster (``SchedulerSettings.executor == "kubernetes"``)."""

    name: ClassVar[str] = "kubernetes"
    decides: ClassVar[bool] = True
    kube: Kube | None = None
    notes: list[str] = field(default_factory=list)
    measured_restarts: list[float] = field(default_factory=list)
    jobs: dict[int, KubeJob] = field(default_factory=dict)  # console job id → its Job
    resuspend: list[tuple[Job, KubeJob]] = field(default_factory=list)  # resumed outside the console

    # --- read ------------------------------------------------------------------------------------------------

    def refresh_inventory(self, now: datetime) -> None:
        self.kube = self.kube or connect()
        nodes = [node_record(raw) for raw in self.kube.list_all("list", "nodes", self.kube.core.list_node)]
        self.jobs = self._read_jobs(self.kube)
        self.notes += sync_inventory("k8s", [node for node in nodes if node.gpus > 0 and node.name]).notes()

    def _read_jobs(self, kube: Kube) -> dict[int, KubeJob]:
        """The console's Jobs, each claimed only by the console job whose id and tag it carries."""
        raws = list(kube.list_all("list", "jobs", kube.batch.list_job_for_all_namespaces, label_selector=JOB_LABEL))
        pods: dict[str, list[Mapping[str, Any]]] = {}
        for pod in kube.list_all("list", "pods", kube.core.list_pod_for_all_namespaces, label_selector=JOB_LABEL):
            owner = next((ref for ref in (pod.get("metadata") or {}).get("ownerReferences") or []
                          if ref.get("kind") == "Job"), None)
            if owner:
                pods.setdefault(str(owner.get("uid")), []).append(pod)
        labelled = {raw["metadata"]["uid"]: raw for raw in raws}
        release_finalizer(kube, [pod for uid, owned in pods.items() if uid not in labelled for pod in owned])
        ids = {int(value) for raw in raws if (value := raw["metadata"].get("labels", {}).get(JOB_LABEL, "")).isdigit()}
        tags = {pk: job_tag(token) for pk, token in Job.objects.filter(pk__in=ids).values_list("pk", "report_token")}
        found: dict[int, KubeJob] = {}
        for uid, raw in labelled.items():
            labels = raw["metadata"].get("labels") or {}
            pk = int(labels[JOB_LABEL]) if str(labels.get(JOB_LABEL, "")).isdigit() else None
            if pk is not None and tags.get(pk) == labels.get(TAG_LABEL):
                found[pk] = KubeJob(raw, pods.get(uid, []))
            elif not (raw.get("status") or {}).get("completionTime"):
                self.notes.append(f"Kubernetes Job {raw['metadata'].get('namespace')}/{raw['metadata']['name']} says "
                                  f"it runs console job {labels.get(JOB_LABEL)}, which does not know it: left alone")
        return found

    # --- observe ---------------------------------------------------------------------------------------------

    def observe(self, snap: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        finished: list[tuple[Job, str, str, datetime]] = []
        with transaction.atomic():
            # Waiting ones too: their Jobs exist (suspended) and can be deleted or resumed behind the console's back.
            jobs = list(Job.objects.select_for_update().filter(state__in=[*ACTIVE_STATES, *WAITING_STATES]))
            changed = []
            for job in jobs:
                before = (job.attained_gpu_seconds, job.accounted_at, job.state)
                ending = self._observe_one(job, now)
                if ending is not None:
                    finished.append((job, *ending))
                elif (job.attained_gpu_seconds, job.accounted_at, job.state) != before:
                    changed.append(job)
            update_many(Job, ["attained_gpu_seconds", "accounted_at", "state"], changed)  # a still queue: no writes
            for job, state, reason, at in finished:
                finish_jobs([job], {job.pk: at}, state, reason)
                if state == JobState.FAILED:
                    Job.objects.filter(pk=job.pk).update(error=reason[:2000])
        assert self.kube is not None  # refresh_inventory connected
        for job, kube_job in self.resuspend:
            self._guarded(job, now, partial(self._patch, self.kube, job, kube_job, {"spec": {"suspend": True}}))
        self._queue_in_kubernetes(now)
        return snap

    def _observe_one(self, job: Job, now: datetime) -> tuple[str, str, datetime] | None:
        """Bring one active job up to date; (state, reason, when) when it ended."""
        kube_job = self.jobs.get(job.pk)
        if kube_job is None:
            if job.cluster_job_id:  # it had a Job, which is gone: deleted outside the console
                self.notes.append(f"job {job.pk}: its Kubernetes Job was deleted outside the console")
                return JobState.FAILED, "its Kubernetes Job was deleted outside the console", now
            return None
        if job.cluster_job_id != kube_job.uid:
            Job.objects.filter(pk=job.pk).update(cluster_job_id=kube_job.uid)
            job.cluster_job_id = kube_job.uid
        self._charge(job, kube_job, now)
        if kube_job.condition("Complete"):
            return JobState.SUCCEEDED, "finished: its Kubernetes Job completed", _ended(kube_job, now)
        failed = kube_job.condition("Failed")
        if failed:
            why = f"Kubernetes failed it: {failed.get('reason') or ''} {failed.get('message') or ''}".strip()
            return JobState.FAILED, why[:500], _ended(kube_job, now)
        running = kube_job.running_pods()
        if running and job.state == JobState.RESCALING and not kube_job.suspended:
            job.state = JobState.RUNNING
            started = (moment for pod in running if (moment := container_started(pod)))
            delay = measure_restart(job.pk, max(started, default=now))
            if delay is not None:
                self.measured_restarts.append(delay)
        self._edited_outside(job, kube_job)
        return None

    def _edited_outside(self, job: Job, kube_job: KubeJob) -> None:
        """A Job changed behind the console's back is reported; one resumed while the console has it wait is
        suspended again (the console decides where and when it runs), one suspended while it should run is left as
        the operator set it. Only once the console's own last decision for it was carried out (acknowledged)."""
        if job.launched_generation < job.generation:
            return
        if job.state in WAITING_STATES and not kube_job.suspended:
            self.notes.append(f"job {job.pk}: its Job {kube_job.name} was resumed outside the console while it waits; "
                              "suspended again")
            self.resuspend.append((job, kube_job))
        elif job.state == JobState.RUNNING and kube_job.suspended:
            self.notes.append(f"job {job.pk}: its Job {kube_job.name} was suspended outside the console; left so "
                              "(resume it, or cancel the job)")

    def _charge(self, job: Job, kube_job: KubeJob, now: datetime) -> None:
        """GPU time from each pod's own times (``mirror.charge_runs``): the API's, so the console counts exactly
        what Kubernetes shows. A pod a resize or preemption deleted is kept in the API, ended (the accounting
        finalizer), so its last seconds are counted the round after; the new pods start after the round that
        placed them, so after the last count (it ends ``REPORT_LAG`` before the round), and count from their
        start."""
        ended = bool(kube_job.condition("Complete") or kube_job.condition("Failed"))
        charge_runs(job, container_runs(kube_job.pods), ended, now)

    def _queue_in_kubernetes(self, now: datetime) -> None:
        """Waiting console jobs as suspended Jobs (``QUEUE_CREATES`` a round), their reasons kept up to date."""
        assert self.kube is not None
        kube = self.kube
        waiting = Job.objects.select_related("tenant", "owner").filter(state=JobState.PENDING).order_by(
            "submitted_at", "pk")
        made = 0
        reasons_until = time.monotonic() + REASON_SECONDS
        for job in waiting.iterator():
            kube_job = self.jobs.get(job.pk)
            if kube_job is None and made < QUEUE_CREATES:
                made += 1
                self._guarded(job, now, partial(self._create, kube, job, None, suspend=True))
            elif (kube_job is not None and kube_job.suspended and time.monotonic() < reasons_until
                  and _annotation(kube_job, REASON_ANNOTATION) != waiting_reason(job)):
                self._guarded(job, now, partial(self._patch, kube, job, kube_job, {
                    "metadata": {"annotations": {REASON_ANNOTATION: waiting_reason(job)}}}))

    # --- launch ----------------------------------------------------------------------------------------------

    def launch(self, launches: Sequence[Launch], now: datetime) -> None:
        """Carry every launch out; Jobs that must leave their nodes are suspended together and waited for together
        (``SUSPEND_WAIT_SECONDS`` in all)."""
        if not launches:
            return
        kube = self.kube or connect()
        jobs = Job.objects.select_related("tenant", "owner").in_bulk([launch.job_id for launch in launches])
        moving: list[tuple[Launch, Job, KubeJob]] = []
        for launch in launches:
            job = jobs.get(launch.job_id)
            if job is None:
                acknowledge([launch])
                continue
            outcome = self._guarded(job, now, partial(self._carry_out, kube, launch, job))
            if outcome is None:
                return  # the API did not answer: what is not acknowledged is resent by the next round
            if isinstance(outcome, KubeJob):
                moving.append((launch, job, outcome))
            elif outcome:
                acknowledge([launch])
        gone = self._wait_until_off_their_nodes(kube, [kube_job for _, _, kube_job in moving])
        for launch, job, kube_job in moving:
            if kube_job.uid not in gone:
                self.notes.append(still_leaving(job, kube_job))
            elif self._guarded(job, now, partial(self._place, kube, job, kube_job, Placement.of(launch))):
                acknowledge([launch])

    def _carry_out(self, kube: Kube, launch: Launch, job: Job) -> bool | KubeJob:
        """Make the cluster match ``launch``: True when done, False to try again, the Job when it was suspended and
        is to be placed once its pods are gone."""
        kube_job = self.jobs.get(job.pk)
        if not launch.gpus:
            return self._stop(kube, job, kube_job)
        placement = Placement.of(launch)
        if kube_job is None:
            self._count_until_placed(job, None)
            self._create(kube, job, placement, suspend=False)
            return True
        if not kube_job.suspended:
            if kube_job.placement().same_as(placement):
                return True  # already where it should be
            self._patch(kube, job, kube_job, {"spec": {"suspend": True}})
            return kube_job
        if not all(pod_ended(pod) for pod in kube_job.pods):
            return kube_job  # suspended, its pods still leaving
        self._place(kube, job, kube_job, placement)
        return True

    def _stop(self, kube: Kube, job: Job, kube_job: KubeJob | None) -> bool:
        """A job given no GPUs: its Job deleted when the console ended it while it ran or waited (its pods stopped
        gracefully) — one Kubernetes finished is left for its history —, else suspended (preempted: it checkpoints
        and waits)."""
        if kube_job is None or kube_job.condition("Complete") or kube_job.condition("Failed"):
            return True
        if job.state in FINISHED_STATES:
            kube.call("delete", "jobs", kube.batch.delete_namespaced_job, kube_job.name, job.tenant.name,
                      propagation_policy="Background")
        elif not kube_job.suspended:
            self._patch(kube, job, kube_job, {"spec": {"suspend": True},
                                              "metadata": {"annotations": {REASON_ANNOTATION: waiting_reason(job)}}})
        return True

    def _create(self, kube: Kube, job: Job, placement: Placement | None, suspend: bool) -> bool:
        """Its Job, and its folder under ``JOB_DIR`` (which the nodes share: its checkpoints live there)."""
        claim_job_dir(job.pk, job_tag(job.report_token))
        checkpoint_dir(job.pk).mkdir(parents=True, exist_ok=True)
        body = manifest(job, placement, suspend)
        try:
            made = kube.call("create", "jobs", kube.batch.create_namespaced_job, job.tenant.name, body)
        except KubernetesRefused as refused:
            if refused.status != 409:
                raise
            self.notes.append(f"job {job.pk}: a Job named {job_name(job)} exists already; the next round reads it")
            return False
        Job.objects.filter(pk=job.pk).update(cluster_job_id=made.metadata.uid)
        job.cluster_job_id = made.metadata.uid
        self.jobs[job.pk] = KubeJob(kube.api.sanitize_for_serialization(made), [])  # this round's launches see it
        self._rendezvous(kube, job, made.metadata.uid)
        return True

    def _rendezvous(self, kube: Kube, job: Job, uid: str) -> None:
        """The headless Service that gives the Job's pods their DNS names (``MASTER_ADDR``: rank 0's), owned by
        the Job, so that deleting the Job deletes it."""
        name = job_name(job)
        service = {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": name, "labels": {JOB_LABEL: str(job.pk)}, "ownerReferences": [
                       {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid}]},
                   "spec": {"clusterIP": "None", "selector": {JOB_LABEL: str(job.pk)}}}
        try:
            kube.call("create", "services", kube.core.create_namespaced_service, job.tenant.name, service)
        except KubernetesRefused as refused:
            if refused.status != 409:
                raise

    def _place(self, kube: Kube, job: Job, kube_job: KubeJob, placement: Placement) -> bool:
        """A suspended Job, off its nodes: given ``placement`` and resumed."""
        self._count_until_placed(job, kube_job)
        spec = manifest(job, placement, suspend=False)["spec"]
        template = spec["template"]
        patch = {"metadata": {"annotations": {REASON_ANNOTATION: ""}},
                 "spec": {"completions": spec["completions"], "parallelism": spec["parallelism"],
                          "template": {"metadata": {"annotations": template["metadata"]["annotations"]},
                                       "spec": {"affinity": template["spec"]["affinity"], "containers": [
                                           {"name": container["name"], "resources": container["resources"]}
                                           for container in template["spec"]["containers"]]}}}}
        self._patch(kube, job, kube_job, patch)
        self._patch(kube, job, kube_job, {"spec": {"suspend": False}})
        return True

    @staticmethod
    def _count_until_placed(job: Job, kube_job: KubeJob | None) -> None:
        """Before its new pods: its ended pods charged up to their ends, and the count taken back to the last end,
        so the new pods count from their own start — both in the API's whole seconds (a new pod starts after the
        last end; the round's own moment, which the round set, may be later than the second the API gives)."""
        runs = container_runs(kube_job.pods) if kube_job else []
        if any(ended is None for _, _, ended in runs):
            return  # not off its nodes: not placed this round
        last_end = max((ended for _, _, ended in runs if ended), default=None)
        if last_end is not None:
            charge_runs(job, runs, True, last_end)
        job.accounted_at = last_end
        Job.objects.filter(pk=job.pk).update(attained_gpu_seconds=job.attained_gpu_seconds,
                                             accounted_at=job.accounted_at)

    def _patch(self, kube: Kube, job: Job, kube_job: KubeJob, patch: dict[str, Any]) -> bool:
        kube.call("patch", "jobs", kube.batch.patch_namespaced_job, kube_job.name, job.tenant.name, patch)
        return True

    def _wait_until_off_their_nodes(self, kube: Kube, kube_jobs: list[KubeJob]) -> set[str]:
        """Wait (``SUSPEND_WAIT_SECONDS`` in all) until suspended Jobs have no pod left running; their uids. Each
        Job's pods as last listed (ended, with their times) replace those read at the round's start."""
        wanted = {kube_job.uid: kube_job for kube_job in kube_jobs}
        gone: set[str] = set()
        deadline = time.monotonic() + SUSPEND_WAIT_SECONDS
        while set(wanted) - gone and time.monotonic() < deadline:
            pods: dict[str, list[Mapping[str, Any]]] = {uid: [] for uid in wanted}
            for pod in kube.list_all("list", "pods", kube.core.list_pod_for_all_namespaces, label_selector=JOB_LABEL):
                owner = next((ref.get("uid") for ref in (pod.get("metadata") or {}).get("ownerReferences") or []
                              if ref.get("kind") == "Job"), None)
                if owner in pods:
                    pods[owner].append(pod)
            for uid, kube_job in wanted.items():
                kube_job.pods = pods[uid]
            gone = {uid for uid, owned in pods.items() if all(pod_ended(pod) for pod in owned)}
            if gone != set(wanted):
                time.sleep(0.25)
        return gone

    def _guarded(self, job: Job, now: datetime, step: Callable[[], Any]) -> Any:
        """``step()``, with the API's answers turned into the round's: None when it did not answer, False when it
        refused (a Job it refuses outright fails its console job with the reason)."""
        try:
            return step()
        except KubernetesUnavailable as error:
            self.notes.append(f"Kubernetes did not answer while launching job {job.pk}: {error}")
            return None
        except OSError as error:  # its folder under JOB_DIR cannot be made: tried again next round
            self.notes.append(f"job {job.pk}: its folder under JOB_DIR cannot be prepared ({error.strerror})")
            return False
        except KubernetesRefused as error:
            self.notes.append(f"job {job.pk}: {error}")
            if job.cluster_job_id or error.status == 403:
                return False
            with transaction.atomic():  # the cluster refused the job itself: it cannot run, say why
                locked = Job.objects.select_for_update().get(pk=job.pk)
                finish_jobs([locked], {locked.pk: now}, JobState.FAILED, f"Kubernetes refused it: {error}")
                Job.objects.filter(pk=job.pk).update(error=str(error)[:2000])
            return True


def release_finalizer(kube: Kube, pods: list[Mapping[str, Any]]) -> None:
    """Pods whose Job is deleted (a cancel, an operator) wait for the console's accounting finalizer: released,
    so they go (their GPU time was charged while their job ran). A conflict is retried next round."""
    for pod in pods:
        metadata = pod.get("metadata") or {}
        finalizers = list(metadata.get("finalizers") or [])
        if ACCOUNTING_FINALIZER not in finalizers:
            continue
        at = finalizers.index(ACCOUNTING_FINALIZER)
        patch = [{"op": "test", "path": f"/metadata/finalizers/{at}", "value": ACCOUNTING_FINALIZER},
                 {"op": "remove", "path": f"/metadata/finalizers/{at}"}]
        try:
            kube.call("patch", "pods", kube.core.patch_namespaced_pod, metadata.get("name"),
                      metadata.get("namespace"), patch)
        except KubernetesRefused as refused:
            if refused.status not in (404, 409, 422):  # gone, changed meanwhile, or its list moved: next round
                raise


def still_leaving(job: Job, kube_job: KubeJob) -> str:
    """The round's words on a suspended job whose pods have not stopped: where, and what frees a node that no
    longer answers (its pods stay until Kubernetes knows them stopped)."""
    nodes = sorted({str((pod.get("spec") or {}).get("nodeName") or "?") for pod in kube_job.pods
                    if not pod_ended(pod)})
    return (f"job {job.pk}: placed anew once its pods on {', '.join(nodes)} have stopped; a node that no longer "
            "answers frees them only when it returns, is deleted, or is tainted node.kubernetes.io/out-of-service")


def _annotation(kube_job: KubeJob, name: str) -> str:
    return str((kube_job.raw["metadata"].get("annotations") or {}).get(name) or "")


def _ended(kube_job: KubeJob, now: datetime) -> datetime:
    return time_of((kube_job.raw.get("status") or {}).get("completionTime")) or now


def check_job(job: Job) -> None:
    """A new job on Kubernetes: no batch script, and a tenant whose namespace the cluster has (with the cluster
    away, accepted: the round that creates its Job says what the cluster thinks)."""
    refuse_scripts(job)
    if not job.command:
        raise ValidationError({"command": "On Kubernetes a job runs its command; give one."})
    try:
        kube = connect()
        kube.call("get", "namespaces", kube.core.read_namespace, job.tenant.name)
    except KubernetesRefused as refused:
        if refused.status == 404:
            raise ValidationError({"tenant": f"Kubernetes has no namespace {job.tenant.name!r} for this tenant."}) \
                from None
        if refused.status != 403:
            raise ValidationError({"tenant": str(refused)}) from None
    except KubernetesError:
        return


register_backend("kubernetes", lambda config: KubernetesExecutor(),
                 label="Kubernetes (the console schedules, Kubernetes runs the jobs)", check_submission=check_job,
                 compare_accounting=api_comparison, even_spread=True)
