"""What Cluster Ops reads from Slurm and sends it, whatever the REST version: nodes, jobs, a job to submit, runs in
accounting; the errors every Slurm call raises; the parsing of Slurm's own notations (GRES, host lists, times)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from scheduler.backends import ClusterUnavailable
from scheduler.backends.files import job_tag

# Slurm jobs the console submitted carry "cluster-ops:<job id>:<tag>" as comment (``job_comment``).
COMMENT_PREFIX = "cluster-ops:"
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"})  # a job on its nodes
T = TypeVar("T")


class SlurmError(ClusterUnavailable):
    """Something about Slurm went wrong; the message is safe to show and store. Met while reading the cluster
    before a round, it skips the round."""


class SlurmUnavailable(SlurmError):
    """Slurm did not answer."""


class SlurmRefused(SlurmError):
    """Slurm answered with an error; ``error_number`` is Slurm's errno when it sent one."""

    def __init__(self, message: str, error_number: int | None = None) -> None:
        super().__init__(message)
        self.error_number = error_number


NOTHING_FOUND = 9003  # slurmdbd's "Nothing found with query": an empty answer, not an error


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
    admin_comment: str = ""  # on a job the console holds: why the console has it wait
    priority: int = 0  # Slurm's own (multifactor) priority; higher starts first

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
    user: str = ""  # the Slurm user it runs as (slurmrestd's impersonation); "" for the console's own


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
    return f"{COMMENT_PREFIX}{job_id}:{job_tag(report_token)}"


def comment_job_id(comment: str) -> int | None:
    number = comment.removeprefix(COMMENT_PREFIX).partition(":")[0] if comment.startswith(COMMENT_PREFIX) else ""
    return int(number) if number.isdigit() else None


def epoch_time(value: Any) -> datetime | None:
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


def readable(kind: str, parse: Callable[[Mapping[str, Any]], T], raw: Any) -> T:
    """``parse(raw)``, or ``SlurmRefused`` for a record that is not the shape this REST version promises."""
    try:
        return parse(raw)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise SlurmRefused(f"slurmrestd sent a {kind} record that Cluster Ops cannot read") from None


def found(call: Callable[[], Mapping[str, Any]]) -> Mapping[str, Any]:
    """``call()``'s answer; an empty one where slurmdbd says it found nothing (v0.0.38 says so with an error)."""
    try:
        return call()
    except SlurmRefused as refused:
        if refused.error_number == NOTHING_FOUND:
            return {}
        raise


def associations_of(user: str, document: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The (account, partition) pairs of ``user``'s associations in a slurmdb ``associations`` answer (the same
    shape in every REST version)."""
    return {(str(row.get("account") or ""), str(row.get("partition") or ""))
            for row in document.get("associations") or [] if isinstance(row, dict) and row.get("user") == user}


# --- slurmrestd's job and node records, as every version sends them -----------------------------------------------
# v0.0.38 sends a state as a word (a node's flags apart) and plain numbers; v0.0.40 and later a list of a base state
# and flags, and numbers that may be unset as {"set", "infinite", "number"}. One reading serves both.

NODE_BASE_STATES = frozenset({"IDLE", "DOWN", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "UNKNOWN"})
MAX_MINUTES = 10**8  # a time limit beyond this is no limit


def unwrapped(value: Any) -> Any:
    """``{"set": true, "number": n}`` → ``n``; an unset or infinite one → None; anything else as it is."""
    if isinstance(value, dict):
        return value.get("number") if value.get("set") and not value.get("infinite") else None
    return value


def _states(value: Any) -> list[str]:
    return [str(item).upper() for item in value] if isinstance(value, list) else [str(value or "UNKNOWN").upper()]


def node_record(raw: Mapping[str, Any]) -> SlurmNode:
    states = _states(raw.get("state")) + [str(flag).upper() for flag in raw.get("state_flags") or []]
    base = next((state for state in states if state in NODE_BASE_STATES), "UNKNOWN")
    gpu_type, gpus = parse_gres(str(raw.get("gres") or ""))
    return SlurmNode(
        name=str(raw["name"]), gpu_type=gpu_type, gpus=gpus, state=base.lower(),
        flags=frozenset(state for state in states if state != base),
        reason=str(raw.get("reason") or "")[:200], partitions=tuple(map(str, raw.get("partitions") or [])),
    )


def _job_state(states: list[str]) -> str:
    """One state, as v0.0.38 says it: the base state, or the phase a job on its nodes is in."""
    for phase in ("COMPLETING", "CONFIGURING"):
        if phase in states:
            return phase
    return states[0] if states else "UNKNOWN"


def _exit_code(value: Any) -> int | None:
    code = unwrapped(value.get("return_code")) if isinstance(value, dict) else value
    return code if isinstance(code, int) else None


def job_record(raw: Mapping[str, Any]) -> SlurmJob:
    """One job of ``jobs``: what it holds per node while on its nodes (``gres_detail``, one entry per node), else
    what it asks for; its start and end only once it has them."""
    state = _job_state(_states(raw.get("job_state")))
    running, pending = state in RUNNING_STATES, state == "PENDING"
    nodes = expand_hostlist(str(raw.get("nodes") or "")) if running else ()
    gpu_type, per_node = parse_gres(str(raw.get("tres_per_node") or ""))
    if running and raw.get("gres_detail"):
        gpus_per_node = dict(zip(nodes, (parse_gres(str(detail))[1] for detail in raw["gres_detail"]), strict=False))
    else:
        wanted = nodes or expand_hostlist(str(raw.get("required_nodes") or ""))
        gpus_per_node = {node: per_node for node in wanted}
    limit, node_count = unwrapped(raw.get("time_limit")), unwrapped(raw.get("node_count"))
    return SlurmJob(
        id=int(raw["job_id"]), name=str(raw.get("name") or ""), comment=str(raw.get("comment") or ""),
        account=str(raw.get("account") or ""), user=str(raw.get("user_name") or ""), state=state,
        reason=str(raw.get("state_reason") or ""), nodes=nodes, gpus_per_node=gpus_per_node, gpu_type=gpu_type,
        submitted_at=epoch_time(raw.get("submit_time")) or datetime.now(UTC),
        started_at=None if pending else epoch_time(raw.get("start_time")),
        ended_at=None if running or pending else epoch_time(raw.get("end_time")),
        restarts=int(raw.get("restart_cnt") or 0), exit_code=_exit_code(raw.get("exit_code")),
        time_limit_seconds=float(limit) * 60 if isinstance(limit, int) and 0 < limit < MAX_MINUTES else None,
        expected_start=epoch_time(raw.get("start_time")) if pending else None,
        requested_gpus=per_node * max(int(node_count or 1), 1), admin_comment=str(raw.get("admin_comment") or ""),
        priority=_priority(raw.get("priority")),
    )


def _priority(value: Any) -> int:
    """Slurm's priority: an unsigned 32-bit number (0 when unset or not one)."""
    number = unwrapped(value)
    return number if isinstance(number, int) and 0 <= number < 2**32 else 0
