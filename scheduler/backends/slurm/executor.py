"""The console schedules, Slurm executes: each round's decisions as Slurm jobs on exactly the decided nodes.

A console job becomes one Slurm batch job, submitted **held** with the comment ``cluster-ops:<job id>:<tag>`` as
soon as it waits (so ``squeue`` shows the console's queue), as its owner (``submission.slurm_user``), then, when a
round places it, pinned to the decided nodes and GPUs per node, eligible now (a REST job update; ``scontrol
update`` on 22.05) and released — Slurm never starts it anywhere the console did not decide. The Slurm job id is
stored at once, and a launch resent after a crash finds the job by its comment, so nothing is submitted twice.

- A **rescale** is checkpoint → requeue → resize → release: ``scontrol requeuehold`` sends the job SIGTERM (the
  example job checkpoints and exits 143), the job goes back to the queue held under the same id; once it has
  left its nodes it is pinned to its new place and released, and it resumes from its checkpoint.
- A **preemption** is the requeue-and-hold alone; resuming is the pin-and-release of a later start.
- A console **cancel** (a finished job still running in Slurm) is ``DELETE job``.

Slurm pins one GPU count per node (GPUs are asked for per node): the back-end registers ``even_spread``, so
rounds place a job that spans nodes with the same count on each (``core.placement``, rule 4). A placement that is
uneven all the same (a round of another back-end's settings) runs with the smallest count, and the round says so.

``observe`` charges GPU time as Slurm ran it (its GPUs × the time it was RUNNING: what ``sacct`` counts), moves
a rescaled job back to running once Slurm runs it, records finishes with Slurm's state, and reports — never
drops — a job one side knows and the other does not. Progress comes from the job's own reports (the API).
A Slurm that does not answer raises ``SlurmUnavailable`` from ``refresh_inventory``: the round is skipped.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pwd
import shlex
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import ClassVar

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from scheduler.backends import (
    Launch,
    acknowledge,
    charge_gpu_time,
    finish_jobs,
    measure_restart,
    register_backend,
)
from scheduler.backends.cluster_nodes import sync_inventory
from scheduler.backends.files import SLURM_LOG, checkpoint_dir, claim_job_dir
from scheduler.backends.slurm import submission
from scheduler.backends.slurm.accounting import sacct_comparison
from scheduler.backends.slurm.client import (
    JobSpec,
    SlurmClient,
    SlurmJob,
    SlurmRefused,
    SlurmUnavailable,
    connect,
    job_comment,
    job_tag,
)
from scheduler.bulk import update_many
from scheduler.core.types import ClusterSnapshot
from scheduler.models import ACTIVE_STATES, FINISHED_STATES, Allocation, Gpu, Job, JobState

logger = logging.getLogger(__name__)

RUNNING = frozenset({"RUNNING", "CONFIGURING"})
LEAVING = frozenset({"COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT"})
SUCCEEDED = frozenset({"COMPLETED"})
CANCELLED = frozenset({"CANCELLED"})
FAILED = frozenset({"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"})
ENDED = SUCCEEDED | CANCELLED | FAILED
QUEUE_SUBMITS = 200  # waiting jobs newly held in Slurm per round: a round stays short when many arrive at once
QUEUE_NOTES = 20  # changed reasons written to Slurm per round (a command each on 22.05): the rest follow later
# ... and at most this long spent writing them a round: on 22.05 each is an ``scontrol`` of 30–60 ms, and a queue of
# 1,000 jobs whose places move would otherwise cost every round a second.
QUEUE_NOTE_SECONDS = 0.25
REQUEUE_WAIT_SECONDS = 20.0  # how long a round waits for requeued jobs to leave their nodes (KillWait + margin)


@dataclass(frozen=True)
class Move:
    """A running job sent off its nodes (requeued and held), to be placed again once it has left them."""

    launch: Launch
    job: Job
    slurm_job: SlurmJob
    per_node: dict[str, int]
    gpu_type: str

    @property
    def changes_type(self) -> bool:
        return bool(self.gpu_type and self.slurm_job.gpu_type and self.gpu_type != self.slurm_job.gpu_type)


Outcome = bool | Move


@dataclass
class SlurmReader:
    """What both Slurm back-ends do first each round: read Slurm's nodes and jobs, and the inventory from them."""

    client: SlurmClient | None = None  # None: connect in ``refresh_inventory``
    notes: list[str] = field(default_factory=list)  # what the round should record (``SchedulingRound.note``)
    measured_restarts: list[float] = field(default_factory=list)  # seen while observing, for the round to price
    slurm_jobs: dict[int, SlurmJob] = field(default_factory=dict)

    def refresh_inventory(self, now: datetime) -> None:
        """Nodes and jobs as Slurm has them now; the inventory rows brought up to date."""
        self.client = self.client or connect()
        nodes = self.client.rest.nodes()
        self.slurm_jobs = self.read_jobs(self.client)
        self.notes += sync_inventory("slurm", nodes).notes()

    def read_jobs(self, client: SlurmClient) -> dict[int, SlurmJob]:
        """Slurm's jobs by id, as this back-end reads them."""
        return client.jobs_by_id()


