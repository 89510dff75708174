"""Cluster Ops project shell: settings, urls, the Celery app and cross-app tasks."""

from .celery import app as celery_app

__all__ = ("celery_app",)
