"""Talking to Slurm: slurmrestd first, the commands' JSON where REST lacks a verb.

One ``SlurmClient`` per round (``connect``). It reads the JWT from ``SLURM_JWT`` or ``SLURM_JWT_FILE`` at
each connection (tokens are rotated by their owners), sends it only as a header and never logs it. The REST
version is chosen from what the server's ``/openapi`` document offers: one adapter per version
(``ADAPTERS``); only v0.0.38 (Slurm 22.05, Debian 12) exists, because only it can be tested here.

Errors: ``SlurmUnavailable`` — no answer (connection refused, a timeout, a command that hangs): callers skip
and retry later, nothing is written. ``SlurmRefused`` — Slurm answered no; its message names the call and
Slurm's own error, never a body that is not Slurm's JSON. Reads (GET) are retried by urllib3's ``Retry``;
writes are not, since a submit that reached Slurm but lost its answer would run twice (the executor finds
such a job again by its comment instead).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from scheduler.backends import ClusterUnavailable

# Slurm jobs the console submitted carry "cluster-ops:<job id>:<tag>" as comment (``job_comment``).
COMMENT_PREFIX = "cluster-ops:"
HELD_NOTICE = 2042  # slurmrestd's "Job is in held state": a notice on a held submit, not an error
MAX_BODY = 16 * 1024 * 1024  # a slurmrestd answer larger than this is refused, not parsed
T = TypeVar("T")


class SlurmError(ClusterUnavailable):
    """Something about Slurm went wrong; the message is safe to show and store. Met while reading the cluster
    before a round, it skips the round."""


class SlurmUnavailable(SlurmError):
    """Slurm did not answer."""


class SlurmRefused(SlurmError):
    """Slurm answered with an error."""


@dataclass(frozen=True)
class SlurmNode:
    name: str
    gpu_type: str  # the GRES type, e.g. "a100"; "" when the node's GPUs have no type
    gpus: int
    state: str  # idle, mixed, allocated, down, …
    flags: frozenset[str] = frozenset()  # DRAIN, NOT_RESPONDING, …
    reason: str = ""
    partitions: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        """Slurm can run work on it: not down, not drained or draining, answering."""
        return self.state not in {"down", "future", "unknown"} and not (
            self.flags & {"DRAIN", "DRAINED", "DRAINING", "NOT_RESPONDING", "FAIL", "MAINTENANCE"}
        )


@dataclass(frozen=True)
class SlurmJob:
    id: int
    name: str
    comment: str
    account: str
    user: str
    state: str  # PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, …
    reason: str
    nodes: tuple[str, ...]
    gpus_per_node: Mapping[str, int]  # of what it holds now (running) or asks for (pending)
    gpu_type: str
    submitted_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    restarts: int
    exit_code: int | None = None
    time_limit_seconds: float | None = None
    expected_start: datetime | None = None  # Slurm's own start estimate of a pending job
    requested_gpus: int = 0  # what it asks for in all, placed or not

    @property
    def gpus(self) -> int:
        """The GPUs it holds on its nodes; for a job not placed yet, those it asks for."""
        return sum(self.gpus_per_node.values()) or self.requested_gpus

    @property
    def console_job_id(self) -> int | None:
        """The console's job this Slurm job says it runs (its comment); None for a job the console did not submit."""
        return comment_job_id(self.comment)

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and self.reason in {"JobHeldUser", "JobHeldAdmin", "job requeued in held state"}


@dataclass(frozen=True)
class JobSpec:
    """A console job as a Slurm batch job: submitted held, placed by ``place`` before it is released."""

    name: str
    account: str
    script: str
    comment: str
    working_directory: str
    output: str
    environment: Mapping[str, str] = field(default_factory=dict)
    gres: str = "gpu:1"
    time_limit_minutes: int | None = None


@dataclass(frozen=True)
class AccountedRun:
    """One run of a job in ``sacct`` (a requeued job has one per start)."""

    job_id: int
    account: str
    user: str
    gpus: int
    started_at: datetime | None
    ended_at: datetime | None
    state: str
    comment: str = ""
    name: str = ""
    submitted_at: datetime = datetime(1970, 1, 1, tzinfo=UTC)


def job_comment(job_id: int, report_token: str) -> str:
    """The comment that ties a Slurm job to one console job: its id and a tag from a hash of the job's secret, so
    that a console job id seen again (another console database, a reset one) never claims another's Slurm jobs."""
    return f"{COMMENT_PREFIX}{job_id}:{hashlib.sha256(report_token.encode()).hexdigest()[:12]}"


def comment_job_id(comment: str) -> int | None:
    number = comment.removeprefix(COMMENT_PREFIX).partition(":")[0] if comment.startswith(COMMENT_PREFIX) else ""
    return int(number) if number.isdigit() else None


