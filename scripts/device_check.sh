#!/usr/bin/env bash
# Device check for GPU telemetry on a real NVIDIA machine: NVML discovery, the collector every 2 s for 60 s
# under a small GPU load (torch, when requirements-node.txt installs it), then a report per GPU (samples,
# utilisation and power min/avg/max, energy from the counter, power limits and read-back) and the events.
# Read-only unless --set-cap W (applies W watts to every GPU through the product's path, then restores).
#
#   bash scripts/device_check.sh [--seconds 60] [--every 2] [--set-cap W] [--no-load]
#
# Needs only this repository and pip; the database is a temporary SQLite file, removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null; then
    echo "device check: nvidia-smi not found: not an NVIDIA GPU machine (or no driver)" >&2
    exit 2
fi
nvidia-smi --query-gpu=index,name,uuid,power.limit,mig.mode.current --format=csv || true
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/pip install --quiet -r requirements.txt
if [ -f requirements-node.txt ] && [[ " $* " != *" --no-load "* ]]; then
    .venv/bin/pip install --quiet -r requirements-node.txt || echo "device check: torch did not install; no GPU load"
fi
VAR_DIR=$(mktemp -d)
trap 'rm -rf "$VAR_DIR"' EXIT
export VAR_DIR DATABASE_URL="" DJANGO_SETTINGS_MODULE=cluster_ops.settings
.venv/bin/python manage.py migrate --noinput --verbosity 0
.venv/bin/python scripts/device_check.py "$@"
