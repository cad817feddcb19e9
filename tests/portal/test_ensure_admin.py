from __future__ import annotations

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_first_admin_gets_the_password_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("PORTAL_ADMIN_PASSWORD", "correct-horse-battery")
    call_command("ensure_admin")
    assert authenticate(username="admin", password="correct-horse-battery") is not None
    assert "correct-horse-battery" not in capsys.readouterr().out


def test_without_a_password_a_random_one_is_printed_once(monkeypatch, capsys):
    monkeypatch.delenv("PORTAL_ADMIN_PASSWORD", raising=False)
    call_command("ensure_admin")
    password = capsys.readouterr().out.split("password: ")[1].split()[0]
    assert authenticate(username="admin", password=password).is_superuser
    call_command("ensure_admin")
    assert password not in capsys.readouterr().out
    assert User.objects.count() == 1
