"""Slurm's own fairness: ``sshare``'s fair-share tree and ``sprio``'s priority factors, as the observer reads them.

An observer round reads both (their parsable output, the same on every release) and keeps the latest reading
(``ClusterFairness``), which the Fairness page shows per account and user beside the console's own measures. Each
number is checked finite and bounded; a line that is not one of ours is skipped, never echoed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from .commands import Commands

SSHARE_FIELDS = ("Account", "User", "RawShares", "NormShares", "RawUsage", "EffectvUsage", "FairShare")
# Job id, user, account, then the weighted factors: priority, age, fair share, job size, partition, QOS.
SPRIO_FORMAT = "%i|%u|%o|%Y|%A|%F|%J|%P|%Q"
MAX_ROWS = 5_000  # accounts × users, and waiting jobs: bounded whatever the cluster
MAX_NUMBER = 1e18
NAME_LENGTH = 100


@dataclass(frozen=True)
class ShareRow:
    """One association of ``sshare -a``: an account (``user`` "") or a user in it."""

    account: str
    user: str
    raw_shares: float | None
    norm_shares: float | None
    raw_usage: float | None
    effective_usage: float | None
    fair_share: float | None  # Slurm's fair-share factor, 0–1 (users only): 1 = has used nothing, 0.5 = its share


@dataclass(frozen=True)
class PriorityRow:
    """One waiting job of ``sprio``: its priority and the weighted factors it sums."""

    job_id: int
    user: str
    account: str
    priority: float
    age: float
    fair_share: float
    job_size: float
    partition: float
    qos: float


@dataclass(frozen=True)
class SlurmFairness:
    shares: tuple[ShareRow, ...]
    priorities: tuple[PriorityRow, ...]

    def as_json(self) -> dict[str, list[dict[str, object]]]:
        return {"shares": [asdict(row) for row in self.shares],
                "priorities": [asdict(row) for row in self.priorities]}

    @staticmethod
    def from_json(data: dict[str, list[dict[str, object]]]) -> SlurmFairness:
        return SlurmFairness(tuple(ShareRow(**row) for row in data.get("shares", [])),  # type: ignore[arg-type]
                             tuple(PriorityRow(**row) for row in data.get("priorities", [])))  # type: ignore[arg-type]


def read_fairness(commands: Commands) -> SlurmFairness:
    """``sshare -a`` and ``sprio`` now (``SlurmUnavailable``/``SlurmRefused`` as any command)."""
    shares = commands.run("sshare", "-a", "-P", "-n", "-o", ",".join(SSHARE_FIELDS))
    priorities = commands.run("sprio", "-h", "-o", SPRIO_FORMAT)
    return SlurmFairness(tuple(parse_shares(shares.splitlines())), tuple(parse_priorities(priorities.splitlines())))


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and abs(value) <= MAX_NUMBER else None


def _name(text: str) -> str:
    return text.strip()[:NAME_LENGTH]


def parse_shares(lines: Iterable[str]) -> list[ShareRow]:
    """``sshare -a -P -n`` lines (``SSHARE_FIELDS``); the tree's indentation dropped, the root left out."""
    rows = []
    for line in lines:
        fields = line.split("|")
        if len(fields) != len(SSHARE_FIELDS) or not fields[0].strip() or fields[0].strip() == "root" \
                and not fields[1].strip():
            continue
        numbers = [_number(field) for field in fields[2:]]
        rows.append(ShareRow(_name(fields[0]), _name(fields[1]), *numbers))
        if len(rows) == MAX_ROWS:
            break
    return rows


def parse_priorities(lines: Iterable[str]) -> list[PriorityRow]:
    """``sprio -h -o SPRIO_FORMAT`` lines."""
    rows = []
    for line in lines:
        fields = [field.strip() for field in line.split("|")]
        if len(fields) != 9 or not fields[0].isdigit():
            continue
        numbers = [_number(field) for field in fields[3:]]
        if any(number is None for number in numbers):
            continue
        rows.append(PriorityRow(int(fields[0]), _name(fields[1]), _name(fields[2]), *numbers))  # type: ignore[arg-type]
        if len(rows) == MAX_ROWS:
            break
    return rows
