"""The landing page: what the cluster holds right now, scoped to what the user may see."""

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from scheduler.models import Gpu, Job, Node, Tenant

from .models import Heartbeat


def home(request: HttpRequest) -> HttpResponse:
    tenants = Tenant.objects.visible_to(request.user)
    jobs = Job.objects.visible_to(request.user)
    context = {
        "tenants": tenants.annotate(job_count=Count("jobs")),
        "jobs_by_state": dict(jobs.values_list("state").annotate(n=Count("id"))),
        "node_count": Node.objects.count(),
        "gpus_by_health": dict(Gpu.objects.values_list("health").annotate(n=Count("id"))),
        "heartbeat": Heartbeat.objects.first(),
    }
    return render(request, "home.html", context)
