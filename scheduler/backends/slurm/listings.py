"""Slurm's parsable listings — ``squeue``'s jobs and ``sacct``'s runs — read as records, whatever free text they hold.

Why not slurmrestd: its job listing costs about half a millisecond a job on Slurm 24.11 (10,000 jobs: 5–10 s, and
slurmrestd's memory grows by about a gigabyte each time); ``squeue`` and ``sacct`` print the same in a tenth of a
second, the same way on every release. Times are asked as epoch seconds (``SLURM_TIME_FORMAT=%s``).

A job's name and comment are free text: they may hold the delimiter and newlines, so a line of one could pass for
another job's record. Each listing is therefore read in two calls. The first prints numbers and Slurm's own words
only, one job a line: the records. Then one call per text prints ids with that text; a line that does not begin with
a job id of the first call continues the text before it, and an id met more often than in the first call (text
that forged a line) gets no text at all — a forged line can blank a name, never make or change a job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from scheduler.backends.slurm.records import (
    MAX_MINUTES,
    AccountedRun,
    SlurmJob,
    epoch_time,
    expand_hostlist,
    parse_gres,
)

SEPARATOR = "|"
TEXT_LENGTH = 200  # of a name or comment kept
# squeue --Format fields, one job a line: no free text among them.
SQUEUE_FIELDS = ("JobID", "State", "Reason", "PriorityLong", "UserName", "Account", "tres-per-node", "tres-alloc",
                 "NumNodes", "NodeList", "SubmitTime", "StartTime", "EndTime", "TimeLimit", "RestartCnt", "exit_code")
# sacct -o fields (with --duplicates, one run a line): no free text among them.
SACCT_FIELDS = ("JobIDRaw", "Account", "User", "AllocTRES", "Submit", "Start", "End", "State")
UNSET = frozenset({"", "N/A", "NONE", "UNKNOWN", "UNLIMITED", "INVALID", "PARTITION_LIMIT"})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"})


def squeue_format(fields: Iterable[str]) -> str:
    """``--Format`` for ``fields``, each printed whole (``:0``) and followed by the separator but the last."""
    names = list(fields)
    return ",".join(f"{name}:0{SEPARATOR if number < len(names) - 1 else ''}" for number, name in enumerate(names))


def queue_jobs(lines: Iterable[str], names: Mapping[int, str]) -> list[SlurmJob]:
    """``squeue --Format=squeue_format(SQUEUE_FIELDS)`` lines as jobs, named from ``names`` (``free_text``); a line
    that is not a job's is skipped. A running job's GPUs per node are its per-node request on each of its nodes;
    one without a per-node request (``--gpus``) on several nodes is read as its total over one node each — the
    caller asks slurmrestd for the real split (``uneven``)."""
    jobs = []
    for line in lines:
        fields = line.split(SEPARATOR)
        if len(fields) != len(SQUEUE_FIELDS) or not fields[0].isdigit():
            continue
        jobs.append(_queued(dict(zip(SQUEUE_FIELDS, fields, strict=True)), names))
    return jobs


def uneven(job: SlurmJob) -> bool:
    """A running job on several nodes whose split of GPUs over them ``squeue`` cannot say."""
    return job.state in RUNNING_STATES and len(job.nodes) > 1 and not job.gpus_per_node


def _queued(row: Mapping[str, str], names: Mapping[int, str]) -> SlurmJob:
    job_id, state = int(row["JobID"]), _state(row["State"])
    running, pending = state in RUNNING_STATES, state == "PENDING"
    gpu_type, per_node = parse_gres(row["tres-per-node"])
    allocated_type, total = _tres_gpus(row["tres-alloc"])
    nodes = expand_hostlist(row["NodeList"]) if running and row["NodeList"] not in UNSET else ()
    if per_node:
        gpus_per_node = {node: per_node for node in nodes}
    else:  # a request per job (--gpus): on one node it is all there; on several, not said
        gpus_per_node = {nodes[0]: total} if len(nodes) == 1 and total else {}
    node_count = _integer(row["NumNodes"]) or 1
    started = _time(row["StartTime"])
    return SlurmJob(
        id=job_id, name=names.get(job_id, ""), comment="", account=row["Account"], user=row["UserName"], state=state,
        reason=row["Reason"] if row["Reason"].upper() not in UNSET else "", nodes=nodes, gpus_per_node=gpus_per_node,
        gpu_type=gpu_type or allocated_type, submitted_at=_time(row["SubmitTime"]) or datetime.now(UTC),
        started_at=None if pending else started, ended_at=None if running or pending else _time(row["EndTime"]),
        restarts=_integer(row["RestartCnt"]) or 0, exit_code=_integer(row["exit_code"].partition(":")[0]),
        time_limit_seconds=duration_seconds(row["TimeLimit"]), expected_start=started if pending else None,
        requested_gpus=per_node * node_count if per_node else total, priority=_priority(row["PriorityLong"]),
    )


def accounted_runs(lines: Iterable[str], comments: Mapping[int, str], names: Mapping[int, str]) -> list[AccountedRun]:
    """``sacct -P -n -o SACCT_FIELDS`` lines as runs, with their jobs' comments and names (``free_text``)."""
    runs = []
    for line in lines:
        fields = line.split(SEPARATOR)
        if len(fields) != len(SACCT_FIELDS) or not fields[0].isdigit():
            continue
        row = dict(zip(SACCT_FIELDS, fields, strict=True))
        job_id = int(row["JobIDRaw"])
        runs.append(AccountedRun(
            job_id=job_id, account=row["Account"], user=row["User"], gpus=_tres_gpus(row["AllocTRES"])[1],
            started_at=_time(row["Start"]), ended_at=_time(row["End"]), state=_state(row["State"]),
            comment=comments.get(job_id, ""), name=names.get(job_id, ""),
            submitted_at=_time(row["Submit"]) or datetime(1970, 1, 1, tzinfo=UTC),
        ))
    return runs


