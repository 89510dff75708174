"""Settings parse the environment; misconfiguration is named by a system check.

Each case imports the settings in a fresh interpreter with a controlled environment,
as a process of the product would start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRINT_SETTINGS = (
    "import json; from django.conf import settings as s; "
    "print(json.dumps({'db': s.DATABASES['default'], 'redis': s.REDIS_URL, 'debug': s.DEBUG,"
    " 'key': s.SECRET_KEY, 'traces': str(s.TRACES_DIR), 'broker': s.CELERY_BROKER_URL}, default=str))"
)
PRODUCT_VARIABLES = {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "TRACES_DIR", "HTTPS", "VAR_DIR"}


def run(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in PRODUCT_VARIABLES and not k.startswith("DJANGO")}
    environment = {**clean, "VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "cluster_ops.settings", **env}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=60)


def loaded(tmp_path: Path, **env: str) -> dict:
    result = run(["-c", "import django; django.setup(); " + PRINT_SETTINGS], tmp_path, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_defaults_are_sqlite_under_var_with_wal_and_immediate_transactions(tmp_path: Path) -> None:
    config = loaded(tmp_path)
    assert config["db"]["ENGINE"] == "django.db.backends.sqlite3"
    assert config["db"]["NAME"] == str(tmp_path / "var" / "cluster_ops.sqlite3")
    assert config["db"]["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in config["db"]["OPTIONS"]["init_command"]
    assert config["debug"] is False
    assert config["redis"] == config["broker"] == "redis://127.0.0.1:6399/0"
    assert config["traces"] == str(ROOT.parent / "shared" / "traces")


def test_postgresql_from_database_url(tmp_path: Path) -> None:
    config = loaded(tmp_path, DATABASE_URL="postgres://ops:s3cret@db.example:5433/cluster")
    db = config["db"]
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "cluster", "ops", "s3cret", "db.example", 5433
    )


def test_environment_overrides(tmp_path: Path) -> None:
    config = loaded(tmp_path, REDIS_URL="redis://cache:6379/2", DEBUG="true", SECRET_KEY="k" * 60,
                    TRACES_DIR="/data/traces")
    assert (config["redis"], config["broker"], config["debug"], config["key"], config["traces"]) == (
        "redis://cache:6379/2", "redis://cache:6379/2", True, "k" * 60, "/data/traces"
    )


def test_secret_key_is_generated_once_into_var(tmp_path: Path) -> None:
    first, second = loaded(tmp_path)["key"], loaded(tmp_path)["key"]
    assert first == second and len(first) >= 50
    assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o777 == 0o600


def check(tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run(["manage.py", "check", *extra], tmp_path, **env)


def test_a_bad_database_url_is_named_by_the_check(tmp_path: Path) -> None:
    result = check(tmp_path, DATABASE_URL="mysqlx://nowhere")
    assert result.returncode != 0
    assert "cluster_ops.E001" in result.stderr and "DATABASE_URL='mysqlx://nowhere'" in result.stderr


def test_a_bad_boolean_and_a_bad_redis_url_are_named(tmp_path: Path) -> None:
    result = check(tmp_path, DEBUG="maybe", REDIS_URL="http://localhost:6379")
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr
    assert "REDIS_URL='http://localhost:6379' is not a Redis URL" in result.stderr


def test_a_currency_that_is_no_iso_code_is_named(tmp_path: Path) -> None:
    result = check(tmp_path, CURRENCY="euros")
    assert result.returncode != 0 and "CURRENCY='EUROS' is not an ISO 4217 code" in result.stderr
    assert check(tmp_path, CURRENCY="usd").returncode == 0


def test_a_missing_traces_dir_is_a_warning_not_an_error(tmp_path: Path) -> None:
    result = check(tmp_path, TRACES_DIR=str(tmp_path / "none"))
    assert result.returncode == 0 and "cluster_ops.W001" in result.stderr


def test_deploy_check_is_clean_with_production_settings(tmp_path: Path) -> None:
    key = "n" + "0a9Zk$3qL!x7Vb2Rm8Tc5Yp1Wd6Hs4Fg9Je0Ku3Ni7Oq2Ul5" * 2
    result = check(tmp_path, "--deploy", "--fail-level", "WARNING", HTTPS="true", SECRET_KEY=key,
                   TRACES_DIR=str(ROOT))
    assert result.returncode == 0, result.stderr