@dataclass
class SlurmExecutor(SlurmReader):
    """The round's executor on a Slurm cluster (``SchedulerSettings.executor == "slurm"``)."""

    name: ClassVar[str] = "slurm"
    decides: ClassVar[bool] = True

    # --- observe -----------------------------------------------------------------------------------------------

    def observe(self, snap: ClusterSnapshot, now: datetime) -> ClusterSnapshot:
        finished: dict[int, tuple[datetime, str, str]] = {}
        measured: list[float] = []
        with transaction.atomic():
            jobs = list(Job.objects.select_for_update().filter(state__in=ACTIVE_STATES))
            for job in jobs:
                slurm_job = self.slurm_jobs.get(int(job.cluster_job_id)) if job.cluster_job_id else None
                if slurm_job is None:
                    if job.cluster_job_id:
                        self.notes.append(f"job {job.pk}: Slurm has no job {job.cluster_job_id}")
                    continue
                charge_slurm_time(job, slurm_job, now)
                if slurm_job.state in RUNNING and job.state == JobState.RESCALING:
                    job.state = JobState.RUNNING
                    delay = measure_restart(job.pk, slurm_job.started_at or now)
                    measured += [delay] if delay is not None else []
                elif slurm_job.state in ENDED:
                    finished[job.pk] = (slurm_job.ended_at or now, *ending(slurm_job))
            update_many(Job, ["attained_gpu_seconds", "accounted_at", "state"],
                        [job for job in jobs if job.pk not in finished])
            # Slurm's end is in whole seconds: never before the console's own allocation of the job began.
            held_since = dict(Allocation.objects.filter(job_id__in=finished, ended_at__isnull=True).values(
                "job_id").annotate(since=Max("started_at")).values_list("job_id", "since"))
            for job in jobs:  # each with its own state and reason
                if job.pk in finished:
                    at, state, reason = finished[job.pk]
                    at = max(at, held_since.get(job.pk) or at)
                    finish_jobs([job], {job.pk: at}, state, reason)
        self._report_strangers()
        self._queue_in_slurm(now)
        self.measured_restarts = measured  # this observation's, for the round to price
        progress = {str(job.pk): job for job in jobs}
        kept = tuple(
            job.progressed(progress[job.id].progress, progress[job.id].attained_gpu_seconds) if job.id in progress
            else job for job in snap.jobs if int(job.id) not in finished
        )
        return dataclasses.replace(snap, jobs=kept)

    def _queue_in_slurm(self, now: datetime) -> None:
        """The console's waiting jobs held in Slurm, so that ``squeue`` shows the queue the console has, each with
        the console's reason as its administrator comment (at most ``QUEUE_SUBMITS`` submits, and ``QUEUE_NOTES``
        changed reasons or ``QUEUE_NOTE_SECONDS`` of writing them, a round); a held Slurm job whose console job has
        ended, cancelled. A placement later pins and releases the held job (``_arrive``)."""
        client = self.client or connect()
        waiting = Job.objects.select_related("tenant", "owner").filter(state=JobState.PENDING).order_by(
            "submitted_at", "pk")
        submitted = noted = 0
        notes_until = time.monotonic() + QUEUE_NOTE_SECONDS
        for job in waiting.iterator():
            if submitted >= QUEUE_SUBMITS:
                break
            slurm_job = self._find(job)
            if slurm_job is None:
                step = partial(self._hold_in_slurm, client, job)
                submitted += 1
            elif (slurm_job.held and slurm_job.admin_comment != waiting_note(job) and noted < QUEUE_NOTES
                  and time.monotonic() < notes_until):
                step = partial(self._note_reason, client, job, slurm_job)
                noted += 1
            else:
                continue
            if self._guarded(job, now, step) is None:
                break  # Slurm did not answer: the next round goes on
        if submitted:  # the round's launches find them
            self.slurm_jobs.update(client.jobs_by_id())
        pending = [slurm_job.id for slurm_job in self.slurm_jobs.values()
                   if slurm_job.state == "PENDING" and slurm_job.console_job_id is not None]
        for job_id in Job.objects.filter(cluster_job_id__in=[str(i) for i in pending],
                                         state__in=FINISHED_STATES).values_list("cluster_job_id", flat=True):
            client.rest.cancel(int(job_id))

    def _note_reason(self, client: SlurmClient, job: Job, slurm_job: SlurmJob) -> bool:
        client.rest.note(slurm_job.id, waiting_note(job))
        return True

    def _hold_in_slurm(self, client: SlurmClient, job: Job) -> bool:
        """A held Slurm job for a waiting console job: its GPU type when it requires one, else untyped (the nodes it
        is pinned to when placed decide the type: Slurm 22.05 cannot type an untyped request later)."""
        job_id = client.rest.submit(self._spec(job, gres(job.gpu_type or "", job.min_gpus)))
        Job.objects.filter(pk=job.pk).update(cluster_job_id=str(job_id))
        job.cluster_job_id = str(job_id)
        client.rest.note(job_id, waiting_note(job))
        return True

    def _report_strangers(self) -> None:
        """Slurm jobs marked as the console's that no console job claims: reported, left alone."""
        marked = [job for job in self.slurm_jobs.values() if job.console_job_id is not None and job.state not in ENDED]
        ours = set(Job.objects.filter(cluster_job_id__in=[str(job.id) for job in marked]).values_list(
            "cluster_job_id", flat=True))
        for slurm_job in marked:
            if str(slurm_job.id) not in ours:
                self.notes.append(f"Slurm job {slurm_job.id} says it runs console job {slurm_job.console_job_id}, "
                                  "which does not know it: left alone")

    # --- launch ------------------------------------------------------------------------------------------------

    def launch(self, launches: Sequence[Launch], now: datetime) -> None:
        """Carry every launch out; a job that must leave its nodes first is requeued with all the others at once,
        and all are waited for together (``REQUEUE_WAIT_SECONDS`` in all), so a round of many rescales costs
        one requeue's time, not one per job."""
        if not launches:
            return
        client = self.client or connect()
        jobs = Job.objects.select_related("tenant").in_bulk([launch.job_id for launch in launches])
        types = dict(Gpu.objects.filter(uuid__in={gpu.uuid for launch in launches for gpu in launch.gpus})
                     .values_list("uuid", "model"))
        moves: list[Move] = []
        for launch in launches:
            job = jobs.get(launch.job_id)
            if job is None:
                acknowledge([launch])
                continue
            outcome = self._guarded(job, now, partial(self._carry_out, client, launch, job, types, now))
            if isinstance(outcome, Move):
                moves.append(outcome)
            elif outcome is None:
                return  # Slurm did not answer: what is not acknowledged is resent by the next round
            elif outcome:
                acknowledge([launch])
        left = self._wait_until_left(client, [move.slurm_job.id for move in moves])
        for move in moves:
            if move.slurm_job.id in left and self._guarded(move.job, now, partial(self._arrive, client, move)):
                acknowledge([move.launch])

    def _guarded(self, job: Job, now: datetime, step: Callable[[], Outcome]) -> Outcome | None:
        """``step()``, with Slurm's answers turned into the round's: None when Slurm did not answer, False when it
        refused (a job it refused outright fails with Slurm's reason)."""
        try:
            return step()
        except SlurmUnavailable as error:
            self.notes.append(f"Slurm did not answer while launching job {job.pk}: {error}")
            return None
        except OSError as error:  # its folder under JOB_DIR cannot be made: tried again next round
            self.notes.append(f"job {job.pk}: its folder under JOB_DIR cannot be prepared ({error.strerror})")
            return False
        except SlurmRefused as error:
            self.notes.append(f"job {job.pk}: {error}")
            if job.cluster_job_id:
                return False
            with transaction.atomic():  # Slurm refused the job itself: it cannot run, say why
                locked = Job.objects.select_for_update().get(pk=job.pk)
                finish_jobs([locked], {locked.pk: now}, JobState.FAILED, f"Slurm refused it: {error}")
                Job.objects.filter(pk=job.pk).update(error=str(error))
            return True

    def _carry_out(self, client: SlurmClient, launch: Launch, job: Job, types: Mapping[str, str],
                   now: datetime) -> Outcome:
        """Make Slurm match ``launch``: True when done, False to try again next round, a ``Move`` when the job
        was sent off its nodes and is to be placed once it has left them."""
        slurm_job = self._find(job)
        if not launch.gpus:
            return self._stop(client, job, slurm_job, now)
        per_node, gpu_type = self._placement(job, launch, types)
        if slurm_job is None or slurm_job.state in ENDED:
            self._submit(client, job, per_node, gpu_type)
            return True
        move = Move(launch, job, slurm_job, per_node, gpu_type)
        if slurm_job.state in RUNNING:
            if dict(slurm_job.gpus_per_node) == per_node and not move.changes_type:
                return True  # already where it should be
            self._charge_until(job, slurm_job, now)
            client.commands.requeue_hold(slurm_job.id)
            return move
        if slurm_job.state in LEAVING:
            return move
        return self._arrive(client, move)  # pending: placed now

    def _arrive(self, client: SlurmClient, move: Move) -> bool:
        """Place a job that is off its nodes: pinned and released, or, to another GPU type, a new Slurm job —
        Slurm 22.05 leaves a pending job whose GRES type was changed "never runnable" (BadConstraints), so its
        Slurm job is cancelled and a new one submitted under the same comment (the checkpoint folder is the
        console job's, so progress stays)."""
        if move.changes_type:
            client.rest.cancel(move.slurm_job.id)
            job_id = self._submit(client, move.job, move.per_node, move.gpu_type)
            self.notes.append(f"job {move.job.pk} moved from {move.slurm_job.gpu_type} to {move.gpu_type}: Slurm job "
                              f"{move.slurm_job.id} replaced by {job_id}")
            return True
        # A job held untyped stays untyped: the nodes it is pinned to are of the decided type.
        client.rest.place(move.slurm_job.id, move.per_node, move.gpu_type if move.slurm_job.gpu_type else "")
        client.rest.release(move.slurm_job.id)
        return True

    def _submit(self, client: SlurmClient, job: Job, per_node: dict[str, int], gpu_type: str) -> int:
        """A new held Slurm job for ``job``, its id stored before anything else, then pinned and released."""
        job_id = client.rest.submit(self._spec(job, gres(gpu_type, max(per_node.values()))))
        Job.objects.filter(pk=job.pk).update(cluster_job_id=str(job_id))
        job.cluster_job_id = str(job_id)
        client.rest.place(job_id, per_node, gpu_type)
        client.rest.release(job_id)
        return job_id

    def _stop(self, client: SlurmClient, job: Job, slurm_job: SlurmJob | None, now: datetime) -> bool:
        """A job given no GPUs: cancelled in Slurm when the console ended it, else requeued and held."""
        if slurm_job is None or slurm_job.state in ENDED:
            return True
        if job.state in FINISHED_STATES:
            client.rest.cancel(slurm_job.id)
        elif slurm_job.state in RUNNING:
            self._charge_until(job, slurm_job, now)
            client.commands.requeue_hold(slurm_job.id)
        elif slurm_job.state == "PENDING" and not slurm_job.held:
            client.rest.hold(slurm_job.id)
        return True

    def _find(self, job: Job) -> SlurmJob | None:
        """The job's Slurm job: by its stored id, else by comment (a submit whose answer was lost)."""
        if job.cluster_job_id:
            return self.slurm_jobs.get(int(job.cluster_job_id))
        comment = job_comment(job.pk, job.report_token)
        found = [sj for sj in self.slurm_jobs.values() if sj.comment == comment and sj.state not in ENDED]
        if found:
            job.cluster_job_id = str(found[0].id)
            Job.objects.filter(pk=job.pk).update(cluster_job_id=job.cluster_job_id)
            return found[0]
        return None

    def _placement(self, job: Job, launch: Launch, types: Mapping[str, str]) -> tuple[dict[str, int], str]:
        """Nodes → GPUs per node as Slurm can pin them (one count for all nodes), and the GRES type."""
        counts = Counter(gpu.hostname for gpu in launch.gpus)
        gpu_type = next((types[gpu.uuid] for gpu in launch.gpus if gpu.uuid in types), "")
        even = min(counts.values())
        if len(set(counts.values())) > 1:
            logger.error("job %s: an uneven placement reached Slurm", job.pk)  # placement spreads evenly here
            self.notes.append(f"job {job.pk}: Slurm pins one GPU count per node; the decided "
                              f"{' + '.join(map(str, counts.values()))} runs as {even} on each of {len(counts)} nodes")
        return {host: even for host in launch.hosts}, gpu_type

    def _spec(self, job: Job, gres: str) -> JobSpec:
        folder, user = claim_job_dir(job.pk, job_tag(job.report_token)), submission.slurm_user(job)
        for made in (folder, folder / "logs", checkpoint_dir(job.pk)):
            made.mkdir(parents=True, exist_ok=True)
            give_to(made, user)
        return JobSpec(
            name=job.name[:100], account=job.tenant.name, comment=job_comment(job.pk, job.report_token),
            script=batch_script(job), working_directory=str(folder), output=str(folder / "logs" / SLURM_LOG),
            environment={
                "PATH": "/usr/local/bin:/usr/bin:/bin", "CLUSTER_OPS_JOB_ID": str(job.pk),
                "CHECKPOINT_DIR": str(checkpoint_dir(job.pk)),
                "CLUSTER_OPS_REPORT_URL": f"{settings.PUBLIC_URL}/api/jobs/{job.pk}/report/",
                "CLUSTER_OPS_REPORT_TOKEN": job.report_token,
            },
            gres=gres,  # typed or not for good: Slurm 22.05 changes neither into the other
            time_limit_minutes=max(1, round(job.expected_seconds / 60)) if job.expected_seconds else None,
            user=user,
        )

    def _charge_until(self, job: Job, slurm_job: SlurmJob, now: datetime) -> None:
        """Charge a running job's Slurm time up to ``now``, before it is requeued."""
        with transaction.atomic():
            locked = Job.objects.select_for_update().get(pk=job.pk)
            charge_slurm_time(locked, slurm_job, now)
            locked.save(update_fields=["attained_gpu_seconds", "accounted_at"])

    def _wait_until_left(self, client: SlurmClient, slurm_ids: list[int]) -> set[int]:
        """Wait (``REQUEUE_WAIT_SECONDS`` in all) until requeued jobs are pending again, their nodes freed; the
        ones that are."""
        left: set[int] = set()
        deadline = time.monotonic() + REQUEUE_WAIT_SECONDS
        while slurm_ids and time.monotonic() < deadline:
            current = client.jobs_by_id(slurm_ids)
            left = {job_id for job_id in slurm_ids if job_id not in current or current[job_id].state == "PENDING"}
            if len(left) == len(slurm_ids):
                break
            time.sleep(0.5)
        return left


