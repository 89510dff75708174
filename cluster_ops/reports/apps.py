from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "cluster_ops.reports"
    label = "reports"
    verbose_name = "Reports"
