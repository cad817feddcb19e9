"""The portal's own alerts (GET /api/v2/alerts) reach the admins who asked, each alert once:
across sweeps, and for an alert that only says "now" (an unreachable backend) while it lasts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.models import Node
from jobs.alerts import alert
from notify.models import AlertSettings, Notification, PortalAlert
from notify.portal_alerts import gap, new_alerts
from notify.sweep import sweep
from tests.notify.conftest import wants_alerts

pytestmark = pytest.mark.django_db(transaction=True)


def silent_node(name: str = "gpu-7") -> Node:
    node = Node.objects.create(name=name, cpu=8, memory_mb=64_000)
    Node.objects.filter(id=node.id).update(updated_at=timezone.now() - timedelta(hours=2))
    return node


def test_an_admin_is_told_of_a_silent_node_once(admin, alice, backend, smtp, receiver, eager):
    wants_alerts(admin, receiver, events=["alert"])
    wants_alerts(alice, receiver)  # not an admin: not told
    silent_node()

    sweep(backend)
    sweep(backend)

    told = [m for m in smtp.messages() if "gpu-7" in m["Subject"]]
    assert len(told) == 1 and told[0]["To"] == "admin@lab.example"
    assert told[0]["Subject"].startswith("[GPU portal] NodeNotReporting: node gpu-7")
    hooks = [
        d for d in receiver.deliveries() if d["body"]["alert"]["labels"].get("node") == "gpu-7"
    ]
    assert len(hooks) == 1 and hooks[0]["valid"] and hooks[0]["event"] == "alert"
    assert hooks[0]["body"]["alert"]["url"] == "https://portal.lab.example/cluster/"
    assert not Notification.objects.filter(user=alice).exists()


def test_an_admin_who_did_not_ask_is_not_told(admin, backend, smtp, eager):
    admin.email = "admin@lab.example"
    admin.save()
    AlertSettings.objects.create(user=admin, email=True, events=["failed"])
    silent_node()

    sweep(backend)

    assert smtp.messages() == []


def test_a_node_silent_again_later_is_a_new_alert(admin, backend, receiver, eager):
    wants_alerts(admin, receiver, email=False, events=["alert"])
    node = silent_node()
    sweep(backend)
    Node.objects.filter(id=node.id).update(updated_at=timezone.now() - timedelta(hours=1))

    sweep(backend)

    assert len([d for d in receiver.deliveries() if "gpu-7" in d["body"]["message"]]) == 2


def unreachable(now):
    return alert("BackendUnreachable", "error", "the local backend: no answer", now)


def test_an_alert_that_only_says_now_is_new_once_while_it_lasts():
    now = timezone.now()
    assert len(new_alerts([unreachable(now)], now)) == 1

    later = now + gap() / 2
    assert new_alerts([unreachable(later)], later) == []
    later += gap() / 2
    assert new_alerts([unreachable(later)], later) == []

    back = later + gap() * 2  # it went away for longer than a few sweeps, and is back
    [again] = new_alerts([unreachable(back)], back)
    assert again["startsAt"] == back.isoformat()
    assert PortalAlert.objects.count() == 2
