from django.apps import AppConfig


class DashboardsConfig(AppConfig):
    """The Dash pages (no rows of their own): registered with django-plotly-dash when the URLs load them."""

    name = "cluster_ops.dashboards"
    label = "dashboards"
    verbose_name = "Dashboards"