def connect() -> SlurmClient:
    """A client for the Slurm of the settings, speaking the newest REST version both sides know."""
    if not settings.SLURM_REST_URL:
        raise SlurmUnavailable("SLURM_REST_URL is not set")
    transport = RestTransport(settings.SLURM_REST_URL, settings.SLURM_USER, _token(),
                              timeout=settings.SLURM_TIMEOUT_SECONDS)
    return SlurmClient(_adapter(transport), Commands(settings.SLURM_CONF, settings.SLURM_TIMEOUT_SECONDS))


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


class RestTransport:
    """JSON over HTTP to slurmrestd, with the JWT headers, a timeout on every call and retried reads."""

    def __init__(self, base_url: str, user: str, token: str, timeout: float) -> None:
        self.base_url, self.timeout = base_url.rstrip("/"), timeout
        self.session = requests.Session()
        self.session.headers.update({"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token,
                                     "Accept": "application/json"})
        retries = Retry(total=2, connect=2, read=1, backoff_factor=0.3, allowed_methods={"GET"},
                        status_forcelist=(502, 503, 504), raise_on_status=False)
        self.session.mount("http://", HTTPAdapter(max_retries=retries))
        self.session.mount("https://", HTTPAdapter(max_retries=retries))

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None,
             params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        what = f"slurmrestd {method} {path}"
        try:
            response = self.session.request(method, self.base_url + path, json=body, params=params,
                                            timeout=(min(self.timeout, 3.0), self.timeout))
        except requests.RequestException as error:
            raise SlurmUnavailable(f"{what}: no answer ({type(error).__name__})") from None
        if len(response.content) > MAX_BODY:
            raise SlurmRefused(f"{what}: an answer of {len(response.content)} bytes is too large")
        try:
            document = response.json()
        except ValueError:
            kind = SlurmUnavailable if response.status_code >= 500 else SlurmRefused  # a proxy's 502: Slurm is away
            raise kind(f"{what}: HTTP {response.status_code} with a body that is not JSON") from None
        if not isinstance(document, dict):
            raise SlurmRefused(f"{what}: HTTP {response.status_code} with JSON that is not an object")
        errors = [error for error in document.get("errors") or [] if isinstance(error, dict)
                  and error.get("error_code") != HELD_NOTICE]
        if errors or response.status_code >= 400:
            first = errors[0] if errors else {}
            if response.status_code >= 500 and "error_code" not in first:
                # v0.0.38 says only "Unspecified error" (errno -1) when slurmctld cannot be reached
                raise SlurmUnavailable(f"{what}: slurmrestd cannot reach Slurm (HTTP {response.status_code})")
            message = str(first.get("error") or first.get("description") or response.reason)[:200]
            raise SlurmRefused(f"{what}: {message} (HTTP {response.status_code}, "
                               f"Slurm error {first.get('error_code', 'none')})")
        return document


def _adapter(transport: RestTransport) -> RestV0038:
    """The adapter for the newest REST version the server offers and the console speaks."""
    document = transport.call("GET", "/openapi")
    offered = {match for path in document.get("paths", {}) for match in re.findall(r"^/slurm/(v[\d.]+)/", path)}
    for version in sorted(ADAPTERS, reverse=True):
        if version in offered:
            return ADAPTERS[version](transport)
    raise SlurmRefused(f"slurmrestd offers {', '.join(sorted(offered)) or 'no Slurm API'}; Cluster Ops speaks "
                       f"{', '.join(sorted(ADAPTERS))}")


def _time(value: Any) -> datetime | None:
    """Slurm's epoch seconds (0 and absurd values: not set) → an aware datetime."""
    if isinstance(value, dict):  # newer versions wrap numbers: {"set": true, "number": …}
        value = value.get("number") if value.get("set", True) else None
    if not isinstance(value, int | float) or not 0 < value < 4102444800:  # before 2100
        return None
    return datetime.fromtimestamp(value, UTC)


GRES = re.compile(r"gpu(?::(?P<type>[A-Za-z0-9_.-]+))?:(?P<count>\d+)")


def parse_gres(text: str) -> tuple[str, int]:
    """``"gpu:a100:4(S:0)"`` → ``("a100", 4)``; ``"gres:gpu:2"`` → ``("", 2)``; no GPU → ``("", 0)``."""
    for part in (text or "").split(","):
        match = GRES.search(part.removeprefix("gres:").removeprefix("gres/"))
        if match:
            return match.group("type") or "", int(match.group("count"))
    return "", 0


