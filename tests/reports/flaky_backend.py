"""An e-mail backend that fails ``FlakyBackend.failures`` times, then delivers into ``mail.outbox`` like locmem."""

from __future__ import annotations

from collections.abc import Sequence
from smtplib import SMTPServerDisconnected

from django.core.mail import EmailMessage
from django.core.mail.backends.locmem import EmailBackend


class FlakyBackend(EmailBackend):
    failures = 0

    def send_messages(self, messages: Sequence[EmailMessage]) -> int:
        if FlakyBackend.failures > 0:
            FlakyBackend.failures -= 1
            raise SMTPServerDisconnected("Connection unexpectedly closed")
        return super().send_messages(messages)
