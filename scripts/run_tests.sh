#!/usr/bin/env bash
# The whole suite, as `make test` runs it: lint, types and the import layers, the manual's build, then pytest.
# pytest exits 5 when it collected no test: that is a broken selection, never a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check . || exit 1
.venv/bin/mypy || exit 1
.venv/bin/lint-imports --no-cache --no-logo || exit 1  # the import layers and no circles (pyproject.toml)
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet || exit 1  # the manual: a broken link fails the suite
if [ "${1:-}" = "--fast" ]; then
    # `make test-fast`: what needs nothing outside the venv and starts no process or server — the core, the
    # simulator, the web and API in-process — on every core, for the edit-and-check loop; `make test` is still the
    # whole suite.
    shift
    set -- -n auto -m "not integration and not needs" --ignore=tests/integration --ignore=tests/browser \
        --ignore=tests/slurm --ignore=tests/kubernetes --deselect=tests/test_prerequisites.py::test_every_prerequisite_is_present_here "$@"
else
    .venv/bin/python -m tests.prerequisites || exit 1  # installs (as root) or names what the suite needs
fi
.venv/bin/pytest --durations=30 "$@"  # the slowest tests named in every log: where the suite's time goes
status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: failing, since an empty run proves nothing" >&2
    exit 1
fi
exit "$status"