def charge_slurm_time(job: Job, slurm_job: SlurmJob, now: datetime) -> None:
    """Add the GPU time Slurm ran ``job`` since it was last counted (row not saved)."""
    if slurm_job.started_at is None or slurm_job.gpus <= 0:
        return
    if slurm_job.state in RUNNING:
        until = now
    elif slurm_job.ended_at is not None and slurm_job.state not in {"PENDING"}:
        until = slurm_job.ended_at
    else:
        return
    since = max(job.accounted_at or slurm_job.started_at, slurm_job.started_at)
    if until > since:
        job.accounted_at = since
        charge_gpu_time(job, slurm_job.gpus, until)


def waiting_note(job: Job) -> str:
    """What ``squeue -O admin_comment`` says of a console job Slurm holds: why the console has it wait."""
    reason = " ".join((job.pending_reason or "queued").split())[:200]  # one line: scontrol takes no newline
    return f"Cluster Ops: {reason}"


def give_to(folder: Path, user: str) -> None:
    """``folder`` owned by the Slurm user its job runs as, which writes its output and checkpoints there. Only a
    console running as root can give a folder away; otherwise the folder must be writable by that user already
    (a shared folder with the job users' group, say), which the job's first start shows."""
    if os.geteuid() != 0:
        return
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        logger.warning("Slurm user %s is not a user on this host: %s stays the console's", user, folder)
        return
    os.chown(folder, entry.pw_uid, entry.pw_gid)


