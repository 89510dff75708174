from django.core.management.base import BaseCommand

from cluster_ops.services import sync_periodic_tasks


class Command(BaseCommand):
    help = "Create or update the periodic tasks that beat runs (kept in the database)."

    def handle(self, *args: object, **options: object) -> None:
        sync_periodic_tasks()
        self.stdout.write("periodic tasks in sync")
