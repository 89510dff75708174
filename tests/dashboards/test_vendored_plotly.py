"""The vendored plotly.js cartesian bundle is the plotly.js that the pinned plotly Python package was built for."""

from __future__ import annotations

import re
from pathlib import Path

import plotly
from django.conf import settings

VERSION = re.compile(r"plotly\.js(?: \([^)]*\))? v(\d+\.\d+\.\d+)")


def header_version(path: Path) -> str:
    match = VERSION.search(path.read_text(encoding="utf-8")[:400])
    assert match, f"no plotly.js version in the header of {path}"
    return match.group(1)


def test_the_cartesian_bundle_matches_the_python_packages_plotly_js() -> None:
    vendored = Path(settings.BASE_DIR) / "cluster_ops" / "static" / "vendor" / "plotly" / "plotly-cartesian.min.js"
    shipped = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert header_version(vendored) == header_version(shipped)
