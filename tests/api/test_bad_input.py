"""Every text field of the API and the pages, given what no field may hold (a NUL byte, a lone
surrogate, a 5,000-digit integer, JSON 20,000 levels deep): never a 500, and a 400 names the
field. The API's fields come from its published schema (every operation, path and query
parameter, and body property); the pages' from the forms they render."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, urlencode, urljoin

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

from accounts.models import ApiToken
from jobs.models import Task
from tests.api.helpers import job_with_tasks
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

NUL = "bad\x00value"
SURROGATE = "bad\ud800value"
HUGE = "9" * 5000
DEEP = "[" * 20_000 + "]" * 20_000

ALERT = re.compile(r'role="alert"[^>]*>(.*?)</', re.S)
PATH_VALUES = {
    "username": "alice",
    "name": "hello",
    "attempt": "0",
    "task": "main-0",
    "stream": "stdout",
    "group": "default",
    "token": "no-such-token",
}


def api_schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


SCHEMA = api_schema()
OPERATIONS = [
    (method.upper(), path)
    for path, item in SCHEMA["paths"].items()
    for method in item
    if method in {"get", "post", "put", "patch", "delete"} and not path.endswith("/logout")
]


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = SCHEMA["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def sample(prop: dict[str, Any]) -> Any:
    prop = resolve(prop)
    if "enum" in prop:
        return prop["enum"][0]
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(
        prop.get("type", "string"), "x1"
    )


def form_values(values: dict[str, Any]) -> dict[str, str]:
    """``values`` as a form sends them (booleans as true/false; no lists or objects)."""
    return {
        name: json.dumps(value) if isinstance(value, bool | int) else value
        for name, value in values.items()
        if not isinstance(value, list | dict)
    }


@pytest.fixture
def token(alice, admin) -> str:
    job_with_tasks(alice)
    return ApiToken.objects.issue(admin, 3600)[1]


def failure(response: Any, field: str, what: str) -> str | None:
    """Why ``response`` (to ``field`` given ``what``) is wrong, or None: no 5xx; a 400 names
    the field."""
    if response.status_code >= 500:
        return f"{field} {what}: {response.status_code}"
    if response.status_code == 400:
        text = response.content.decode("utf-8", "replace")
        if response["Content-Type"].startswith("text/html"):
            found = ALERT.search(text)  # the page's error message
            text = found.group(1) if found else ""
        if field.lower() not in text.lower():
            return f"{field} {what}: 400 without the field's name: {text[:200]}"
    return None


def fill(path: str, **bad: str) -> str:
    for name, value in {**PATH_VALUES, **bad}.items():
        path = path.replace("{" + name + "}", quote(value, safe=""))
    return path


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[" ".join(o) for o in OPERATIONS])
def test_no_api_field_gives_a_500_and_a_400_names_the_field(token, method: str, path: str):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    operation = SCHEMA["paths"][path][method.lower()]
    call = getattr(client, method.lower())
    failures: list[str] = []

    def check(response: Any, field: str, what: str) -> None:
        found = failure(response, field, what)
        if found:
            failures.append(found)

    for parameter in operation.get("parameters", []):
        name = parameter["name"]
        if parameter["in"] == "path":
            check(call(fill(path, **{name: NUL})), name, "NUL in the path")
        elif parameter["in"] == "query":
            for what, value in (("NUL", NUL), ("a huge integer", HUGE)):
                url = f"{fill(path)}?{urlencode({name: value})}"
                if "text/yaml" in operation.get("requestBody", {}).get("content", {}):
                    response = call(url, hello_job("other"), content_type="text/yaml")
                else:
                    response = call(url)
                check(response, name, what)
    content = operation.get("requestBody", {}).get("content", {})
    if "application/json" in content:
        body = resolve(content["application/json"]["schema"])
        properties = body.get("properties", {})
        valid = {name: sample(prop) for name, prop in properties.items()}
        url, json_type = fill(path), "application/json"
        for name in properties:
            for what, raw in (
                ("NUL", json.dumps({**valid, name: NUL})),
                ("a lone surrogate", json.dumps({**valid, name: SURROGATE})),
                ("a NUL in a list", json.dumps({**valid, name: [NUL]})),
                ("a huge integer", json.dumps(valid)[:-1] + f', "{name}": {HUGE}}}'),
            ):
                check(call(url, raw, content_type=json_type), name, what)
            form = urlencode({**form_values(valid), name: NUL})
            check(
                call(url, form, content_type="application/x-www-form-urlencoded"),
                name,
                "NUL in a form",
            )
            deep = json.dumps(valid)[:-1] + f', "{name}": {DEEP}}}'
            check(call(url, deep, content_type=json_type), "nested", f"{name} 20,000 deep")
        check(call(url, DEEP, content_type=json_type), "nested", "a body 20,000 deep")
    assert failures == [], "\n".join(failures)


JOB = """{{"protocolVersion": 2, "name": "{name}", "type": "job",
 "prerequisites": [{{"name": "img", "type": "dockerimage", "uri": "python"}}],
 "defaults": {{"virtualCluster": "{vc}"}},
 "taskRoles": {{"{role}": {{"dockerImage": "img", "commands": ["{command}"],
   "resourcePerInstance": {{"cpu": 1, "memoryMB": 128, "gpu": 0, "ports": {{"{port}": 1}}}}}}}}}}