def free_text(text: str, expected: Mapping[int, int]) -> dict[int, str]:
    """Lines of ``<id>|<text>`` as each id's text, for the ids of ``expected`` (id → its lines in the first call:
    one a job in ``squeue``, one a run in ``sacct --duplicates``). A line that does not begin with a job id
    continues the text before it (that text held a newline); a line of an id not expected (a job that came between
    the two calls) is skipped; an id met more often than expected gets "", since another job's text forged one of
    its lines."""
    texts: dict[int, str] = {}
    met: Counter[int] = Counter()
    current: int | None = None
    for line in text.removesuffix("\n").split("\n"):
        head, separator, rest = line.partition(SEPARATOR)
        if separator and head.isdigit():  # a line of a job; one of a job that came since is not ours
            current = int(head) if int(head) in expected else None
            if current is not None:
                met[current] += 1
                texts[current] = rest
        elif current is not None:
            texts[current] += "\n" + line
    return {job_id: "" if met[job_id] > expected[job_id] else value[:TEXT_LENGTH] for job_id, value in texts.items()}


def duration_seconds(text: str) -> float | None:
    """Slurm's ``[days-]hours:minutes:seconds`` (or ``minutes:seconds``) → seconds; None for no limit or not one."""
    if text.strip().upper() in UNSET:
        return None
    days, dash, clock = text.strip().rpartition("-")
    parts = clock.split(":")
    if dash and not days.isdigit() or not 1 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
        return None
    seconds = 0
    for part in parts if len(parts) > 1 else [parts[0], "0"]:  # a bare number is minutes
        seconds = seconds * 60 + int(part)
    seconds += int(days or 0) * 86_400
    return float(seconds) if 0 < seconds < MAX_MINUTES * 60 else None


def _tres_gpus(text: str) -> tuple[str, int]:
    """``"cpu=1,gres/gpu:a100=2,gres/gpu=2"`` → ``("a100", 2)``: the GPUs of a TRES list and their type."""
    gpu_type, count = "", 0
    for item in text.split(","):
        name, _, value = item.partition("=")
        if not value.isdigit():
            continue
        if name == "gres/gpu":
            count = int(value)
        elif name.startswith("gres/gpu:"):
            gpu_type, count = name.removeprefix("gres/gpu:"), count or int(value)
    return gpu_type, count


def _state(text: str) -> str:
    """``"CANCELLED by 0"`` → ``"CANCELLED"``."""
    words = text.split()
    return words[0].upper() if words else "UNKNOWN"


def _time(text: str) -> datetime | None:
    return epoch_time(int(text)) if text.isdigit() else None


def _integer(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() and len(text) < 12 else None


def _priority(text: str) -> int:
    number = _integer(text)
    return number if number is not None and number < 2**32 else 0


