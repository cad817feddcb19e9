"""Clone -> Submit: the clone page's forms post to the submit page, so a clone is submitted as
any job is; its secrets show masked and a mask left as is is refused, naming the secret."""

from __future__ import annotations

import html
import re

import pytest

from jobs import lifecycle
from jobs.models import Job
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

SECRET = hello_job(command="echo <% $secrets.token %>", secrets="{token: s3cr3t-value}")


def cloned_text(body: str) -> str:
    """The job text the clone page puts in the editor."""
    match = re.search(r'<textarea name="text"[^>]*>(.*?)</textarea>', body, re.S)
    assert match, "the clone page has no text editor"
    return html.unescape(match.group(1))


def test_every_form_of_the_clone_page_posts_to_the_submit_page(web, alice):
    lifecycle.submit(alice, SECRET)
    body = web.get("/jobs/alice~hello/clone/").content.decode()
    for form in ("text-form", "upload-form", "builder-form"):
        assert re.search(rf'<form method="post" action="/jobs/submit/"[^>]*id="{form}"', body)


def test_a_clone_with_its_secret_entered_again_is_submitted(web, alice):
    lifecycle.submit(alice, SECRET)
    text = cloned_text(web.get("/jobs/alice~hello/clone/").content.decode())
    text = text.replace("'******'", "again-s3cr3t").replace("******", "again-s3cr3t")
    response = web.post("/jobs/submit/", {"mode": "text", "text": text, "virtual_cluster": ""})
    assert response.status_code == 302, response.content.decode()
    assert response["Location"] == "/jobs/alice~hello_clone/"
    clone = Job.objects.get(name="hello_clone")
    assert clone.protocol["secrets"] == {"token": "again-s3cr3t"}


def test_a_secret_left_masked_is_refused_with_its_name(web, alice):
    lifecycle.submit(alice, SECRET)
    text = cloned_text(web.get("/jobs/alice~hello/clone/").content.decode())
    response = web.post("/jobs/submit/", {"mode": "text", "text": text})
    assert response.status_code == 400
    body = html.unescape(response.content.decode())
    assert "secrets.token: still ******" in body and "enter the secret again" in body
    assert "name: hello_clone" in body  # what was posted stays on the page
    assert not Job.objects.filter(name="hello_clone").exists()


def test_a_masked_registry_password_is_refused_too(alice):
    text = SECRET.replace("uri: python}", "uri: python, auth: {username: me, password: '******'}}")
    with pytest.raises(lifecycle.SubmitError) as refused:
        lifecycle.submit(alice, text)
    assert refused.value.status == 400
    assert refused.value.errors[0].startswith("prerequisites[0].auth.password: still ******")


def test_the_clone_page_fills_the_form_tab(web, alice):
    lifecycle.submit(alice, SECRET)
    body = web.get("/jobs/alice~hello/clone/").content.decode()
    builder = body.split('id="builder-form"', 1)[1].split("</form>", 1)[0]
    assert 'id="f-name" value="hello_clone"' in builder
    assert 'name="role-0-name" value="main"' in builder
    assert "echo &lt;% $secrets.token %&gt;</textarea>" in builder
    assert "token: ******</textarea>" in builder


def test_the_clone_form_with_the_secret_entered_again_is_submitted(web, alice):
    lifecycle.submit(alice, SECRET)
    body = web.get("/jobs/alice~hello/clone/").content.decode()
    builder = body.split('id="builder-form"', 1)[1].split("</form>", 1)[0]
    fields = dict(re.findall(r'<input name="([^"]+)"[^>]*value="([^"]*)"', builder))
    fields.update(re.findall(r'<textarea name="([^"]+)"[^>]*>([^<]*)</textarea>', builder))
    data = {key: html.unescape(value) for key, value in fields.items()}
    assert data["secrets"] == "token: ******"
    data.update(mode="form", virtual_cluster="default", secrets="token: again-s3cr3t")
    response = web.post("/jobs/submit/", data)
    assert response.status_code == 302, response.content.decode()
    clone = Job.objects.get(name="hello_clone")
    assert clone.protocol["secrets"] == {"token": "again-s3cr3t"}
    assert clone.protocol["taskRoles"]["main"]["commands"] == ["echo <% $secrets.token %>"]


def test_a_post_to_the_clone_address_submits_too(web, alice):
    lifecycle.submit(alice, SECRET)
    text = SECRET.replace("name: hello", "name: posted_here")
    response = web.post("/jobs/alice~hello/clone/", {"mode": "text", "text": text})
    assert response.status_code == 302
    assert Job.objects.filter(name="posted_here").exists()


def test_a_clone_the_form_cannot_show_says_why_in_the_form_tab(web, alice):
    text = SECRET.replace(
        "prerequisites: [{name: img, type: dockerimage, uri: python}]",
        "prerequisites: [{name: img, type: dockerimage, uri: python}, {name: fetch, "
        "type: script, plugin: com.microsoft.pai.runtimeplugin.cmd, "
        "callbacks: [{event: containerStart, commands: [echo fetched]}]}]",
    )
    lifecycle.submit(alice, text)
    body = web.get("/jobs/alice~hello/clone/").content.decode()
    pane = body.split('id="pane-form"', 1)[1]
    assert "prerequisites callbacks the form cannot show: fetch (script)" in pane
    assert "name: hello_clone" in html.unescape(cloned_text(body))


COMMENTED = """\
# Trains the model of chapter 3; ask Ann before changing the image.
protocolVersion: 2
name: commented
type: job
prerequisites:
  - {name: image, type: dockerimage, uri: python}   # the lab's image
secrets:
  token: s3cr3t-value  # rotated monthly
taskRoles:
  main:
    instances: 1
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}
    commands:
      - echo <% $secrets.token %>   # prints ******
"""


def test_a_clone_keeps_the_text_as_pasted_with_its_comments(web, alice):
    lifecycle.submit(alice, COMMENTED)
    text = cloned_text(web.get("/jobs/alice~commented/clone/").content.decode())
    assert text.startswith("# Trains the model of chapter 3; ask Ann before changing the image.")
    assert "name: commented_clone\n" in text and "# the lab's image" in text
    assert "  token: '******'  # rotated monthly" in text
    assert "s3cr3t-value" not in text
    submitted = text.replace("'******'", "again-s3cr3t")
    response = web.post("/jobs/submit/", {"mode": "text", "text": submitted})
    assert response.status_code == 302, response.content.decode()
    clone = Job.objects.get(name="commented_clone")
    assert clone.protocol["secrets"] == {"token": "again-s3cr3t"}
    assert clone.submitted_text.startswith("# Trains the model")


@pytest.mark.parametrize(
    "where",
    [
        "# the token s3cr3t-valueX is the old one\n",  # inside a longer word
        "# old token: abc\n",
    ],
)
def test_a_clone_whose_text_would_show_a_secret_is_normalised_instead(web, alice, where):
    text = where + COMMENTED
    if "abc" in where:
        text = text.replace("s3cr3t-value", "abc")
    lifecycle.submit(alice, text)
    cloned = cloned_text(web.get("/jobs/alice~commented/clone/").content.decode())
    assert "s3cr3t-value" not in cloned and "abc" not in cloned
    assert not cloned.startswith("#")  # the normalised YAML
    assert "name: commented_clone" in cloned