"""
GOOD = {"name": "ok", "vc": "default", "role": "main", "port": "http", "command": "echo hi"}


@pytest.mark.parametrize("field", sorted(GOOD))
@pytest.mark.parametrize("escape", ["\\u0000", "\\ud800"], ids=["NUL", "surrogate"])
def test_a_job_with_a_nul_or_a_lone_surrogate_gets_a_400_at_its_path(token, field, escape):
    job = JOB.format(**{**GOOD, field: f"x{escape}y"})
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.post("/api/v2/jobs", job, content_type="text/yaml")
    assert response.status_code == 400, response.content[:300]
    message = response.json()["message"]
    where = {
        "name": "name:",
        "vc": "defaults.virtualCluster:",
        "role": "taskRoles: the key",
        "port": "ports: the key",
        "command": "commands[0]:",
    }[field]
    assert where in message, message
    assert ("NUL" if escape == "\\u0000" else "lone surrogate") in message


def test_a_yaml_job_with_an_escaped_surrogate_in_its_name_names_the_field(token):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    text = 'protocolVersion: 2\nname: "a\\ud800"\ntype: job\n'
    response = client.post("/api/v2/jobs", text, content_type="text/yaml")
    assert response.status_code == 400
    assert response.json()["message"].startswith("name: contains a lone surrogate")


# The pages: every page a user (here the admin, who sees them all) can open, and every field
# of every form they render, posted to the form's action and to what its buttons post to.


def page_urls(task_id: int) -> list[str]:
    values = {**PATH_VALUES, "task_id": str(task_id)}
    urls: list[str] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and not route.startswith(("api/", "admin/")):
                for name, value in values.items():
                    for kind in ("username", "str", "int"):
                        route = route.replace(f"<{kind}:{name}>", value)
                urls.append("/" + route)

    walk(get_resolver().url_patterns, "")
    return urls


class Forms(HTMLParser):
    """The forms of a page: (method, actions, fields with their values)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.forms: list[tuple[str, set[str], dict[str, str]]] = []
        self.open: tuple[str, set[str], dict[str, str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {key: value or "" for key, value in attrs}
        if tag == "form":
            action = urljoin(self.url, found.get("action") or self.url)
            self.open = (found.get("method", "get").lower(), {action}, {})
            self.forms.append(self.open)
        elif self.open is not None:
            for attribute in ("hx-post", "formaction"):
                if found.get(attribute):
                    self.open[1].add(urljoin(self.url, found[attribute]))
            named = tag in {"input", "textarea", "select"} and found.get("name")
            if named and found.get("type") not in {"file", "submit", "checkbox", "radio"}:
                self.open[2][found["name"]] = found.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.open = None


PAGE_URLS = page_urls(0)


@pytest.mark.parametrize("index", range(len(PAGE_URLS)), ids=PAGE_URLS)
def test_no_page_field_gives_a_500_and_a_400_names_the_field(alice, admin, index: int):
    job = job_with_tasks(alice)
    task = Task.objects.get(attempt__job=job)
    url = page_urls(task.id)[index]
    browser = Client()
    browser.force_login(admin)
    failures: list[str] = []
    page = browser.get(url)
    assert page.status_code < 500, url
    for what, value in (("NUL", NUL), ("a huge integer", HUGE)):
        for name in ("page", "q", "user", "vc", "state", "sort", "keyword", "tail"):
            found = failure(browser.get(f"{url}?{urlencode({name: value})}"), name, what)
            if found:
                failures.append(f"GET {url} {found}")
    forms = Forms(url)
    if page.get("Content-Type", "").startswith("text/html"):
        forms.feed(page.content.decode())
    for method, actions, fields in forms.forms:
        for action in sorted(actions):
            for name in fields:
                for what, value in (("NUL", NUL), ("a huge integer", HUGE)):
                    data = {**fields, name: value}
                    if method == "get":
                        response = browser.get(action, data)
                    else:
                        response = browser.post(action, data)
                    found = failure(response, name, what)
                    if found:
                        failures.append(f"{method.upper()} {action} {found}")
    assert failures == [], "\n".join(failures)


@pytest.mark.parametrize("path", ["/admin/auth/user/", "/admin/jobs/job/", "/admin/"])
def test_django_admin_searches_and_filters_with_a_nul_get_a_400_that_names_them(admin, path):
    browser = Client()
    browser.force_login(admin)
    for name in ("q", "o", "p"):
        response = browser.get(path, {name: NUL})
        assert failure(response, name, "NUL") is None
        assert response.status_code == 400


def test_a_job_file_sent_as_a_form_body_is_read_whole_not_taken_apart(token):
    """``curl -d @job.yaml`` sends the file as a form: it is the job's text, not form fields
    (a ``%00`` in it is no NUL, and its ``&&`` split nothing)."""
    text = hello_job("sent-with-curl-d", command="printf '%005d' 7 && echo a && echo b")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    form_type = "application/x-www-form-urlencoded"
    response = client.post("/api/v2/jobs", text, content_type=form_type)
    assert response.status_code == 202, response.content
