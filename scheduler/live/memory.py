"""What live rounds carry from one to the next, kept apart: the policy's own memory (``PolicyState``, one row per
policy, so that switching back finds it) and the round's (``RoundMemory``: each job's recent rescales, which the
cycle's ``max_rescales_per_hour`` and settling guards count whatever the policy)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models import PolicyState, RoundMemory, SchedulingRound


def load_round_state(policy: str) -> dict[str, Any]:
    """The state ``run_cycle`` takes: the policy's memory and the round's rescale history."""
    policy_state = PolicyState.objects.filter(policy=policy).values_list("state", flat=True).first()
    rescales, yielded = RoundMemory.objects.filter(pk=1).values_list("rescales", "yielded").first() or ({}, {})
    return {"policy": policy_state, "rescales": rescales or {}, "yielded": yielded or {}}


def store_round_state(policy: str, state: Mapping[str, Any], round_row: SchedulingRound) -> None:
    """Keep what ``run_cycle`` returned for the next round (inside the round's transaction)."""
    PolicyState.objects.update_or_create(policy=policy, defaults={"state": state.get("policy") or {},
                                                                   "round": round_row})
    RoundMemory.objects.update_or_create(pk=1, defaults={"rescales": state.get("rescales") or {},
                                                         "yielded": state.get("yielded") or {}})
