"""Daily, weekly and on-demand cluster reports: HTML, PDF and CSV, listed in the UI and e-mailed.

``periods`` (which days), ``content`` (the figures, from their single homes), ``recommend`` (what to change),
``charts`` (matplotlib PNGs), ``render`` (HTML, PDF, CSV, e-mail body), ``services`` (make, request, schedule, send),
``deliver`` (e-mail, retried), ``tasks`` (Celery), ``schedule`` (beat's crontab entries), ``views`` (the list page and
login-protected downloads). Models: ``cluster_ops.models.Report``, ``ReportRecipient``, ``ReportDelivery``.
"""
