"""The WSGI application, warmed before it serves.

gunicorn loads it once in its master (``--preload``, the Procfile): the URL configuration is imported here — every
view, the Dash apps, pandas and plotly behind them — so that no worker's first request pays for that import (on a
loaded machine it outlasted gunicorn's worker timeout: the first request after a start answered 500). Connections
opened meanwhile are closed, so that no worker inherits its master's.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cluster_ops.settings")
application = get_wsgi_application()


def _warm() -> None:
    from django.db import connections
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  (imports every view module)
    connections.close_all()


_warm()
