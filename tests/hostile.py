"""The hostile values every door's fuzzer sends — the API's bodies, admin's forms, the Dash callbacks — so that each
door is tried with the same ones: huge, negative, non-finite and tiny numbers, empty and numeric-looking text,
and nested lists and objects of them."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 2**31, 2**63 - 1, 1e308, 1e-320, 0.5]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=30), st.sampled_from(["", "nan", "1", "a100"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=6)


def as_form_text(value: Any) -> str:
    """A hostile value as a browser would post it in a form field: text, JSON for lists and objects."""
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, allow_nan=True)
    return str(value)


def fuzz_settings(default_examples: int) -> Any:
    """Hypothesis settings of a fuzzer: ``FUZZ_EXAMPLES`` examples for a long run by hand, else the default."""
    return settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", str(default_examples))), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
