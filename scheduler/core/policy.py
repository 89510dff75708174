"""The one interface every scheduling policy implements, and the registry that names them.

A policy maps a ``ClusterSnapshot`` (and the state it returned last round) to a GPU count
per job. It never reads a clock, never mutates its inputs, keeps no memory on ``self``
(the next round may run in another worker) and is deterministic for the same input.
Configuration, such as Tiresias' queue thresholds, is passed to the constructor.

A policy whose own objective charges for restarts (Pollux's re-allocation factor) sets
the optional class attribute ``prices_restarts = True``: the round then skips its
small-gain hysteresis for it, which would count the same cost twice. The per-job cap on
rescales per hour still applies.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, TypeVar

from .types import ClusterSnapshot, PolicyResult, PolicyState


class Policy(Protocol):
    name: ClassVar[str]
    # Elastic policies are re-run every round; event-driven ones only when something can change.
    event_driven: ClassVar[bool]
    # Optional (read with getattr, as ``prices_restarts``): ``count_rule``, how a policy that gives every job its
    # min_gpus says so in a start's reason ("which tiresias gives every job"; core/explain.py); and
    # ``predicts_runtimes``, a policy that reads ``JobInfo.expected_seconds``, which the simulator then predicts.

    def allocate(self, snap: ClusterSnapshot, state: PolicyState | None) -> PolicyResult: ...


class UnknownPolicy(KeyError):
    def __str__(self) -> str:
        return f"unknown policy {self.args[0]!r}; known: {', '.join(sorted(POLICIES))}"


POLICIES: dict[str, type[Policy]] = {}
P = TypeVar("P", bound=type)


def register(cls: P) -> P:
    """Class decorator: make a policy available by its ``name``."""
    name = cls.name  # type: ignore[attr-defined]
    if name in POLICIES and POLICIES[name] is not cls:
        raise ValueError(f"two policies are named {name!r}")
    POLICIES[name] = cls  # type: ignore[assignment]
    return cls


def get_policy(name: str, **config: object) -> Policy:
    """A policy instance by registered name, with optional constructor configuration."""
    _load_builtin_policies()
    try:
        cls = POLICIES[name]
    except KeyError:
        raise UnknownPolicy(name) from None
    return cls(**config)


def policy_names() -> list[str]:
    _load_builtin_policies()
    return sorted(POLICIES)


def _load_builtin_policies() -> None:
    from . import policies  # noqa: F401  (each module registers itself on import)