MAX_HOSTS = 100_000  # a host list that expands to more is refused, not expanded


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Slurm's ``"gpu[01-03],cpu7"`` → ``("gpu01", "gpu02", "gpu03", "cpu7")``; ``SlurmRefused`` beyond
    ``MAX_HOSTS`` names."""
    names: list[str] = []
    for match in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?", text or ""):
        prefix, ranges = match.group(1), match.group(2)
        if not ranges:
            names.append(prefix)
            continue
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            if not low.isdigit() or not (high or low).isdigit() or int(high or low) - int(low) > MAX_HOSTS - len(names):
                raise SlurmRefused("Slurm sent a host list that is not one, or names too many hosts")
            width = len(low)
            names.extend(f"{prefix}{number:0{width}d}" for number in range(int(low), int(high or low) + 1))
    return tuple(name for name in names if name)


class RestV0038:
    """slurmrestd's v0.0.38 (Slurm 22.05): nodes, jobs, submit, cancel; the slurmdb accounts."""

    version = "v0.0.38"

    def __init__(self, transport: RestTransport) -> None:
        self.transport = transport

    def ping(self) -> None:
        self.transport.call("GET", f"/slurm/{self.version}/ping")

    def nodes(self) -> list[SlurmNode]:
        document = self.transport.call("GET", f"/slurm/{self.version}/nodes")
        return [_readable("node", _node, raw) for raw in document.get("nodes") or []]

    def jobs(self) -> list[SlurmJob]:
        document = self.transport.call("GET", f"/slurm/{self.version}/jobs")
        return [_readable("job", _job, raw) for raw in document.get("jobs") or []]

    def submit(self, spec: JobSpec) -> int:
        job: dict[str, Any] = {
            "name": spec.name, "account": spec.account, "comment": spec.comment, "hold": True, "requeue": True,
            "gres": spec.gres, "current_working_directory": spec.working_directory,
            "standard_output": spec.output, "standard_error": spec.output, "open_mode": "append",
            "environment": dict(spec.environment) or {"PATH": "/usr/bin:/bin"},
        }
        if spec.time_limit_minutes:
            job["time_limit"] = spec.time_limit_minutes
        if settings.SLURM_PARTITION:
            job["partition"] = settings.SLURM_PARTITION
        document = self.transport.call("POST", f"/slurm/{self.version}/job/submit", {"script": spec.script, "job": job})
        job_id = document.get("job_id")
        if not isinstance(job_id, int):
            raise SlurmRefused("slurmrestd POST job/submit: the answer has no job id")
        return job_id

    def cancel(self, job_id: int) -> None:
        self.transport.call("DELETE", f"/slurm/{self.version}/job/{int(job_id)}")

    def accounts(self) -> set[str]:
        document = self.transport.call("GET", f"/slurmdb/{self.version}/accounts")
        return {str(account.get("name")) for account in document.get("accounts") or [] if account.get("name")}


ADAPTERS = {"v0.0.38": RestV0038}
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"})  # a job on its nodes


def _readable(kind: str, parse: Callable[[Mapping[str, Any]], T], raw: Any) -> T:
    """``parse(raw)``, or ``SlurmRefused`` for a record that is not the shape this REST version promises."""
    try:
        return parse(raw)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise SlurmRefused(f"slurmrestd sent a {kind} record that Cluster Ops cannot read") from None


def _node(raw: Mapping[str, Any]) -> SlurmNode:
    gpu_type, gpus = parse_gres(str(raw.get("gres") or ""))
    return SlurmNode(
        name=str(raw["name"]), gpu_type=gpu_type, gpus=gpus, state=str(raw.get("state") or "unknown").lower(),
        flags=frozenset(str(flag).upper() for flag in raw.get("state_flags") or []),
        reason=str(raw.get("reason") or "")[:200], partitions=tuple(map(str, raw.get("partitions") or [])),
    )


def _job(raw: Mapping[str, Any]) -> SlurmJob:
    """One job of v0.0.38's ``jobs``: what it holds per node while on its nodes (``gres_detail``, one entry per
    node), else what it asks for; its start and end only once it has them."""
    state = str(raw.get("job_state") or "UNKNOWN")
    running, pending = state in RUNNING_STATES, state == "PENDING"
    nodes = expand_hostlist(str(raw.get("nodes") or "")) if running else ()
    gpu_type, per_node = parse_gres(str(raw.get("tres_per_node") or ""))
    if running and raw.get("gres_detail"):
        gpus_per_node = dict(zip(nodes, (parse_gres(str(detail))[1] for detail in raw["gres_detail"]), strict=False))
    else:
        wanted = nodes or expand_hostlist(str(raw.get("required_nodes") or ""))
        gpus_per_node = {node: per_node for node in wanted}
    limit, exit_code = raw.get("time_limit"), raw.get("exit_code")
    return SlurmJob(
        id=int(raw["job_id"]), name=str(raw.get("name") or ""), comment=str(raw.get("comment") or ""),
        account=str(raw.get("account") or ""), user=str(raw.get("user_name") or ""), state=state,
        reason=str(raw.get("state_reason") or ""), nodes=nodes, gpus_per_node=gpus_per_node, gpu_type=gpu_type,
        submitted_at=_time(raw.get("submit_time")) or datetime.now(UTC),
        started_at=None if pending else _time(raw.get("start_time")),
        ended_at=None if running or pending else _time(raw.get("end_time")),
        restarts=int(raw.get("restart_cnt") or 0), exit_code=exit_code if isinstance(exit_code, int) else None,
        time_limit_seconds=float(limit) * 60 if isinstance(limit, int) and 0 < limit < 10**8 else None,
        expected_start=_time(raw.get("start_time")) if pending else None,
        requested_gpus=per_node * max(int(raw.get("node_count") or 1), 1),
    )


