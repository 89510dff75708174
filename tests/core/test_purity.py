"""The rule that holds the design together: the scheduling core and the simulator import no framework."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE_PACKAGES = ["scheduler/core", "scheduler/sim"]
FORBIDDEN = {"django", "celery", "dash", "plotly", "django_plotly_dash", "rest_framework", "kombu", "redis"}


def imported_modules(source: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def framework_imports(package: Path) -> list[str]:
    return [
        f"{path.relative_to(package.parent)}:{line} imports {module}"
        for path in sorted(package.rglob("*.py"))
        for line, module in imported_modules(path.read_text())
        if module.split(".")[0] in FORBIDDEN
    ]


@pytest.mark.parametrize("package", [p for p in PURE_PACKAGES if (ROOT / p).is_dir()])
def test_pure_packages_import_no_framework(package: str) -> None:
    assert framework_imports(ROOT / package) == []


def test_the_walk_does_catch_a_framework_import(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import os\nfrom django.db import models\nimport celery.app\n")
    found = framework_imports(tmp_path)
    assert len(found) == 2 and "django.db" in found[0] and "celery.app" in found[1]


def test_importing_every_pure_module_loads_no_framework_even_indirectly() -> None:
    """The walk above sees direct imports only; a pure module importing a helper that imports Django would pass it.
    Here every module of the pure packages is imported in a fresh interpreter, and no framework may be loaded."""
    import subprocess
    import sys

    program = (
        "import importlib, pkgutil, sys\n"
        f"for name in {[p.replace('/', '.') for p in PURE_PACKAGES]!r}:\n"
        "    package = importlib.import_module(name)\n"
        "    for module in pkgutil.walk_packages(package.__path__, name + '.'):\n"
        "        importlib.import_module(module.name)\n"
        f"print(sorted({{m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN)!r}}}))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin"})
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip() == "[]"
