"""Number formats of the report templates: ``{{ value|num:1 }}`` → "1,234.5", ``{{ fraction|pct }}`` → "12 %"."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def num(value: float | int | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{int(digits)}f}"


@register.filter
def pct(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value * 100:,.{int(digits)}f} %"
