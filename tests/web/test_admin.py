"""Django admin as an operator uses it: staff only, job actions through the services."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from scheduler.models import Allocation, Gpu, Job, JobState, Node, RescaleEvent, Tenant

CHANGELISTS = [
    "scheduler_job", "scheduler_node", "scheduler_gpu", "scheduler_tenant", "scheduler_allocation",
    "scheduler_schedulinground", "scheduler_rescaleevent", "cluster_ops_heartbeat",
    "django_celery_beat_periodictask",
]


@pytest.mark.parametrize("name", CHANGELISTS)
def test_every_changelist_renders_for_staff(operator_client: Client, job: Job, node: Node, name: str) -> None:
    response = operator_client.get(reverse(f"admin:{name}_changelist"))
    assert response.status_code == 200


@pytest.mark.parametrize("url", ["/admin/", "/admin/scheduler/job/", "/"])
def test_anonymous_users_are_sent_to_log_in(client: Client, db: None, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302 and "login" in response["Location"]


def test_non_staff_users_cannot_enter_admin(client: Client, db: None) -> None:
    client.force_login(User.objects.create_user("alice", password="pw-alice-123"))
    response = client.get("/admin/scheduler/job/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_job_page_shows_allocation_history_and_rescale_events(operator_client, job, node, now) -> None:
    Allocation.objects.create(job=job, gpu=node.gpus.get(index=2), started_at=now, ended_at=now)
    RescaleEvent.objects.create(job=job, at=now, kind="start", from_gpus=0, to_gpus=1, reason="fits on node1")
    page = operator_client.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert "allocation history" in page.lower() and "node1/gpu2" in page
    assert "fits on node1" in page


def test_job_list_filters_by_state_tenant_and_node(operator_client, job, node, other_tenant, now) -> None:
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    Allocation.objects.create(job=job, gpu=node.gpus.first(), started_at=now)
    url = reverse("admin:scheduler_job_changelist")
    assert "resnet" in operator_client.get(url, {"state": "running", "node": node.pk}).content.decode()
    assert "0 jobs" in operator_client.get(url, {"tenant__id__exact": other_tenant.pk}).content.decode()
    assert "resnet" in operator_client.get(url, {"q": "vision"}).content.decode()


def post_action(client: Client, action: str, jobs: list[Job], **data: object):  # type: ignore[no-untyped-def]
    payload = {"action": action, "_selected_action": [j.pk for j in jobs], **data}
    return client.post(reverse("admin:scheduler_job_changelist"), payload, follow=True)


def test_cancel_and_requeue_actions(operator_client: Client, job: Job, operator: User) -> None:
    post_action(operator_client, "cancel_jobs", [job])
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    post_action(operator_client, "requeue_jobs", [job])
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    events = list(RescaleEvent.objects.values_list("kind", "actor"))
    assert events == [("requeue", operator.pk), ("cancel", operator.pk)]


def test_cancel_action_names_the_job_it_could_not_cancel(operator_client: Client, job: Job, tenant) -> None:
    done = Job.objects.create(tenant=tenant, name="old", workload_profile="x", total_work=1,
                              submitted_at=job.submitted_at, state=JobState.SUCCEEDED)
    page = post_action(operator_client, "cancel_jobs", [job, done]).content.decode()
    assert "succeeded job cannot become cancelled" in page and "1 job(s) cancelled" in page
    assert Job.objects.get(pk=done.pk).state == JobState.SUCCEEDED


def test_change_priority_asks_then_applies(operator_client: Client, job: Job) -> None:
    form_page = post_action(operator_client, "change_priority", [job])
    assert 'name="priority"' in form_page.content.decode()
    post_action(operator_client, "change_priority", [job], priority=7, apply="Apply")
    assert Job.objects.get(pk=job.pk).priority == 7


def test_change_gpu_bounds_refuses_min_above_max(operator_client: Client, job: Job) -> None:
    page = post_action(operator_client, "change_gpu_bounds", [job], min_gpus=5, max_gpus=2, apply="Apply")
    assert "Max GPUs must be at least min GPUs." in page.content.decode()
    assert (Job.objects.get(pk=job.pk).min_gpus, Job.objects.get(pk=job.pk).max_gpus) == (1, 4)
    post_action(operator_client, "change_gpu_bounds", [job], min_gpus=2, max_gpus=6, apply="Apply")
    assert (Job.objects.get(pk=job.pk).min_gpus, Job.objects.get(pk=job.pk).max_gpus) == (2, 6)


def job_form(tenant_pk: object, **overrides: object) -> dict:
    data = {
        "name": "new", "tenant": tenant_pk, "owner": "", "workload_profile": "bert", "total_work": "100",
        "min_gpus": "1", "max_gpus": "2", "priority": "0", "gpu_type": "", "batch_size": "", "command": "",
        "allocations-TOTAL_FORMS": "0", "allocations-INITIAL_FORMS": "0",
        "rescale_events-TOTAL_FORMS": "0", "rescale_events-INITIAL_FORMS": "0",
    }
    return {**data, **overrides}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"min_gpus": "3", "max_gpus": "2"}, "Max GPUs must be at least min GPUs."),
        ({"total_work": "-1"}, "Ensure this value is greater than 0 and at most 1e+12."),  # as the API says
        ({"tenant": "99999"}, "Select a valid choice"),
    ],
)
def test_admin_add_form_refuses_bad_jobs(operator_client: Client, tenant: Tenant, overrides, message) -> None:
    response = operator_client.post(reverse("admin:scheduler_job_add"), job_form(tenant.pk, **overrides))
    assert response.status_code == 200 and message in response.content.decode()
    assert not Job.objects.exists()


def test_admin_add_form_submits_through_the_service(operator_client: Client, tenant: Tenant, operator) -> None:
    response = operator_client.post(reverse("admin:scheduler_job_add"), job_form(tenant.pk))
    assert response.status_code == 302
    job = Job.objects.get()
    assert (job.name, job.state, job.owner, job.submitted_at is not None) == ("new", "pending", operator, True)


def test_admin_add_form_takes_what_the_workers_run(operator_client: Client, tenant: Tenant) -> None:
    form = job_form(tenant.pk, gpu_type="A100", batch_size="256", command="python train.py --epochs 3")
    assert operator_client.post(reverse("admin:scheduler_job_add"), form).status_code == 302
    job = Job.objects.get()
    assert (job.gpu_type, job.batch_size, job.command) == ("a100", 256, "python train.py --epochs 3")


def test_what_the_workers_run_is_read_only_once_launched(operator_client: Client, job: Job) -> None:
    page = operator_client.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert 'name="command"' in page  # pending: still editable
    Job.objects.filter(pk=job.pk).update(state="running")
    page = operator_client.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert 'name="command"' not in page and 'name="gpu_type"' not in page


def test_admin_edit_of_bounds_is_audited(operator_client: Client, job: Job) -> None:
    data = job_form(job.tenant_id, name="resnet", min_gpus="2", max_gpus="3")
    response = operator_client.post(reverse("admin:scheduler_job_change", args=[job.pk]), data)
    assert response.status_code == 302
    assert "1..4 → 2..3" in RescaleEvent.objects.get(job=job).reason


def test_node_form_refuses_a_gpu_index_twice(operator_client: Client, db: None) -> None:
    gpu = {"model": "x", "memory_mib": "1", "power_limit_w": "1", "health": "ok"}
    data = {
        "hostname": "n9", "schedulable": "on",
        "gpus-TOTAL_FORMS": "2", "gpus-INITIAL_FORMS": "0",
        **{f"gpus-0-{k}": v for k, v in {**gpu, "index": "0", "uuid": "GPU-1"}.items()},
        **{f"gpus-1-{k}": v for k, v in {**gpu, "index": "0", "uuid": "GPU-2"}.items()},
    }
    response = operator_client.post(reverse("admin:scheduler_node_add"), data)
    assert response.status_code == 200 and "duplicate" in response.content.decode().lower()
    assert not Node.objects.exists() and not Gpu.objects.exists()


def test_gpu_health_is_visible_at_a_glance(operator_client: Client, node: Node) -> None:
    node.gpus.filter(index=1).update(health="lost")
    page = operator_client.get(reverse("admin:scheduler_gpu_changelist")).content.decode()
    assert page.count(">lost</span>") == 1 and page.count(">ok</span>") == 3


def test_gpu_health_actions(operator_client: Client, node: Node) -> None:
    lost = list(node.gpus.filter(index__in=[1, 2]))
    payload = {"action": "mark_lost", "_selected_action": [g.pk for g in lost]}
    page = operator_client.post(reverse("admin:scheduler_gpu_changelist"), payload, follow=True).content.decode()
    assert "2 GPU(s) marked lost." in page
    assert sorted(node.gpus.filter(health="lost").values_list("index", flat=True)) == [1, 2]
    assert all(g.health_changed_at for g in node.gpus.filter(health="lost"))


def test_cordon_action(operator_client: Client, node: Node) -> None:
    payload = {"action": "cordon", "_selected_action": [node.pk]}
    operator_client.post(reverse("admin:scheduler_node_changelist"), payload)
    assert Node.objects.get(pk=node.pk).schedulable is False


def test_allocations_cannot_be_edited_in_admin(operator_client: Client, job: Job, node: Node, now) -> None:
    allocation = Allocation.objects.create(job=job, gpu=node.gpus.first(), started_at=now)
    page = operator_client.get(reverse("admin:scheduler_allocation_change", args=[allocation.pk]))
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()


# --- What an operator asks of the job lists -----------------------------------------------


def test_why_pending_is_a_column_and_a_field(operator_client: Client, job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(pending_reason="waiting: needs 4 a100 GPUs, 0 free; 1 job ahead")
    listing = operator_client.get(reverse("admin:scheduler_job_changelist")).content.decode()
    assert "Why pending" in listing and "needs 4 a100 GPUs, 0 free" in listing
    page = operator_client.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert "Pending reason" in page and "needs 4 a100 GPUs, 0 free" in page


def test_job_list_is_newest_first_with_seconds(operator_client: Client, tenant: Tenant, now) -> None:
    from datetime import timedelta

    from scheduler.jobs import verbs
    for name, age in (("older-job", 120), ("newer-job", 5)):
        verbs.submit_job(tenant=tenant, name=name, workload_profile="cifar10", total_work=1,
                            submitted_at=now - timedelta(seconds=age))
    listing = operator_client.get(reverse("admin:scheduler_job_changelist")).content.decode()
    assert listing.index("newer-job") < listing.index("older-job")
    shown = f"{now - timedelta(seconds=5):%Y-%m-%d %H:%M:%S}"
    assert shown in listing  # the seconds, not "Dec. 1, 2026, 2:55 p.m."


def test_profile_is_a_choice_of_the_fitted_ones(operator_client: Client, db: None) -> None:
    from scheduler.core.fitted_profiles import FITTED_PROFILES
    page = operator_client.get(reverse("admin:scheduler_job_add")).content.decode()
    assert '<select name="workload_profile"' in page
    for name in FITTED_PROFILES:
        assert f'<option value="{name}">{name}</option>' in page
    assert "resnet18-cifar10" not in page


def test_rescale_event_list_shortens_long_reasons(operator_client: Client, job: Job, now) -> None:
    long_reason = "grew on the goodput optimum; " * 20
    RescaleEvent.objects.create(job=job, at=now, kind="rescale", from_gpus=2, to_gpus=4, reason=long_reason)
    listing = operator_client.get(reverse("admin:scheduler_rescaleevent_changelist")).content.decode()
    assert "2 → 4" in listing and long_reason.strip() not in listing and "…" in listing


def test_the_allocation_inline_has_no_caption_per_gpu(operator_client: Client, job: Job, node: Node, now) -> None:
    for index in range(3):
        Allocation.objects.create(job=job, gpu=node.gpus.get(index=index), started_at=now)
    page = operator_client.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert "cluster_ops/admin.css" in page  # it hides the per-row caption of read-only tabular inlines
    from django.contrib.staticfiles import finders
    css = open(finders.find("cluster_ops/admin.css")).read()  # noqa: SIM115
    assert ".inline-group .tabular td.original p { display: none; }" in css


@pytest.mark.parametrize("url, field", [("/admin/scheduler/job/", "submitted_at"),
                                        ("/admin/telemetry/gpuevent/", "at"),
                                        ("/admin/reports/report/", "period_start")])
def test_a_naive_time_in_a_date_filter_is_read_in_the_current_zone_without_a_warning(
    operator_client: Client, tenant: Tenant, url: str, field: str,
) -> None:
    """``?submitted_at__gte=2026-12-01T10:00:00`` (no zone): Django filtered on it but warned of a naive datetime on
    every such request (found by the query fuzzer). It is read in the current time zone, as Django reads it."""
    import warnings

    from django.utils import timezone

    from scheduler.jobs import verbs

    zone = timezone.get_current_timezone()
    for name, hour in (("early-job", 9), ("late-job", 11)):
        verbs.submit_job(tenant=tenant, name=name, workload_profile="cifar10", total_work=1,
                            submitted_at=timezone.make_aware(timezone.datetime(2026, 12, 1, hour), zone))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        response = operator_client.get(url, {f"{field}__gte": "2026-12-01T10:00:00"})
        ancient = operator_client.get(url, {f"{field}__lt": "1111-11-11 11:11:11.111111"})
    assert response.status_code == 200 and ancient.status_code == 200
    if field == "submitted_at":
        page = response.content.decode()
        assert "late-job" in page and "early-job" not in page
