"""Talking to Slurm: slurmrestd first, the commands' JSON where REST lacks a verb.

One ``SlurmClient`` per round (``connect``). It reads the JWT from ``SLURM_JWT`` or ``SLURM_JWT_FILE`` at
each connection (tokens are rotated by their owners). The REST version is chosen from what the server's
``/openapi`` document offers: one adapter per version where the schemas differ (``ADAPTERS``): v0.0.38 (Slurm
22.05) and v0.0.40–v0.0.42 (Slurm 23.11–25.05), which share one.

Errors: ``SlurmUnavailable`` — no answer (connection refused, a timeout, a command that hangs): callers skip
and retry later, nothing is written. ``SlurmRefused`` — Slurm answered no; its message names the call and
Slurm's own error, never a body that is not Slurm's JSON.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from django.conf import settings

from scheduler.backends.slurm.commands import Commands
from scheduler.backends.slurm.listings import uneven
from scheduler.backends.slurm.records import (
    COMMENT_PREFIX,
    AccountedRun,
    JobSpec,
    SlurmError,
    SlurmJob,
    SlurmNode,
    SlurmRefused,
    SlurmUnavailable,
    comment_job_id,
    expand_hostlist,
    job_comment,
    job_tag,
    parse_gres,
)
from scheduler.backends.slurm.rest_v0038 import RestV0038
from scheduler.backends.slurm.rest_v0040 import RestV0040, RestV0041, RestV0042
from scheduler.backends.slurm.transport import RestTransport

__all__ = ["COMMENT_PREFIX", "AccountedRun", "JobSpec", "SlurmClient", "SlurmError", "SlurmJob", "SlurmNode",
           "SlurmRefused", "SlurmUnavailable", "comment_job_id", "connect", "expand_hostlist", "job_comment", "job_tag",
           "parse_gres"]


class RestAdapter(Protocol):
    """What every REST version's adapter offers."""

    version: str

    def ping(self) -> None: ...
    def nodes(self) -> list[SlurmNode]: ...
    def jobs(self) -> list[SlurmJob]: ...
    def job(self, job_id: int) -> SlurmJob | None: ...
    def submit(self, spec: JobSpec) -> int: ...
    def cancel(self, job_id: int) -> None: ...
    def place(self, job_id: int, gpus_per_node: Mapping[str, int], gpu_type: str) -> None: ...
    def release(self, job_id: int) -> None: ...
    def hold(self, job_id: int) -> None: ...
    def note(self, job_id: int, text: str) -> None: ...
    def accounts(self) -> set[str]: ...
    def associations(self, user: str) -> set[tuple[str, str]]: ...


ADAPTERS: dict[str, type[RestV0038] | type[RestV0040]] = {
    "v0.0.38": RestV0038, "v0.0.40": RestV0040, "v0.0.41": RestV0041, "v0.0.42": RestV0042}


def connect() -> SlurmClient:
    """A client for the Slurm of the settings, speaking the newest REST version both sides know."""
    if not settings.SLURM_REST_URL:
        raise SlurmUnavailable("SLURM_REST_URL is not set")
    transport = RestTransport(settings.SLURM_REST_URL, settings.SLURM_USER, _token(),
                              timeout=settings.SLURM_TIMEOUT_SECONDS)
    commands = Commands(settings.SLURM_CONF, settings.SLURM_TIMEOUT_SECONDS)
    return SlurmClient(_adapter(transport, commands), commands)


def _token() -> str:
    token = os.environ.get("SLURM_JWT", "").strip()
    if not token and settings.SLURM_JWT_FILE:
        try:
            token = Path(settings.SLURM_JWT_FILE).read_text().strip()
        except OSError as error:
            raise SlurmUnavailable(f"SLURM_JWT_FILE cannot be read ({error.strerror})") from None
    if not token:
        raise SlurmUnavailable("no Slurm token: set SLURM_JWT or SLURM_JWT_FILE")
    return token


def _adapter(transport: RestTransport, commands: Commands) -> RestAdapter:
    """The adapter for the newest REST version the server offers and the console speaks."""
    document = transport.call("GET", "/openapi")
    offered = {match for path in document.get("paths", {}) for match in re.findall(r"^/slurm/(v[\d.]+)/", path)}
    for version in sorted(ADAPTERS, key=_version_key, reverse=True):
        if version in offered:
            return ADAPTERS[version](transport, commands)
    raise SlurmRefused(f"slurmrestd offers {', '.join(sorted(offered)) or 'no Slurm API'}; Cluster Ops speaks "
                       f"{', '.join(sorted(ADAPTERS))}")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.removeprefix("v").split("."))


@dataclass
class SlurmClient:
    rest: RestAdapter
    commands: Commands

    def jobs_by_id(self, ids: Sequence[int] | None = None) -> dict[int, SlurmJob]:
        jobs = {job.id: job for job in self.rest.jobs()}
        return jobs if ids is None else {job_id: jobs[job_id] for job_id in ids if job_id in jobs}

    def queue(self) -> dict[int, SlurmJob]:
        """Every job, read for watching a cluster of any size: from ``squeue`` where it is installed (10,000 jobs in
        about 0.2 s, where slurmrestd takes 5–10 s on Slurm 24.11), with the split of GPUs over its nodes of a job
        that asked for GPUs per job from slurmrestd; else from slurmrestd alone."""
        if not self.commands.installed("squeue"):
            return self.jobs_by_id()
        jobs = {job.id: job for job in self.commands.queue()}
        for job_id in [job.id for job in jobs.values() if uneven(job)]:
            jobs[job_id] = self.rest.job(job_id) or jobs[job_id]
        return jobs
