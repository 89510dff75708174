"""``/api/`` routes. Every one is exempt from Django's login redirect: DRF's permissions answer
anonymous clients with 401/403 JSON instead (a program cannot follow a login form)."""

from django.contrib.auth.decorators import login_not_required, login_required
from django.urls import URLPattern, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import SimpleRouter

from .power_caps import GpuPowerCapView
from .root import ApiRootView
from .utilisation import UtilisationView
from .views import JobReportView, JobViewSet
from .whatif import WhatIfViewSet

app_name = "api"

router = SimpleRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("whatif", WhatIfViewSet, basename="whatif")

urlpatterns: list[URLPattern] = [
    path("", ApiRootView.as_view(), name="root"),
    path("jobs/<int:pk>/report/", JobReportView.as_view(), name="job-report"),
    path("gpus/<int:pk>/power-cap/", GpuPowerCapView.as_view(), name="gpu-power-cap"),
    path("utilisation/", UtilisationView.as_view(), name="utilisation"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    *router.urls,  # type: ignore[list-item]
]
for pattern in urlpatterns:
    login_not_required(pattern.callback)

# The browsable documentation is a page for people: behind the login redirect like every other page (DRF's views opt
# out of LoginRequiredMiddleware, hence login_required). Swagger UI is served from drf-spectacular-sidecar's static
# files (works offline) and its script as a file (the CSP allows no inline script).
urlpatterns.append(path("docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="api:schema")),
                        name="docs"))
