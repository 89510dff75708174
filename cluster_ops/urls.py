from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views
from .dashboards import pages

pages.load_apps()  # each page's DjangoDash registers itself on import


urlpatterns = [
    path("", views.home, name="home"),  # the Overview dashboard
    path("favicon.ico", views.favicon),  # for pages that name no icon (the admin's, the Dash apps')
    path("dash/<slug:slug>/", pages.dashboard, name="dashboard"),
    path("django_plotly_dash/", include("django_plotly_dash.urls")),  # the Dash apps behind the pages' iframes
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("reports/", include("cluster_ops.reports.urls")),  # the reports page and downloads (cluster_ops/reports/)
    path("api/", include("scheduler.api.urls")),  # the REST API (scheduler/api/)
    path("", include("telemetry.urls")),  # /metrics for Prometheus (telemetry/views.py)
]
