from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils.crypto import get_random_string


class Command(BaseCommand):
    help = "Create the first staff superuser once, printing its credentials; never a second one."

    def handle(self, *args: object, **options: object) -> None:
        users = get_user_model()
        username = settings.ADMIN_USERNAME
        if users.objects.filter(is_superuser=True).exists():
            self.stdout.write(f"admin user exists (reset a password with: manage.py changepassword {username})")
            return
        password = settings.ADMIN_PASSWORD or get_random_string(20)
        users.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(self.style.SUCCESS(
            f"created admin user — username: {username}  password: {password}  (shown once)"
        ))
