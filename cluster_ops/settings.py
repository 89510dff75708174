"""Cluster Ops settings, read from the environment (twelve-factor).

Every environment variable the product reads is read here and nowhere else. The
defaults run a fresh clone on one machine: SQLite under ``var/``, the embedded Redis
that ``make run`` starts, a secret key generated into ``var/`` on first use.

A malformed value never crashes the import: it is recorded in
``CONFIGURATION_ERRORS`` and reported by the system check in ``cluster_ops/checks.py``
(``manage.py check``, ``migrate``, the worker at start-up), naming the variable.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from csp.constants import NONCE
from django.core.management.utils import get_random_secret_key

from cluster_ops.common.version import VERSION
from scheduler.bounds import MAX_ROUND_SECONDS  # the env settings that seed the round obey its bound

BASE_DIR = Path(__file__).resolve().parent.parent
CONFIGURATION_ERRORS: list[str] = []


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, "").strip() or default


def envbool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    CONFIGURATION_ERRORS.append(f"{name}={raw!r} is not a boolean (use true/false, 1/0, yes/no, on/off)")
    return default


def envint(name: str, default: int, *, minimum: int = 0, maximum: int = 2**31 - 1) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        CONFIGURATION_ERRORS.append(f"{name}={raw!r} is not an integer")
        return default
    if value < minimum:
        CONFIGURATION_ERRORS.append(f"{name}={value} is below its minimum {minimum}")
        return default
    if value > maximum:
        CONFIGURATION_ERRORS.append(f"{name}={value} is above its maximum {maximum}")
        return default
    return value


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name, "")
    return [item.strip() for item in raw.split(",") if item.strip()] or default


def database_from_url(url: str, var_dir: Path) -> dict[str, Any]:
    """Django's DATABASES["default"] for ``url``; empty means the SQLite file under var/.

    SQLite gets WAL, a 20 s busy timeout and IMMEDIATE transactions: with a web
    server and a worker writing at once that is what brought "database is locked"
    errors to zero (measured). An invalid URL yields the dummy backend, which
    refuses every query, so nothing silently writes to the wrong database.
    """
    if not url:
        url = f"sqlite:///{var_dir / 'cluster_ops.sqlite3'}"
    try:
        parsed = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except (ValueError, KeyError) as error:
        CONFIGURATION_ERRORS.append(f"DATABASE_URL={url!r} is not a database URL: {error}")
        return {"ENGINE": "django.db.backends.dummy"}
    config: dict[str, Any] = dict(parsed)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    return config


def secret_key(var_dir: Path) -> str:
    """SECRET_KEY from the environment, else the one generated into var/ on first use."""
    from_env = os.environ.get("SECRET_KEY", "").strip()
    if from_env:
        return from_env
    key_file = var_dir / "secret_key"
    if not key_file.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        # O_EXCL: two processes starting at once must not write two different keys.
        try:
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(get_random_secret_key())
    return key_file.read_text().strip()


VAR_DIR = Path(envstr("VAR_DIR", str(BASE_DIR / "var")))
SECRET_KEY = secret_key(VAR_DIR)
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

# Behind TLS (HTTPS=true) the cookies are secure and plain HTTP is redirected;
# `manage.py check --deploy` is clean with HTTPS=true and a SECRET_KEY set.
HTTPS = envbool("HTTPS", False)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
CSRF_COOKIE_NAME = "_csrf_token"  # the cookie Dash's renderer sends back as X-CSRFToken (cluster_ops/middleware.py)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 31536000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS


def trusted_proxies(name: str) -> int:
    """How many proxies in front of the site append to ``X-Forwarded-For``: ``false`` (or unset) 0, ``true`` 1, or a
    number. With 0 the header is ignored, so a client cannot choose the address its throttles and lock-out count."""
    raw = os.environ.get(name, "").strip().lower()
    if raw.isdigit() and len(raw) <= 2:
        return int(raw)
    return int(envbool(name, False))


BEHIND_PROXY = trusted_proxies("BEHIND_PROXY")
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True

INSTALLED_APPS = [
    "cluster_ops.admin_site.ClusterOpsAdminConfig",  # django.contrib.admin, whose actions all need a permission
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "rest_framework",
    "knox",  # API tokens, stored hashed (cluster_ops/api_tokens.py)
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by us: /api/docs/ works offline
    "django_plotly_dash.apps.DjangoPlotlyDashConfig",  # the dashboards (cluster_ops/dashboards/)
    "axes",  # login lock-out (django-axes)
    "csp",  # Content-Security-Policy (django-csp)
    "cluster_ops",
    "cluster_ops.reports",  # daily, weekly and custom reports: their rows, files and e-mails
    "cluster_ops.dashboards",  # the Dash pages
    "scheduler",
    "telemetry",
    "research",  # reproductions and benchmarks; the product never imports it
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # after authentication: answers a locked-out login with 429
    "cluster_ops.middleware.DashFramesSameOrigin",  # after it: the embedded Dash apps may be framed by us
    "cluster_ops.middleware.DashCallbacksCsrf",  # their callbacks are csrf_exempt upstream; not here
    "cluster_ops.middleware.DashCallbacksRefuseCraftedRequests",  # a crafted callback is a 400, never a 500
    # Last: the {% plotly_* %} template tags need it (without it: AttributeError dpd_content_handler).
    "django_plotly_dash.middleware.BaseMiddleware",
]

ROOT_URLCONF = "cluster_ops.urls"
WSGI_APPLICATION = "cluster_ops.wsgi.application"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "cluster_ops.dashboards.pages.navigation",  # the dashboards in the navigation bar
                "cluster_ops.common.version.version",  # the version in every page's footer
            ],
        },
    },
]

DATABASES = {"default": database_from_url(os.environ.get("DATABASE_URL", "").strip(), VAR_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Login lock-out (django-axes): after AXES_FAILURE_LIMIT wrong passwords from one address, further logins from that
# address are refused for AXES_COOLOFF_MINUTES, even with the right password.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=envint("AXES_COOLOFF_MINUTES", 15, minimum=1))
# An address that failed too often is locked, and a user name only from the address that failed with it: an attacker
# elsewhere cannot keep `admin` locked out.
AXES_LOCKOUT_PARAMETERS = ["ip_address", ["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "cluster_ops.security.client_address"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["cluster_ops.formats"]  # timestamps with seconds, dates as ISO
TIME_ZONE = envstr("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # Dash's and its components' JavaScript, served by us (no CDN: the dashboards work offline).
    "django_plotly_dash.finders.DashAssetFinder",
    "django_plotly_dash.finders.DashComponentFinder",
    "django_plotly_dash.finders.DashAppDirectoryFinder",
]
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Not the Compressed* variant: brotli over Dash's 47 MB of assets took 308 s.
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
}

# --- Dashboards (cluster_ops/dashboards/, django-plotly-dash) ------------------------------
PLOTLY_DASH = {"serve_locally": True, "cache_arguments": False}  # local JavaScript, never a CDN
PLOTLY_COMPONENTS = ["dash_bootstrap_components", "dpd_components"]
# Nothing may be framed, except the Dash apps inside our own pages (cluster_ops/middleware.py).
X_FRAME_OPTIONS = "DENY"
# The Overview flags queued jobs that have waited longer than this.
PENDING_ALERT_MINUTES = envint("PENDING_ALERT_MINUTES", 30, minimum=1)

# --- Content-Security-Policy (django-csp) on every response --------------------------------------
# Scripts only from us, plus the two inline scripts of Dash's page, by hash (Dash's own ``csp_hashes`` way; a test
# recomputes them from the served page) and our templates' inline scripts by nonce. Styles may be inline: plotly.js
# and React set them. Nothing is loaded from another origin; only our own pages may frame the Dash apps.
DASH_INLINE_SCRIPT_HASHES = [
    "'sha256-jZlsGVOhUAIcH+4PVs7QuGZkthRMgvT2n0ilH6/zTM0='",  # var renderer = new DashRenderer();
    "'sha256-vKjpW9vbO8hHZzDW25gNX1m+/H5hAi3BCpgHSIEYFV8='",  # the Internet Explorer warning
]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'", NONCE, *DASH_INLINE_SCRIPT_HASHES],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-src": ["'self'"],
        "frame-ancestors": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
    },
}

# --- Redis and Celery -------------------------------------------------------------
# The default is the embedded Redis that `make run` starts (scripts/embedded_redis.py).
EMBEDDED_REDIS_PORT = envint("EMBEDDED_REDIS_PORT", 6399, minimum=1)
REDIS_URL = envstr("REDIS_URL", f"redis://127.0.0.1:{EMBEDDED_REDIS_PORT}/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker outlives any Redis outage: it retries forever instead of exiting after 100 tries
# (about 45 minutes), which under `make run` would stop the whole stack.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "cluster_ops.beat:GuardedDatabaseScheduler"  # django-celery-beat's, one bad entry refused
HEARTBEAT_SECONDS = envint("HEARTBEAT_SECONDS", 30, minimum=1)
# A running what-if's or report's heartbeat moves this often, from a thread of its own (cluster_ops/liveness.py); one
# whose heartbeat stopped this long lost its worker (killed mid-run) and is run again.
WORK_HEARTBEAT_SECONDS = envint("WORK_HEARTBEAT_SECONDS", 10, minimum=1)
WORK_LEASE_SECONDS = envint("WORK_LEASE_SECONDS", 60, minimum=3 * WORK_HEARTBEAT_SECONDS)

# --- Queues: nothing waits behind anything ------------------------------------------------
# Rounds (and the starts between them), the demo feed and heartbeats have a queue of their own, consumed by a worker
# that takes nothing else (Procfile: rounds). What-ifs go to the background queue (two processes: at most two run at
# once), each under a time limit. Forecasts, reports and the runtime model have a queue of their own (Procfile:
# reports), so that long what-ifs holding every background slot never hold up an estimate or a report. Telemetry and
# the recovery of lost background work stay on Celery's default queue, so that nothing else can stop its own repair.
# Node agents consume node.<hostname> (sent there explicitly).
ROUND_QUEUE, BACKGROUND_QUEUE, REPORT_QUEUE, DEFAULT_QUEUE = "rounds", "background", "reports", "celery"
CELERY_TASK_DEFAULT_QUEUE = DEFAULT_QUEUE
# Long tasks, acknowledged late: a worker reserves no message beyond the ones it runs, so that what waits stays in the
# broker's queue for the other workers (and for this one, restarted) rather than die with a killed worker's
# reservations (a queued what-if started only at the resend, 15 minutes later).
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ROUTES = {
    **{name: {"queue": ROUND_QUEUE} for name in (
        "scheduler.run_round", "scheduler.start_between_rounds", "scheduler.feed_demo",
        "scheduler.submit_late_examples", "cluster_ops.heartbeat")},
    **{name: {"queue": BACKGROUND_QUEUE} for name in ("scheduler.run_whatif", "scheduler.finish_sweep")},
    **{name: {"queue": REPORT_QUEUE} for name in (
        "reports.make", "reports.make_scheduled", "reports.deliver", "scheduler.forecast", "scheduler.forecast_soon",
        "scheduler.train_runtimes")},
}
# Soft limit: the task is told (SoftTimeLimitExceeded) and records why it stopped; hard limit: the process is killed
# and ``recover_*`` marks the row failed. A worker started with WORKER_MEMORY_LIMIT_MIB (the Procfile's background
# worker) gives each of its processes that much address space: a task that grows past it fails with MemoryError.
WHATIF_TIME_LIMIT_SECONDS = envint("WHATIF_TIME_LIMIT_SECONDS", 1800, minimum=10)
REPORT_TIME_LIMIT_SECONDS = envint("REPORT_TIME_LIMIT_SECONDS", 600, minimum=10)
HARD_LIMIT_GRACE_SECONDS = 30
# Forecasts (scheduler/forecasting/forecasts.py): each under this limit; with N arrival samples a range, not a point.
FORECAST_TIME_LIMIT_SECONDS = envint("FORECAST_TIME_LIMIT_SECONDS", 120, minimum=10)
FORECAST_ARRIVAL_SAMPLES = min(envint("FORECAST_ARRIVAL_SAMPLES", 4), 20)  # at most 20 samples; 0: never
# Whether forecasts assume future arrivals: "auto" when the recent arrival rate is steady
# (scheduler.forecasting.forecasts.arrivals_are_steady), "always", or "never" (the queue as it is).
FORECAST_ARRIVALS = envstr("FORECAST_ARRIVALS", "auto").lower()
if FORECAST_ARRIVALS not in {"auto", "always", "never"}:
    CONFIGURATION_ERRORS.append(f"FORECAST_ARRIVALS={FORECAST_ARRIVALS!r}: use auto, always or never")
    FORECAST_ARRIVALS = "auto"
WORKER_MEMORY_LIMIT_MIB = envint("WORKER_MEMORY_LIMIT_MIB", 0)  # 0: no limit
# Queued work lives in the database: what is still queued this long after it was sent is sent again (a broker that
# lost its messages), and beat checks for it this often. A run that lost its worker this often is failed, not retried.
RESEND_AFTER_SECONDS = envint("RESEND_AFTER_SECONDS", 120, minimum=10)
RECOVER_SECONDS = envint("RECOVER_SECONDS", 60, minimum=5)
MAX_ATTEMPTS = 3

# The scheduling round: its default interval (changed at run time in admin) and the
# lease that keeps rounds one at a time; a worker killed mid-round holds it at most this long.
ROUND_SECONDS = envint("ROUND_SECONDS", 60, minimum=1, maximum=MAX_ROUND_SECONDS)
ROUND_LEASE_SECONDS = envint("ROUND_LEASE_SECONDS", 120, minimum=1, maximum=2 * MAX_ROUND_SECONDS)
# The demo cluster's round interval, set once when `make run` seeds it (scheduler/demo.py).
DEMO_ROUND_SECONDS = envint("DEMO_ROUND_SECONDS", 30, minimum=1, maximum=MAX_ROUND_SECONDS)

# --- REST API (scheduler/api/) --------------------------------------------------------
# Token first: an anonymous client gets 401 with `WWW-Authenticate: Token`. Session
# authentication enforces CSRF on unsafe methods. JSON only; the schema is /api/schema/.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "scheduler.api.authentication.ThrottledTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["scheduler.api.parsers.BoundedJSONParser"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Throttling (429 with Retry-After). Counts live in each web process's memory (Django's default cache): a
    # limit holds per process, so N gunicorn workers allow up to N times the rate; never a Redis dependency, so
    # the API keeps answering while Redis is down.
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.AnonRateThrottle",
                                 "rest_framework.throttling.UserRateThrottle"],
    # The client's address is the connection's, or the one the nearest trusted proxy saw (cluster_ops.security);
    # None would make DRF trust a client's own X-Forwarded-For.
    "NUM_PROXIES": BEHIND_PROXY,
    "DEFAULT_THROTTLE_RATES": {
        "anon": envstr("API_ANON_RATE", "30/minute"), "user": envstr("API_USER_RATE", "1200/minute"),
        "job-report": envstr("API_REPORT_RATE", "120/minute"),  # per job: workers report every few seconds
        # Wrong API or job tokens per address, then 429 (scheduler/api/throttles.py, FailedCredentialsThrottle).
        "failed-credentials": envstr("API_FAILED_CREDENTIALS_RATE", "20/minute"),
        # What-if sweeps one user starts from the Energy page (scheduler/api/throttles.py, WhatIfStartThrottle).
        "whatif-start": envstr("WHATIF_START_RATE", "3/minute"),
    },
    "EXCEPTION_HANDLER": "scheduler.api.errors.api_exception_handler",
}
# API tokens (django-rest-knox): no expiry unless admin sets one; `Authorization: Token <token>` as before.
REST_KNOX = {"TOKEN_TTL": None, "AUTO_REFRESH": False, "AUTH_HEADER_PREFIX": "Token"}
SPECTACULAR_SETTINGS = {
    "TITLE": "Cluster Ops API",
    "DESCRIPTION": "Submit, inspect and steer training jobs; workers report progress.",
    "VERSION": VERSION,
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No badge from validator.swagger.io: the page loads nothing from another origin.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}

# --- Money ----------------------------------------------------------------------------
# The currency of prices (the energy what-if's price per kWh) and of every cost shown; an ISO 4217 code.
CURRENCY = envstr("CURRENCY", "EUR").upper()
if not (len(CURRENCY) == 3 and CURRENCY.isalpha() and CURRENCY.isascii()):
    CONFIGURATION_ERRORS.append(f"CURRENCY={CURRENCY!r} is not an ISO 4217 code (e.g. EUR, USD)")
    CURRENCY = "EUR"

# --- The product --------------------------------------------------------------------
TRACES_DIR = Path(envstr("TRACES_DIR", str(BASE_DIR.parent / "shared" / "traces")))

# --- The local executor and its node agents ------------------------------------------
# An agent is a Celery worker on a GPU machine consuming the queue ``node.<NODE_HOSTNAME>``.
NODE_HOSTNAME = envstr("NODE_HOSTNAME", socket.gethostname())
STOP_GRACE_SECONDS = envint("STOP_GRACE_SECONDS", 30)  # SIGTERM, then SIGKILL after this long
# Checkpoints, logs and exit codes of jobs: a filesystem shared by every node (and the web
# server, to show logs) when jobs span or move between machines.
JOB_DIR = Path(envstr("JOB_DIR", str(VAR_DIR / "jobs")))
PUBLIC_URL = envstr("PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")  # where jobs send their reports

# --- The cluster back-end (scheduler/backends, scheduler/backends/slurm) -------------------------------
# simulated: the demo cluster of `make run`; slurm: the Slurm cluster below (SLURM_MODE schedule: the console
# decides and Slurm runs the jobs; observe: Slurm decides, the console watches and changes nothing).
CLUSTER_BACKEND = envstr("CLUSTER_BACKEND", "simulated").lower()
if CLUSTER_BACKEND not in {"simulated", "slurm", "kubernetes"}:
    CONFIGURATION_ERRORS.append(f"CLUSTER_BACKEND={CLUSTER_BACKEND!r}: expected simulated, slurm or kubernetes")
    CLUSTER_BACKEND = "simulated"
SLURM_MODE = envstr("SLURM_MODE", "schedule").lower()
if SLURM_MODE not in {"schedule", "observe"}:
    CONFIGURATION_ERRORS.append(f"SLURM_MODE={SLURM_MODE!r}: expected schedule or observe")
    SLURM_MODE = "schedule"
SLURM_REST_URL = envstr("SLURM_REST_URL", "")  # slurmrestd, e.g. http://127.0.0.1:6820
SLURM_USER = envstr("SLURM_USER", "root")  # the Slurm user the console acts as (X-SLURM-USER-NAME)
SLURM_JWT_FILE = envstr("SLURM_JWT_FILE", "")  # or SLURM_JWT in the environment, read at each connection
SLURM_CONF = envstr("SLURM_CONF", "")  # for scontrol and sacct, where REST lacks a verb
SLURM_PARTITION = envstr("SLURM_PARTITION", "")  # empty: Slurm's default partition
SLURM_TIMEOUT_SECONDS = envint("SLURM_TIMEOUT_SECONDS", 10, minimum=1)
# Batch scripts a job may name (Job.script_path) must lie under this folder; empty: only commands.
SLURM_SCRIPT_DIR = envstr("SLURM_SCRIPT_DIR", "")
# `make run` on Slurm: a round this often
SLURM_ROUND_SECONDS = envint("SLURM_ROUND_SECONDS", 20, minimum=1, maximum=MAX_ROUND_SECONDS)
SLURM_DEMO_JOBS = envint("SLURM_DEMO_JOBS", 0)  # example jobs `make run` submits on an empty lab (the lab says 6)
# The console users who own those jobs (their username is their Slurm user; the lab says alice,bob): without
# them, the console's own SLURM_USER runs them.
SLURM_DEMO_OWNERS = [name for name in envstr("SLURM_DEMO_OWNERS", "").split(",") if name.strip()]
if any(not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", name) for name in SLURM_DEMO_OWNERS):
    CONFIGURATION_ERRORS.append("SLURM_DEMO_OWNERS: expected Unix user names separated by commas")
    SLURM_DEMO_OWNERS = []

# Kubernetes (CLUSTER_BACKEND=kubernetes): the kubeconfig (empty: the pod's own ServiceAccount, in a cluster);
# KUBERNETES_MODE schedule: the console decides and Kubernetes runs each job as a Job; observe: Kubernetes'
# scheduler decides, the console watches and changes nothing.
KUBECONFIG = envstr("KUBECONFIG", "")
KUBERNETES_MODE = envstr("KUBERNETES_MODE", "schedule").lower()
if KUBERNETES_MODE not in {"schedule", "observe"}:
    CONFIGURATION_ERRORS.append(f"KUBERNETES_MODE={KUBERNETES_MODE!r}: expected schedule or observe")
    KUBERNETES_MODE = "schedule"
KUBERNETES_JOB_IMAGE = envstr("KUBERNETES_JOB_IMAGE", "python:3.11-slim")  # the image a console job's pods run
KUBERNETES_DEMO_JOBS = envint("KUBERNETES_DEMO_JOBS", 0)  # example jobs `make run` submits on an empty lab
KUBERNETES_TIMEOUT_SECONDS = envint("KUBERNETES_TIMEOUT_SECONDS", 10, minimum=1, maximum=300)
KUBERNETES_ROUND_SECONDS = envint("KUBERNETES_ROUND_SECONDS", 20, minimum=1, maximum=MAX_ROUND_SECONDS)

# --- Telemetry: retention, idle threshold, /metrics access (telemetry/) -------------------------
TELEMETRY_RAW_DAYS = envint("TELEMETRY_RAW_DAYS", 7, minimum=1)  # raw samples
TELEMETRY_MINUTE_DAYS = envint("TELEMETRY_MINUTE_DAYS", 30, minimum=1)  # minute rollups
TELEMETRY_HOUR_DAYS = envint("TELEMETRY_HOUR_DAYS", 365, minimum=1)  # hour rollups and per-job hours
TELEMETRY_IDLE_UTIL = envint("TELEMETRY_IDLE_UTIL", 5)  # a held GPU below this utilisation (%) is idle
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "").strip()  # /metrics: `Authorization: Bearer <token>`


def envnetworks(name: str) -> list[str]:
    """Comma-separated IP addresses or CIDR networks; malformed entries are configuration errors."""
    networks = []
    for item in envlist(name, []):
        try:
            networks.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            CONFIGURATION_ERRORS.append(f"{name}: {item!r} is not an IP address or network")
    return networks


METRICS_ALLOWED_IPS = envnetworks("METRICS_ALLOWED_IPS")  # /metrics without a token from these

# --- Telemetry (telemetry/collector.py, telemetry/simulated.py) ------------------------
# How often node agents (and, on the demo cluster, the simulated source) sample every GPU.
TELEMETRY_SECONDS = envint("TELEMETRY_SECONDS", 10, minimum=1)
# Where GPU telemetry comes from: "nvml" (the console's node agents, the default) or "prometheus" (dcgm-exporter's
# series in the operator's Prometheus: telemetry/prometheus.py), with a bearer token or basic auth.
TELEMETRY_SOURCE = envstr("TELEMETRY_SOURCE", "nvml").lower()
if TELEMETRY_SOURCE not in {"nvml", "prometheus"}:
    CONFIGURATION_ERRORS.append(f"TELEMETRY_SOURCE={TELEMETRY_SOURCE!r}: use nvml or prometheus")
    TELEMETRY_SOURCE = "nvml"
PROMETHEUS_URL = envstr("PROMETHEUS_URL", "")
PROMETHEUS_TOKEN = os.environ.get("PROMETHEUS_TOKEN", "").strip()
PROMETHEUS_USER = os.environ.get("PROMETHEUS_USER", "").strip()
PROMETHEUS_PASSWORD = os.environ.get("PROMETHEUS_PASSWORD", "")
PROMETHEUS_TIMEOUT_SECONDS = envint("PROMETHEUS_TIMEOUT_SECONDS", 10, minimum=1)
if TELEMETRY_SOURCE == "prometheus" and not PROMETHEUS_URL.startswith(("http://", "https://")):
    CONFIGURATION_ERRORS.append("TELEMETRY_SOURCE=prometheus needs PROMETHEUS_URL (http:// or https://)")

# --- Reports (cluster_ops/reports/): files and e-mail ----------------------------------------------
# Report files live under MEDIA_ROOT and are served only by the login-protected download view: no MEDIA_URL.
MEDIA_ROOT = VAR_DIR / "media"
# E-mail through SMTP when EMAIL_HOST is set; without it, each e-mail is written as a file under VAR_DIR/outbox
# (a fresh clone sends nothing anywhere). Tests use Django's in-memory backend.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "").strip()
EMAIL_BACKEND = ("django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST
                 else "django.core.mail.backends.filebased.EmailBackend")
EMAIL_FILE_PATH = VAR_DIR / "outbox"
EMAIL_PORT = envint("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "").strip()
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)  # STARTTLS (usually port 587)
EMAIL_TIMEOUT = 30  # seconds; a hung SMTP server fails the attempt, which is retried
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "cluster-ops@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"},
                # WeasyPrint logs every layout step at INFO, fontTools every subset: reports need neither.
                "weasyprint": {"level": "WARNING"}, "fontTools": {"level": "WARNING"}},
}

# First superuser, created once by `manage.py ensure_admin` (run by `make run`).
ADMIN_USERNAME = envstr("ADMIN_USERNAME", "admin")
ADMIN_PASSWORD = os.environ.get("ADMIN_PASSWORD", "")  # empty: a random one, printed once
