from django.apps import AppConfig


class ClusterOpsConfig(AppConfig):
    name = "cluster_ops"
    verbose_name = "Cluster Ops"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
