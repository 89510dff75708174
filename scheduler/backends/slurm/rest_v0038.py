"""slurmrestd's v0.0.38 (Slurm 22.05, Debian 12): nodes, jobs, submit, cancel, the slurmdb accounts and
associations. It has no job update: placing, releasing and holding go through ``scontrol`` (``Commands``). Later
versions (``rest_v0040``) read the same and differ where they say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from scheduler.backends.slurm.commands import Commands
from scheduler.backends.slurm.records import (
    JobSpec,
    SlurmJob,
    SlurmNode,
    SlurmRefused,
    associations_of,
    found,
    job_record,
    node_record,
    readable,
)
from scheduler.backends.slurm.transport import RestTransport


class RestV0038:
    """v0.0.38's paths and job description; the records are read as every version's (``records``)."""

    version = "v0.0.38"
    trailing = ""  # after a collection's path: v0.0.40 and later list theirs with "/"

    def __init__(self, transport: RestTransport, commands: Commands) -> None:
        self.transport, self.commands = transport, commands

    def ping(self) -> None:
        self.transport.call("GET", self._path("slurm", "ping"))

    def nodes(self) -> list[SlurmNode]:
        document = self.transport.call("GET", self._path("slurm", "nodes"))
        return [readable("node", node_record, raw) for raw in document.get("nodes") or []]

    def jobs(self) -> list[SlurmJob]:
        document = self.transport.call("GET", self._path("slurm", "jobs"))
        return [readable("job", job_record, raw) for raw in document.get("jobs") or []]

    def job(self, job_id: int) -> SlurmJob | None:
        """One job as slurmctld has it; None when it knows no such job."""
        document = self.transport.call("GET", f"/slurm/{self.version}/job/{int(job_id)}")
        jobs = [readable("job", job_record, raw) for raw in document.get("jobs") or []]
        return next((job for job in jobs if job.id == job_id), None)

    def submit(self, spec: JobSpec) -> int:
        job = self._description(spec)
        if settings.SLURM_PARTITION:
            job["partition"] = settings.SLURM_PARTITION
        document = self.transport.call("POST", f"/slurm/{self.version}/job/submit", {"script": spec.script, "job": job},
                                       as_user=spec.user)
        job_id = document.get("job_id")
        if not isinstance(job_id, int):
            raise SlurmRefused(f"slurmrestd POST {self.version} job/submit: the answer has no job id")
        return job_id

    def _description(self, spec: JobSpec) -> dict[str, Any]:
        """The job as this version's ``job/submit`` takes it: held, requeueable, appending to its output."""
        job: dict[str, Any] = {
            "name": spec.name, "account": spec.account, "comment": spec.comment, "hold": True, "requeue": True,
            "gres": spec.gres, "current_working_directory": spec.working_directory,
            "standard_output": spec.output, "standard_error": spec.output, "open_mode": "append",
            "environment": dict(spec.environment) or {"PATH": "/usr/bin:/bin"},
        }
        if spec.time_limit_minutes:
            job["time_limit"] = spec.time_limit_minutes
        return job

    def cancel(self, job_id: int) -> None:
        self.transport.call("DELETE", f"/slurm/{self.version}/job/{int(job_id)}")

    def place(self, job_id: int, gpus_per_node: Mapping[str, int], gpu_type: str) -> None:
        self.commands.place(job_id, gpus_per_node, gpu_type)

    def release(self, job_id: int) -> None:
        self.commands.release(job_id)

    def hold(self, job_id: int) -> None:
        self.commands.hold(job_id)

    def note(self, job_id: int, text: str) -> None:
        """Set the job's administrator comment (``squeue -O admin_comment``)."""
        self.commands.run("scontrol", "update", f"JobId={int(job_id)}", f"AdminComment={text}")

    def accounts(self) -> set[str]:
        document = self.transport.call("GET", self._path("slurmdb", "accounts"))
        return {str(account.get("name")) for account in document.get("accounts") or [] if account.get("name")}

    def associations(self, user: str) -> set[tuple[str, str]]:
        """(account, partition) pairs ``user`` may submit to; partition "" means every partition."""
        document = found(lambda: self.transport.call("GET", self._path("slurmdb", "associations"),
                                                     params={"user": user}))
        return associations_of(user, document)

    def _path(self, api: str, collection: str) -> str:
        return f"/{api}/{self.version}/{collection}{self.trailing}"
