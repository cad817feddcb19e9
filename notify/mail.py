"""An alert by e-mail, through Django's SMTP backend (``EMAIL_*`` settings), to the address of
the user's account as it is when the mail is sent."""

from __future__ import annotations

import smtplib

from django.conf import settings
from django.core.mail import EmailMessage

from notify.bodies import text_of


class MailError(Exception):
    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


def send(address: str, subject: str, body: str, event: str, delivery_id: str) -> str:
    """Send the alert to ``address``; the address. ``MailError`` when it was not taken."""
    if not settings.EMAIL_HOST:
        raise MailError("the portal sends no e-mail (EMAIL_HOST is not set)", permanent=True)
    if not address:
        raise MailError("the account has no e-mail address", permanent=True)
    message = EmailMessage(
        subject=subject,
        body=text_of(body),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[address],
        headers={"X-Portal-Event": event, "X-Portal-Delivery": delivery_id},
    )
    try:
        message.send()
    except (OSError, smtplib.SMTPException) as exc:
        where = f"{settings.EMAIL_HOST}:{settings.EMAIL_PORT}"
        raise MailError(f"SMTP {where}: {exc or type(exc).__name__}") from None
    return address
