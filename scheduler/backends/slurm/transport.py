"""JSON over HTTP to slurmrestd: the JWT headers, a timeout on every call, retried reads, Slurm's errors raised.

The token is sent only as a header and never logged. Reads (GET) are retried by urllib3's ``Retry``; writes are
not, since a submit that reached Slurm but lost its answer would run twice (the executor finds such a job again by
its comment instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from scheduler.backends.slurm.records import SlurmRefused, SlurmUnavailable

HELD_NOTICE = 2042  # slurmrestd's "Job is in held state": a notice on a held submit, not an error
# A slurmrestd answer larger than this is refused, not parsed: a job is about 2.6 KB of JSON, so this holds the
# queue of a cluster of 100,000 jobs (Slurm's default MaxJobCount is 10,000: 26 MB).
MAX_BODY = 256 * 1024 * 1024
# Slurm's errno values for "could not talk to slurmctld" (slurm_errno.h: the communication errors, 1000–1009, and
# slurmctld's, 1800–1804): Slurm is away, not saying no.
UNREACHABLE = frozenset((*range(1000, 1010), *range(1800, 1805)))


class RestTransport:
    """JSON over HTTP to slurmrestd, with the JWT headers, a timeout on every call and retried reads."""

    def __init__(self, base_url: str, user: str, token: str, timeout: float) -> None:
        self.base_url, self.timeout = base_url.rstrip("/"), timeout
        self.session = requests.Session()
        self.session.headers.update({"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token,
                                     "Accept": "application/json"})
        retries = Retry(total=2, connect=2, read=1, backoff_factor=0.3, allowed_methods={"GET"},
                        status_forcelist=(502, 503, 504), raise_on_status=False)
        self.session.mount("http://", HTTPAdapter(max_retries=retries))
        self.session.mount("https://", HTTPAdapter(max_retries=retries))

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None,
             params: Mapping[str, Any] | None = None, as_user: str = "") -> dict[str, Any]:
        """``as_user``: the Slurm user the call is made as, with the console's token (Slurm lets a token of
        ``SlurmUser`` or root act for any user); by default the console's own (``SLURM_USER``)."""
        what = f"slurmrestd {method} {path}"
        headers = {"X-SLURM-USER-NAME": as_user} if as_user else None
        try:
            response = self.session.request(method, self.base_url + path, json=body, params=params, headers=headers,
                                            timeout=(min(self.timeout, 3.0), self.timeout))
        except requests.RequestException as error:
            raise SlurmUnavailable(f"{what}: no answer ({type(error).__name__})") from None
        if len(response.content) > MAX_BODY:
            raise SlurmRefused(f"{what}: an answer of {len(response.content)} bytes is too large")
        try:
            document = response.json()
        except ValueError:
            kind = SlurmUnavailable if response.status_code >= 500 else SlurmRefused  # a proxy's 502: Slurm is away
            raise kind(f"{what}: HTTP {response.status_code} with a body that is not JSON") from None
        if not isinstance(document, dict):
            raise SlurmRefused(f"{what}: HTTP {response.status_code} with JSON that is not an object")
        errors = [error for error in document.get("errors") or [] if isinstance(error, dict)
                  and _error_number(error) != HELD_NOTICE]
        if errors or response.status_code >= 400:
            first = errors[0] if errors else {}
            number = _error_number(first)
            if response.status_code >= 500 and (number is None or number in UNREACHABLE):
                # v0.0.38 says only "Unspecified error" (errno -1) when slurmctld cannot be reached
                raise SlurmUnavailable(f"{what}: slurmrestd cannot reach Slurm (HTTP {response.status_code})")
            message = str(first.get("error") or first.get("description") or response.reason)[:200]
            raise SlurmRefused(f"{what}: {message} (HTTP {response.status_code}, "
                               f"Slurm error {'none' if number is None else number})", number)
        return document


def _error_number(error: Mapping[str, Any]) -> int | None:
    """Slurm's errno of one error: ``error_code`` in v0.0.38, ``error_number`` from v0.0.40."""
    number = error.get("error_code", error.get("error_number"))
    return number if isinstance(number, int) else None