def gres(gpu_type: str, per_node: int) -> str:
    return f"gpu:{gpu_type}:{per_node}" if gpu_type else f"gpu:{per_node}"


def ending(slurm_job: SlurmJob) -> tuple[str, str]:
    """The console state and reason of a job Slurm ended."""
    if slurm_job.state in SUCCEEDED:
        return JobState.SUCCEEDED, "finished: Slurm job completed"
    if slurm_job.state in CANCELLED:
        return JobState.CANCELLED, "cancelled in Slurm"
    code = f" (exit {slurm_job.exit_code})" if slurm_job.exit_code is not None else ""
    return JobState.FAILED, f"Slurm ended it: {slurm_job.state}{code}"


def batch_script(job: Job) -> str:
    """The batch script of a console job: its script from the allowed folder, or its command, run with exec so
    that Slurm's SIGTERM on requeue reaches it (to checkpoint)."""
    run = f"exec {shlex.quote(job.script_path)}" if job.script_path else f"exec /bin/bash -c {shlex.quote(job.command)}"
    return f"#!/bin/bash\n# Cluster Ops job {job.pk}\n{run}\n"


register_backend("slurm", lambda config: SlurmExecutor(), label="Slurm (the console schedules, Slurm runs the jobs)",
                 check_submission=submission.check_job, compare_accounting=sacct_comparison, even_spread=True)
