"""The back-end registry (scheduler/backends): every back-end the settings offer is registered, and a new job is
vetted by the check its cluster's back-end registered — no ``if executor == …`` in the job service."""

from __future__ import annotations

import dataclasses

import pytest
from django.core.exceptions import ValidationError

from scheduler.admin.scheduling import SchedulerSettingsForm
from scheduler.backends import BACKENDS, Backend, backend_choices, get_backend
from scheduler.jobs import verbs
from scheduler.live.config import scheduler_settings, update_settings
from scheduler.models import ExecutorKind, Job, Tenant


@pytest.mark.django_db
def test_the_settings_offer_every_registered_back_end() -> None:
    assert [name for name, _ in backend_choices()] == [
        "kubernetes", "kubernetes-observer", "local", "simulated", "slurm", "slurm-observer"]
    field = SchedulerSettingsForm().fields["executor"]
    assert [name for name, _ in field.choices] == sorted(BACKENDS)


@pytest.mark.django_db
def test_a_new_back_end_is_offered_and_accepted_without_a_migration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(BACKENDS, "nomad", Backend("nomad", "Nomad", make=lambda config: None))
    assert ("nomad", "Nomad") in SchedulerSettingsForm().fields["executor"].choices
    assert update_settings(executor="nomad").executor == "nomad"


@pytest.mark.django_db
def test_a_back_end_that_is_not_registered_is_refused_by_the_field() -> None:
    with pytest.raises(ValidationError) as refused:
        update_settings(executor="nomad")
    assert refused.value.message_dict["executor"] == [
        "Unknown cluster back-end 'nomad'; known: kubernetes, kubernetes-observer, local, simulated, slurm, "
        "slurm-observer."]
    assert scheduler_settings().executor == ExecutorKind.SIMULATED


def test_an_unknown_back_end_is_named_with_the_known_ones() -> None:
    with pytest.raises(LookupError, match="no cluster back-end 'nomad'; known: kubernetes, kubernetes-observer, local"):
        get_backend("nomad")


def test_a_back_end_without_batch_scripts_refuses_one_by_the_field(tenant: Tenant) -> None:
    with pytest.raises(ValidationError) as refused:
        verbs.submit_job(tenant=tenant, name="bad", workload_profile="cifar10", total_work=10.0,
                            script_path="train.sh")
    assert "Batch scripts run on the Slurm back-end only" in str(refused.value.message_dict["script_path"])
    assert not Job.objects.filter(name="bad").exists()


def test_the_job_service_asks_the_clusters_own_back_end(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []

    def refuse_every_tenant(job: Job) -> None:
        asked.append(job.name)
        raise ValidationError({"tenant": "not an account here"})

    monkeypatch.setitem(BACKENDS, "simulated",
                        dataclasses.replace(BACKENDS["simulated"], check_submission=refuse_every_tenant))
    with pytest.raises(ValidationError, match="not an account here"):
        verbs.submit_job(tenant=tenant, name="vetted", workload_profile="cifar10", total_work=10.0)
    assert asked == ["vetted"] and not Job.objects.filter(name="vetted").exists()
