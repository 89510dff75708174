"""Service verbs: validate first, name the field, write everything or nothing."""

import pytest
from django.core.exceptions import ValidationError

from scheduler import inventory
from scheduler.jobs import verbs
from scheduler.models import Allocation, Gpu, Job, JobState, Node, RescaleEvent, RescaleKind, Tenant


def submit(tenant, **overrides):  # type: ignore[no-untyped-def]
    fields = dict(tenant=tenant, name="bert", workload_profile="bert", total_work=10.0, min_gpus=1, max_gpus=2)
    return verbs.submit_job(**{**fields, **overrides})


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"min_gpus": 4, "max_gpus": 2}, "Max GPUs must be at least min GPUs."),
        ({"total_work": -5.0}, "Ensure this value is greater than 0 and at most 1e+12."),
        ({"total_work": 0.0}, "Ensure this value is greater than 0 and at most 1e+12."),
        ({"total_work": float("inf")}, "Ensure this value is greater than 0 and at most 1e+12."),
        ({"min_gpus": 0}, "Ensure this value is greater than or equal to 1."),
        ({"batch_size": 0}, "batch_size"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_jobs_are_refused_with_a_clear_error_and_nothing_written(tenant: Tenant, overrides, field) -> None:
    with pytest.raises(ValidationError) as error:
        submit(tenant, **overrides)
    assert field in str(error.value.message_dict)
    assert not Job.objects.exists()


def test_unknown_tenant_is_named(db: None) -> None:
    with pytest.raises(ValidationError) as error:
        submit("nobody")
    assert error.value.message_dict == {"tenant": ["Unknown tenant 'nobody'."]}
    assert not Job.objects.exists()


def test_submit_by_tenant_name_and_rigid_default(tenant: Tenant) -> None:
    job = verbs.submit_job(tenant="vision", name="n", workload_profile="ncf", total_work=1.0, min_gpus=2)
    assert (job.tenant, job.min_gpus, job.max_gpus, job.state, job.elastic) == (tenant, 2, 2, "pending", False)


def test_cancel_releases_gpus_and_records_why(job: Job, node: Node, operator, now) -> None:
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    for gpu in node.gpus.all()[:2]:
        Allocation.objects.create(job=job, gpu=gpu, started_at=now)
    job = verbs.cancel_job(job, actor=operator)
    assert job.state == JobState.CANCELLED and job.finished_at is not None
    assert not Allocation.objects.filter(ended_at__isnull=True).exists()
    event = RescaleEvent.objects.get(job=job)
    assert (event.kind, event.from_gpus, event.to_gpus, event.actor) == (RescaleKind.CANCEL, 2, 0, operator)


def test_cancel_twice_is_a_no_op(job: Job) -> None:
    verbs.cancel_job(job)
    verbs.cancel_job(job)
    assert RescaleEvent.objects.filter(job=job).count() == 1


def test_a_succeeded_job_cannot_be_cancelled(job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    with pytest.raises(ValidationError, match="succeeded job cannot become cancelled"):
        verbs.cancel_job(job)
    assert Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED


def test_requeue_a_running_job_preempts_it_and_keeps_progress(job: Job, node: Node, now) -> None:
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, progress=400.0)
    Allocation.objects.create(job=job, gpu=node.gpus.first(), started_at=now)
    job = verbs.requeue_job(job)
    assert (job.state, job.progress) == (JobState.PENDING, 400.0)
    assert not Allocation.objects.filter(ended_at__isnull=True).exists()
    assert RescaleEvent.objects.get(job=job).kind == RescaleKind.REQUEUE


def test_requeue_a_cancelled_job(job: Job) -> None:
    verbs.cancel_job(job)
    assert verbs.requeue_job(job).state == JobState.PENDING


def test_gpu_bounds_change_is_validated_and_audited(job: Job) -> None:
    with pytest.raises(ValidationError):
        verbs.set_gpu_bounds(job, 3, 2)
    assert (Job.objects.get(pk=job.pk).min_gpus, Job.objects.get(pk=job.pk).max_gpus) == (1, 4)
    verbs.set_gpu_bounds(job, 2, 8)
    verbs.set_gpu_bounds(job, 2, 8)  # already there: no second event
    event = RescaleEvent.objects.get(job=job)
    assert event.kind == RescaleKind.SETTINGS and "1..4 → 2..8" in event.reason


def test_priority_change_is_audited(job: Job) -> None:
    verbs.set_priority(job, 5)
    assert Job.objects.get(pk=job.pk).priority == 5
    assert "priority 0 → 5" in RescaleEvent.objects.get(job=job).reason


def gpu(index: int, uuid: str) -> inventory.GpuSpec:
    return inventory.GpuSpec(index, uuid, "Tesla V100-SXM2-32GB", 32768, 300)


def test_a_gpu_index_twice_on_one_node_is_refused_and_nothing_written(db: None) -> None:
    with pytest.raises(ValidationError) as error:
        inventory.register_node("n1", [gpu(0, "GPU-a"), gpu(0, "GPU-b")])
    assert error.value.message_dict == {"index": ["GPU index given more than once: 0."]}
    assert not Node.objects.exists() and not Gpu.objects.exists()


def test_a_conflict_with_a_stored_gpu_rolls_back_the_whole_node(db: None) -> None:
    inventory.register_node("n1", [gpu(0, "GPU-a")])
    with pytest.raises(ValidationError, match="already has a GPU with this index"):
        inventory.register_node("n1", [gpu(1, "GPU-b"), gpu(0, "GPU-c")])
    assert list(Gpu.objects.values_list("uuid", flat=True)) == ["GPU-a"]


def test_register_node_is_idempotent_and_matches_by_uuid(db: None) -> None:
    inventory.register_node("n1", [gpu(0, "GPU-a"), gpu(1, "GPU-b")])
    inventory.register_node("n1", [gpu(0, "GPU-a"), gpu(1, "GPU-b")])
    assert Node.objects.count() == 1 and Gpu.objects.count() == 2


def test_register_node_rejects_a_bad_hostname(db: None) -> None:
    with pytest.raises(ValidationError) as error:
        inventory.register_node("", [gpu(0, "GPU-a")])
    assert "hostname" in error.value.message_dict


def test_gpu_health_is_validated_and_only_changes_are_counted(node: Node) -> None:
    gpus = list(node.gpus.all())
    with pytest.raises(ValidationError, match="Unknown GPU health 'melted'"):
        inventory.set_gpu_health(gpus, "melted")
    assert inventory.set_gpu_health(gpus[:2], "degraded") == 2
    assert inventory.set_gpu_health(gpus, "degraded") == 2
