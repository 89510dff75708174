"""JSON from clients, with a bound on nesting: Python's decoder recurses once per level and fails with
``RecursionError`` (a 500) near depth 1,000; no document this product accepts nests deeper than a few levels."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


class TooDeep(ValueError):
    """A document nested more than ``MAX_DEPTH`` levels."""


def nesting_depth(text: str) -> int:
    """How deep arrays and objects nest in ``text`` (strings skipped); a linear scan, no recursion."""
    depth = deepest = 0
    for bracket in _NOT_A_BRACKET.sub("", _STRING.sub('""', text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads``, refusing a document nested deeper than ``max_depth`` (``TooDeep``) before decoding it;
    ``ValueError`` (``json.JSONDecodeError``, ``UnicodeDecodeError``) for anything that is not JSON."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if nesting_depth(text) > max_depth:
        raise TooDeep(f"JSON nested more than {max_depth} levels deep.")
    return json.loads(text)
