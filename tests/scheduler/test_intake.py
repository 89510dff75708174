"""Idempotent submission (scheduler/jobs/intake.py) when two tries with one key race each other."""

from __future__ import annotations

import pytest

from scheduler.jobs import intake
from scheduler.models import Job, Tenant


def submit(tenant: Tenant, name: str) -> tuple[Job, bool]:
    return intake.submit_job_once(tenant=tenant, name=name, workload_profile="ncf", total_work=10, client_key="k")


def test_the_loser_of_a_race_gets_the_winners_job(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    winner, created = submit(tenant, "first")
    looked_up = intake._keyed
    lookups: list[str] = []

    def too_early_once(row: Tenant, key: str, digest: str) -> Job | None:
        """The loser's first look-up ran before the winner committed: it saw nothing."""
        lookups.append(key)
        return None if len(lookups) == 1 else looked_up(row, key, digest)

    monkeypatch.setattr(intake, "_keyed", too_early_once)
    loser, loser_created = submit(tenant, "first")
    assert (created, loser_created, loser.pk, len(lookups)) == (True, False, winner.pk, 2)
    assert list(Job.objects.values_list("name", flat=True)) == ["first"]
