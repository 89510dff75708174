"""``manage.py create_api_token USERNAME``: a new API token for that user, printed once (only its digest is kept)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster_ops.api_tokens import issue_token


class Command(BaseCommand):
    help = "Make an API token for a user and print it; it cannot be shown again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        user = User.objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError("username: no active user of that name.")
        self.stdout.write(issue_token(user))
