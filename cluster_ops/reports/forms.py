"""The "make report" form: which period, whose report, and (staff) whether to e-mail it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib.auth.models import AnonymousUser, User

from cluster_ops.reports.models import Report
from scheduler.models import Tenant

from . import periods
from .deliver import recipients_for
from .services import first_data_day

MAKE_PERMISSION, SEND_PERMISSION = "reports.add_report", "reports.send_report"


def may_make_reports(user: User | AnonymousUser) -> bool:
    """Staff, who see every tenant, need the permission admin asks for; tenant users make their own tenants'."""
    return user.is_authenticated and (not user.is_staff or user.has_perm(MAKE_PERMISSION))


def has_recipients(kind: str | None, tenant: Tenant | None) -> bool:
    return recipients_for(Report(kind=kind or "", tenant=tenant)).exists()

PERIODS = [(periods.DAILY, "yesterday (daily)"), (periods.WEEKLY, "last week, Monday to Sunday (weekly)"),
           (periods.CUSTOM, "from … to … (custom)")]


class ReportRequestForm(forms.Form):
    period = forms.ChoiceField(choices=PERIODS, initial=periods.WEEKLY)
    first_day = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="from")
    last_day = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="to (included)")
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none(), required=False)
    send = forms.BooleanField(required=False, label="e-mail it to the recipients when ready")

    def __init__(self, user: User | AnonymousUser, now: datetime, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = now
        self.chosen_period: periods.Period | None = None
        tenant = self.fields["tenant"]
        assert isinstance(tenant, forms.ModelChoiceField)
        tenant.queryset = Tenant.objects.visible_to(user).order_by("name")
        if user.is_staff:
            tenant.empty_label = "whole cluster"
        else:  # tenant users make their own tenants' reports
            tenant.required, tenant.empty_label = True, None
        if not user.has_perm(SEND_PERMISSION):  # e-mailing needs the permission admin's "E-mail" action needs
            del self.fields["send"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind, first, last = data.get("period"), data.get("first_day"), data.get("last_day")
        try:
            if kind == periods.CUSTOM:
                if not first or not last:
                    raise forms.ValidationError("A custom period needs its first and last day.")
                self.chosen_period = periods.custom(first, last, self.now, first_data_day())
            elif kind:
                self.chosen_period = periods.last_complete(kind, self.now)
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None
        if data.get("send") and self.chosen_period is not None and not has_recipients(kind, data.get("tenant")):
            self.add_error("send", "Nobody receives these reports: add recipients in admin (Report recipients), "
                                   "or untick this box.")
        return data
