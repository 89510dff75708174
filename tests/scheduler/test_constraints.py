"""The database itself enforces the invariants, even when Python-side checks are bypassed."""

import pytest
from django.db import IntegrityError, connection, transaction

from scheduler.models import Allocation, Gpu, Job, Node


def refused(statement) -> bool:  # type: ignore[no-untyped-def]
    """True when the database raises IntegrityError for ``statement``."""
    try:
        with transaction.atomic():
            statement()
    except IntegrityError:
        return True
    return False


def test_a_gpu_cannot_have_two_open_allocations(job: Job, node: Node, now) -> None:
    gpu = node.gpus.first()
    Allocation.objects.create(job=job, gpu=gpu, started_at=now)
    # bulk_create skips model validation: only the partial unique index stands in the way.
    assert refused(lambda: Allocation.objects.bulk_create([Allocation(job=job, gpu=gpu, started_at=now)]))
    assert Allocation.objects.filter(gpu=gpu).count() == 1


def test_raw_sql_double_allocation_is_refused_too(job: Job, node: Node, now) -> None:
    gpu = node.gpus.first()
    Allocation.objects.create(job=job, gpu=gpu, started_at=now)
    sql = "INSERT INTO scheduler_allocation (job_id, gpu_id, started_at, ended_at) VALUES (%s, %s, %s, NULL)"
    with connection.cursor() as cursor:
        assert refused(lambda: cursor.execute(sql, [job.pk, gpu.pk, now]))


def test_closed_allocations_do_not_block_the_gpu(job: Job, node: Node, now) -> None:
    gpu = node.gpus.first()
    Allocation.objects.create(job=job, gpu=gpu, started_at=now, ended_at=now)
    Allocation.objects.create(job=job, gpu=gpu, started_at=now, ended_at=now)
    Allocation.objects.create(job=job, gpu=gpu, started_at=now)
    assert Allocation.objects.filter(gpu=gpu, ended_at__isnull=True).count() == 1


@pytest.mark.parametrize(
    "change",
    [
        {"min_gpus": 0},
        {"min_gpus": 5, "max_gpus": 4},
        {"total_work": -1.0},
        {"progress": -0.5},
        {"attained_gpu_seconds": -1.0},
        {"state": "exploded"},
    ],
    ids=["min-zero", "min-above-max", "negative-work", "negative-progress", "negative-gpu-time", "bad-state"],
)
def test_job_invariants_hold_under_queryset_update(job: Job, change: dict) -> None:
    assert refused(lambda: Job.objects.filter(pk=job.pk).update(**change))
    job.refresh_from_db()
    assert (job.min_gpus, job.max_gpus, job.total_work, job.state) == (1, 4, 1000.0, "pending")


def test_valid_update_is_accepted(job: Job) -> None:
    assert not refused(lambda: Job.objects.filter(pk=job.pk).update(min_gpus=2, max_gpus=2, state="running"))


def test_gpu_index_is_unique_per_node(node: Node) -> None:
    clone = Gpu(node=node, index=0, uuid="GPU-other", model="x", memory_mib=1, power_limit_w=1)
    assert refused(lambda: Gpu.objects.bulk_create([clone]))


def test_same_index_on_another_node_is_fine(node: Node) -> None:
    other = Node.objects.create(hostname="node2")
    Gpu.objects.create(node=other, index=0, uuid="GPU-node2-0", model="x", memory_mib=1, power_limit_w=1)


def test_gpu_health_must_be_known(node: Node) -> None:
    assert refused(lambda: node.gpus.update(health="melted"))


def test_allocation_cannot_end_before_it_starts(job: Job, node: Node, now) -> None:
    from datetime import timedelta

    early = now - timedelta(seconds=1)
    assert refused(lambda: Allocation.objects.create(job=job, gpu=node.gpus.first(), started_at=now, ended_at=early))
