from importlib import import_module

from django.apps import AppConfig

# The modules that register a cluster back-end (``scheduler.backends.register_backend``), by dotted path.
BACKEND_MODULES = (
    "scheduler.backends.simulated.executor",
    "scheduler.backends.local.executor",
    "scheduler.backends.slurm.executor",
    "scheduler.backends.slurm.observer",
    "scheduler.backends.kubernetes.executor",
    "scheduler.backends.kubernetes.observer",
)


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        # Each cluster back-end registers itself where it is defined: imported here, once the models are ready, so
        # that the registry itself imports no back-end.
        for module in BACKEND_MODULES:
            import_module(module)
