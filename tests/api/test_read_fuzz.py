"""Generated query parameters against every GET that reads them: never a 5xx; a 400 names the
parameter. Two 500s were found by hand: ``end=0001-01-01T00:30:00Z`` (OverflowError in ``end - 24 h``) on
/api/utilisation/ and, on writes, a 400-digit integer (``math.isfinite`` on an int too large for a float)."""

from __future__ import annotations

import os

import pytest
from django.core.cache import cache
from django.test import Client
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

TIMES = st.one_of(
    st.datetimes(timezones=st.timezones()).map(lambda t: t.isoformat()),
    st.sampled_from(["0001-01-01T00:30:00Z", "9999-12-31T23:59:59Z", "1970-01-01T00:00:00Z", "now", "", "nan",
                     "2026-12-01T10:00:00+14:00", "2026-02-30T00:00:00Z", "-1", "1" * 400]),
)
WORDS = st.one_of(st.text(max_size=40), st.sampled_from(["cluster", "node:a100-00", "tenant:vision", "tenant:",
                                                         "node:" + "x" * 300, "minute", "hour", "-1", "0",
                                                         "9" * 400, "1e309", "%00", "../../etc/passwd"]))
QUERIES = {
    "/api/utilisation/": st.fixed_dictionaries({}, optional={"scope": WORDS, "start": TIMES, "end": TIMES,
                                                             "step": WORDS}),
    "/api/jobs/": st.fixed_dictionaries({}, optional={"page": WORDS, "state": WORDS, "tenant": WORDS}),
    "/api/whatif/": st.fixed_dictionaries({}, optional={"page": WORDS, "status": WORDS}),
    "/reports/": st.fixed_dictionaries({}, optional={"page": WORDS}),
    "/admin/scheduler/job/": st.fixed_dictionaries({}, optional={"q": WORDS, "o": WORDS, "p": WORDS,
                                                                 "state__exact": WORDS, "tenant__id__exact": WORDS,
                                                                 "submitted_at__gte": TIMES}),
    "/admin/scheduler/schedulinground/": st.fixed_dictionaries({}, optional={"o": WORDS, "p": WORDS,
                                                                            "status__exact": WORDS}),
    "/admin/scheduler/whatifrun/": st.fixed_dictionaries({}, optional={"q": WORDS, "o": WORDS, "p": WORDS}),
}
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "40")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def clean(query: dict[str, str]) -> dict[str, str]:
    return {key: value.replace("\x00", "") for key, value in query.items()}  # the test client refuses NUL itself


@pytest.mark.parametrize("path", sorted(QUERIES))
def test_no_query_parameter_gives_a_5xx(path: str, operator_client: Client, operator) -> None:  # type: ignore[no-untyped-def]
    api = APIClient()
    api.force_authenticate(operator)

    @FUZZ
    @given(query=QUERIES[path])
    @example(query={"scope": "tenant:vision", "end": "0001-01-01T00:30:00Z"})
    @example(query={"start": "9999-12-31T23:59:59Z"})
    def check(query: dict[str, str]) -> None:
        cache.clear()  # the throttles' counts
        client = api if path.startswith("/api/") else operator_client
        response = client.get(path, clean(query))
        assert response.status_code < 500, (query, response.content[:300])
        if response.status_code == 400 and path.startswith("/api/"):
            assert set(response.json()) <= set(query) | {"non_field_errors"}, response.json()

    check()


def test_a_what_if_with_a_400_digit_integer_is_a_400_naming_it(staff_api: APIClient, settings, fixtures_dir) -> None:  # type: ignore[no-untyped-def]
    settings.TRACES_DIR = fixtures_dir
    body = '{"trace": "traces/native/workload.csv", "policy": "fifo", "nodes": ' + "9" * 400 + "}"
    response = staff_api.post("/api/whatif/", body, content_type="application/json")
    assert response.status_code == 400 and "nodes" in response.json(), response.content[:300]


def test_a_time_before_any_telemetry_is_a_400_naming_it(staff_api: APIClient) -> None:
    response = staff_api.get("/api/utilisation/", {"scope": "tenant:vision", "end": "0001-01-01T00:30:00Z"})
    assert response.status_code == 400 and list(response.json()) == ["end"], response.content
