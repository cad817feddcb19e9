"""``extras.notify`` is checked at submit: a mistake is a 400 that names the field, in the API
and in ``load_job`` (the protocol package, which the form and the API share)."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from protocol import ProtocolError, json_schema, load_job, normalise
from tests.api.helpers import client_for
from tests.jobs.samples import hello_job, v1_job


def issues_of(extras: str) -> list[str]:
    with pytest.raises(ProtocolError) as caught:
        load_job(hello_job() + f"extras:\n  notify: {extras}\n")
    return [str(issue) for issue in caught.value.issues]


def test_a_good_notify_is_kept_as_given():
    text = (
        hello_job()
        + "extras:\n  notify: {events: [failed, waiting], email: true, "
        + ("webhook: false, waitingMinutes: 30}\n")
    )
    assert load_job(text).job["extras"]["notify"] == {
        "events": ["failed", "waiting"],
        "email": True,
        "webhook": False,
        "waitingMinutes": 30,
    }


@pytest.mark.parametrize(
    ("extras", "issue"),
    [
        ("{events: [failed, nope]}", "extras.notify.events[1]: must be one of succeeded, "),
        ("{events: failed}", "extras.notify.events: must be a list of events"),
        ("{email: yes please}", "extras.notify.email: must be true or false"),
        ("{webhook: 1}", "extras.notify.webhook: must be true or false"),
        ("{waitingMinutes: 0}", "extras.notify.waitingMinutes: must be an integer >= 1"),
        ("{emial: true}", 'extras.notify.emial: unknown field (did you mean "email"?)'),
        ("[failed]", "extras.notify: must be an object"),
    ],
)
def test_a_bad_notify_names_its_field(extras, issue):
    assert any(line.startswith(issue) for line in issues_of(extras)), issues_of(extras)


def test_a_v1_job_is_checked_the_same_way():
    with pytest.raises(ProtocolError) as caught:
        normalise(v1_job("v1", "true", extras={"notify": {"events": ["ended"]}}))
    assert str(caught.value).startswith("extras.notify.events[0]: must be one of")


def test_the_json_schema_says_the_same():
    job = yaml.safe_load(hello_job() + "extras:\n  notify: {events: [nope]}\n")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(job, json_schema())
    good = yaml.safe_load(hello_job() + "extras:\n  notify: {events: [failed], email: true}\n")
    jsonschema.validate(good, json_schema())


@pytest.mark.django_db
def test_the_api_refuses_a_bad_notify_with_a_400_naming_it(alice):
    text = hello_job("noisy") + "extras:\n  notify: {events: [sometimes]}\n"
    answer = client_for(alice).post("/api/v2/jobs", text, content_type="text/yaml")

    assert answer.status_code == 400
    assert "extras.notify.events[0]" in answer.json()["message"]
