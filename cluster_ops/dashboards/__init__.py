"""The dashboards: Dash pages embedded in Django through django-plotly-dash.

Each page is a ``DjangoDash`` app in its own module here, listed once in ``pages.PAGES``.
Django serves every page at ``/dash/<slug>/`` (login required, like everything but the
login form): ``templates/dashboards/page.html`` draws the navigation bar and the page's
title, and embeds the Dash app in a same-origin iframe that grows with its content.
Everything is served from our own static files (Dash's JavaScript through the finders in
settings, Bootstrap's CSS from ``cluster_ops/static/vendor/``): no CDN, works offline.

How to add a page
-----------------
1. Write ``cluster_ops/dashboards/<name>.py``::

       import plotly.graph_objects as go
       from dash import Input, Output
       from django.contrib.auth.models import User

       from scheduler.models import Job
       from . import common

       app = common.new_app("<name>")               # the DjangoDash; its name is the module's name
       app.layout = common.page_layout(
           common.controls(common.time_range_dropdown("<name>-range")),
           common.graph("<name>-chart"),
       )

       @app.callback(Output("<name>-chart", "figure"), Input("<name>-range", "value"))
       def chart(range_value: str, *, user: User, **_: object) -> go.Figure:
           jobs = Job.objects.visible_to(user)         # ALWAYS scope data through visible_to(user)
           ...
           return common.styled(fig, x_title="time", y_title="GPUs")   # units on every axis

   Callbacks are django-plotly-dash's "expanded" callbacks: a keyword-only ``user`` (and
   ``request``) is injected, so data is scoped per request — jobs through
   ``Job.objects.visible_to(user)``, tenants through ``Tenant.objects.visible_to(user)``
   (staff see all). Keep a callback to parse → one query function → render; put queries
   that are more than a line or two in a data module (``overview_data.py`` is an example).
   Use ``common.empty_figure(...)`` when there is nothing to draw, and the ids of your
   components prefixed with the page's name.
2. Add one ``Page(slug, title, app_name, description)`` line to ``PAGES`` in ``pages.py``;
   the module is imported at start-up (``pages.load_apps``), the navigation bar lists the
   page, the browser benchmark (``scripts/bench_dashboards.py``) measures it.
3. Browser test: ``tests/browser/conftest.py`` has ``staff_page`` / ``tenant_page``
   (logged-in Playwright pages), ``open_dashboard(page, slug)`` (navigates and waits until
   every chart in the iframe is drawn; returns the iframe's ``Frame``) and ``screenshot``.
"""
