from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from . import views

admin.site.site_header = "Cluster Ops administration"
admin.site.site_title = "Cluster Ops"
admin.site.index_title = "Jobs, GPUs and schedules"

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
