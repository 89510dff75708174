"""Report periods: a day, an ISO week (Monday to Sunday) or any run of whole days, in ``TIME_ZONE``.

A period is the half-open interval [start, end) between two local midnights; its ``previous`` period is the one of
the same length that ends where it starts, which every figure of a report is compared with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.utils import timezone

DAILY, WEEKLY, CUSTOM = "daily", "weekly", "custom"
CUSTOM_PATTERN = re.compile(r"^(\d{4}-\d{2}-\d{2})\.\.(\d{4}-\d{2}-\d{2})$")
MAX_DAYS = 366  # a custom period covers at most a year: the report's work and memory grow with it


@dataclass(frozen=True)
class Period:
    kind: str  # daily | weekly | custom
    start: datetime  # a local midnight, aware
    end: datetime  # exclusive

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ValueError(f"a period ends after it starts, got {self.start} .. {self.end}")

    @property
    def length(self) -> timedelta:
        return self.end - self.start

    @property
    def hours(self) -> float:
        return self.length.total_seconds() / 3600

    @property
    def previous(self) -> Period:
        return Period(self.kind, self.start - self.length, self.start)

    @property
    def first_day(self) -> date:
        return timezone.localtime(self.start).date()

    @property
    def last_day(self) -> date:
        """The last day the period covers (``end`` is the midnight after it)."""
        return timezone.localtime(self.end - timedelta(microseconds=1)).date()

    @property
    def label(self) -> str:
        """``2026-11-16`` for a day, ``2026-11-16 – 2026-11-22`` otherwise."""
        first, last = self.first_day, self.last_day
        return f"{first:%Y-%m-%d}" if first == last else f"{first:%Y-%m-%d} – {last:%Y-%m-%d}"


def midnight(day: date) -> datetime:
    """The start of ``day`` in the current time zone (``TIME_ZONE``)."""
    return timezone.make_aware(datetime.combine(day, time.min))


def days(kind: str, first: date, last: date) -> Period:
    """The period from the start of ``first`` to the end of ``last`` (both included)."""
    return Period(kind, midnight(first), midnight(last + timedelta(days=1)))


def last_complete(kind: str, now: datetime) -> Period:
    """The last whole day (``daily``) or Monday-to-Sunday week (``weekly``) that ended at or before ``now``."""
    today = timezone.localtime(now).date()
    if kind == DAILY:
        yesterday = today - timedelta(days=1)
        return days(DAILY, yesterday, yesterday)
    if kind == WEEKLY:
        monday = today - timedelta(days=today.weekday() + 7)
        return days(WEEKLY, monday, monday + timedelta(days=6))
    raise ValueError(f"no 'last complete' {kind!r} period: use daily or weekly")


def parse(text: str, now: datetime, first_data: date | None = None) -> Period:
    """``daily``, ``weekly`` (the last complete one) or ``YYYY-MM-DD..YYYY-MM-DD`` (both days included).

    A ValueError says what is wrong; a custom period may not end after today.
    """
    text = text.strip()
    if text in (DAILY, WEEKLY):
        return last_complete(text, now)
    match = CUSTOM_PATTERN.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a period: use daily, weekly or YYYY-MM-DD..YYYY-MM-DD")
    try:
        first, last = (date.fromisoformat(part) for part in match.groups())
    except ValueError as error:
        raise ValueError(f"{text!r}: {error}") from None
    return custom(first, last, now, first_data)


def custom(first: date, last: date, now: datetime, first_data: date | None = None) -> Period:
    """The days ``first`` to ``last``; a ValueError if they are reversed, in the future, longer than ``MAX_DAYS``
    or start before ``first_data`` (the cluster's first day with data, when known)."""
    if last < first:
        raise ValueError(f"the period ends ({last}) before it starts ({first})")
    if last > timezone.localtime(now).date():
        raise ValueError(f"the period ends in the future ({last})")
    if (last - first).days + 1 > MAX_DAYS:
        raise ValueError(f"a period covers at most {MAX_DAYS} days, this one {(last - first).days + 1}")
    if first_data is not None and first < first_data:
        raise ValueError(f"the period starts ({first}) before the cluster's first data ({first_data})")
    return days(CUSTOM, first, last)