class Commands:
    """The Slurm commands, for what REST v0.0.38 cannot do: place a job on given nodes, requeue, per-run sacct."""

    def __init__(self, slurm_conf: str, timeout: float) -> None:
        self.env = dict(os.environ, **({"SLURM_CONF": slurm_conf} if slurm_conf else {}))
        self.timeout = timeout

    def run(self, *args: str) -> str:
        what = " ".join(args[:2])
        try:
            done = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(f"{what}: no answer within {self.timeout:g} s") from None
        except FileNotFoundError:
            raise SlurmUnavailable(f"{args[0]} is not installed") from None
        if done.returncode != 0:
            message = (done.stderr.strip().splitlines() or ["no message"])[-1][:200]
            if "Unable to contact slurm controller" in message or "Connection refused" in message:
                raise SlurmUnavailable(f"{what}: {message}")
            raise SlurmRefused(f"{what}: {message}")
        return done.stdout

    def place(self, job_id: int, gpus_per_node: Mapping[str, int], gpu_type: str) -> None:
        """Pin a pending job to exactly these nodes and GPUs per node, eligible now."""
        per_node = max(gpus_per_node.values())  # one count for every node: see SlurmExecutor._placement
        gres = f"gpu:{gpu_type}:{per_node}" if gpu_type else f"gpu:{per_node}"
        nodes = len(gpus_per_node)
        self.run("scontrol", "update", f"JobId={int(job_id)}", f"NodeList={','.join(gpus_per_node)}",
                 f"NumNodes={nodes}-{nodes}", f"Gres={gres}", "StartTime=now")

    def release(self, job_id: int) -> None:
        self.run("scontrol", "release", str(int(job_id)))

    def hold(self, job_id: int) -> None:
        self.run("scontrol", "hold", str(int(job_id)))

    def requeue_hold(self, job_id: int) -> None:
        """SIGTERM to the job (it checkpoints), back to the queue, held until placed again."""
        self.run("scontrol", "requeuehold", str(int(job_id)))

    def accounting(self, start: datetime, end: datetime) -> list[AccountedRun]:
        """Every run (``--duplicates``: each start of a requeued job) that overlaps [start, end]."""
        text = self.run("sacct", "--json", "--duplicates", "--allusers", "-X",
                        f"--starttime={start.astimezone(UTC):%Y-%m-%dT%H:%M:%S}",
                        f"--endtime={end.astimezone(UTC):%Y-%m-%dT%H:%M:%S}")
        try:
            document = json.loads(text)
        except ValueError:
            raise SlurmRefused("sacct --json printed something that is not JSON") from None
        return [_accounted_run(raw) for raw in document.get("jobs") or []]


def _accounted_run(raw: Mapping[str, Any]) -> AccountedRun:
    allocated = (raw.get("tres") or {}).get("allocated") or []
    gpus = sum(int(tres.get("count") or 0) for tres in allocated
               if tres.get("type") == "gres" and tres.get("name") == "gpu")
    times = raw.get("time") or {}
    comment = raw.get("comment") or {}
    return AccountedRun(
        job_id=int(raw["job_id"]), account=str(raw.get("account") or ""), user=str(raw.get("user") or ""),
        gpus=gpus, started_at=_time(times.get("start")), ended_at=_time(times.get("end")),
        state=str((raw.get("state") or {}).get("current") or ""),
        comment=str(comment.get("job") or "") if isinstance(comment, dict) else str(comment),
        name=str(raw.get("name") or "")[:200],
        submitted_at=_time(times.get("submission")) or datetime(1970, 1, 1, tzinfo=UTC),
    )


@dataclass
class SlurmClient:
    rest: RestV0038
    commands: Commands

    def jobs_by_id(self, ids: Sequence[int] | None = None) -> dict[int, SlurmJob]:
        jobs = {job.id: job for job in self.rest.jobs()}
        return jobs if ids is None else {job_id: jobs[job_id] for job_id in ids if job_id in jobs}
