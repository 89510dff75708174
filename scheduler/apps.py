from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        # Each cluster back-end registers itself where it is defined (``executors.register_backend``): imported
        # here, once the models are ready, so that the seam itself imports no back-end.
        from .executors import local, simulated  # noqa: F401
        from .slurm import executor, observer  # noqa: F401
