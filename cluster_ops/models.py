"""Rows the project shell owns: proof of life from each Celery worker (the reports' rows are the reports app's)."""

from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    """The last heartbeat each worker ran; beat sends one every HEARTBEAT_SECONDS."""

    worker = models.CharField(max_length=255, unique=True, help_text="Celery worker hostname")
    last_seen_at = models.DateTimeField()
    beats = models.PositiveBigIntegerField(default=0, help_text="heartbeats run since first seen")

    class Meta:
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        return f"{self.worker} at {self.last_seen_at:%Y-%m-%d %H:%M:%S}"
