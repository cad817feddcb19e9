"""A researcher in the browser: submit by form and by file, reach a running task (terminal,
SSH key), read a failure, and another user who finds nothing of it."""

from __future__ import annotations

import textwrap

import pytest

from jobs.models import Job, Task
from tests.browser.pages import log_in, submit_text

pytestmark = pytest.mark.browser

SSH = "extras:\n  com.microsoft.pai.runtimeplugin: [{plugin: ssh, parameters: {jobssh: true}}]\n"


def job(name: str, command: str, extra: str = "") -> str:
    return (
        textwrap.dedent(f"""\
        protocolVersion: 2
        name: {name}
        type: job
        prerequisites: [{{name: img, type: dockerimage, uri: python}}]
        taskRoles:
          trainer:
            instances: 1
            dockerImage: img
            resourcePerInstance: {{cpu: 1, memoryMB: 128, gpu: 0, ports: {{http: 1, ssh: 1}}}}
            commands: ["{command}"]
        """)
        + extra
    )


def test_a_job_built_with_the_form_runs_to_success_live(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.click("#tab-form")
    page.fill("#f-name", "from_form")
    page.fill("input[name=role-0-name]", "learner")
    page.fill("textarea[name=role-0-commands]", "sleep 3\necho role=$PAI_CURRENT_TASK_ROLE_NAME")
    page.fill("input[name=role-0-min_succeeded]", "1")  # the learner's success ends the job
    page.click("#add-role")
    page.locator("#roles .role").nth(1).locator("input[name$=-name]").fill("helper")
    page.locator("#roles .role").nth(1).locator("textarea").fill("echo helping\nsleep 60")
    page.click("#submit-form")
    page.wait_for_url(f"{portal_url}/jobs/alice~from_form/")
    page.evaluate("window.stillTheSamePage = true")
    page.locator("#live .summary .state", has_text="RUNNING").wait_for()
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    assert page.evaluate("window.stillTheSamePage") is True
    assert "role=learner" in page.locator("#live .logs").inner_text()
    # The learner's success completes the job (its minSucceededInstances, 1); the helper,
    # still sleeping, is stopped: the page shows it, without a reload.
    page.locator("#task-helper-0 .state", has_text="STOPPED").wait_for()
    assert page.evaluate("window.stillTheSamePage") is True


def test_switching_from_form_to_text_keeps_the_job(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.click("#tab-form")
    page.fill("#f-name", "switched")
    page.fill("textarea[name=role-0-commands]", "echo kept")
    page.click("#to-text")
    page.locator("#valid").wait_for()
    assert "name: switched" in page.input_value("#id_text")
    assert "echo kept" in page.input_value("#id_text")
    assert page.locator("#pane-text").is_visible()


def test_switching_from_text_to_form_fills_the_form(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.fill("#id_text", job("pasted", "echo from text", SSH))
    page.click("#to-form")
    page.locator("#pane-form #f-name").wait_for()
    assert page.locator("#pane-form").is_visible() and not page.locator("#pane-text").is_visible()
    assert page.input_value("#f-name") == "pasted"
    assert page.input_value("#f-image") == "python"
    assert page.input_value("input[name=role-0-name]") == "trainer"
    assert page.input_value("input[name=role-0-ports]") == "http:1 ssh:1"
    assert page.input_value("textarea[name=role-0-commands]") == "echo from text"
    assert page.is_checked("input[name=ssh]")
    page.click("#add-role")  # the filled form is a working form
    assert page.locator("#roles .role").count() == 2
    page.locator("#roles .role").nth(1).locator(".remove-role").click()
    page.click("#submit-form")
    page.wait_for_url(f"{portal_url}/jobs/alice~pasted/")


def test_text_the_form_cannot_show_stays_in_text(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    text = job("called", "echo hi").replace(
        "prerequisites: [{name: img, type: dockerimage, uri: python}]",
        "prerequisites: [{name: img, type: dockerimage, uri: python}, {name: fetch, "
        "type: script, plugin: com.microsoft.pai.runtimeplugin.cmd, "
        "callbacks: [{event: containerStart, commands: [echo fetched]}]}]",
    )
    page.fill("#id_text", text)
    page.click("#to-form")
    refused = page.locator("#to-form-refused")
    refused.wait_for()
    assert "prerequisites callbacks the form cannot show: fetch (script)" in refused.inner_text()
    assert page.locator("#pane-text").is_visible() and page.input_value("#id_text") == text
    page.fill("#id_text", job("typo", "echo hi").replace("cpu: 1", "cpu: lots"))
    page.click("#to-form")
    page.locator("#to-form-refused", has_text="line 9").wait_for()
    assert "resourcePerInstance.cpu" in page.locator("#to-form-refused").inner_text()
    assert page.locator("#pane-text").is_visible()


def test_the_editor_shows_errors_at_their_line_as_you_type(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.fill("#id_text", job("typed", "echo hi").replace("cpu: 1", "cpu: lots"))
    issues = page.locator("#issues")
    issues.wait_for()
    assert "line 9" in issues.inner_text()
    assert "taskRoles.trainer.resourcePerInstance.cpu" in issues.inner_text()


def test_an_uploaded_file_runs_to_success_live(portal_url, browser_page, alice, tmp_path):
    page = browser_page
    path = tmp_path / "upload.yaml"
    path.write_text(job("uploaded", "sleep 3 && echo from a file"))
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.click("#tab-file")
    page.set_input_files("#id_file", str(path))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url(f"{portal_url}/jobs/alice~uploaded/")
    page.evaluate("window.stillTheSamePage = true")
    page.locator("#live .summary .state", has_text="RUNNING").wait_for()
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    assert page.evaluate("window.stillTheSamePage") is True
    assert "from a file" in page.locator("#live .logs").inner_text()


def test_a_terminal_into_a_running_task_has_its_environment(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("shell", "sleep 120"))
    page.locator("#task-trainer-0 .terminal-link").click()
    page.locator("#terminal-status", has_text="connected").wait_for()
    page.locator("#terminal").click()
    page.keyboard.type("echo role=$PAI_CURRENT_TASK_ROLE_NAME\n")
    page.wait_for_function(
        """() => { const b = window.portalTerminal.buffer.active; let text = "";
        for (let i = 0; i < b.length; i++) text += b.getLine(i).translateToString(true) + "\\n";
        return text.includes("role=trainer"); }"""
    )


def test_a_terminal_into_an_ended_task_says_it_is_not_available(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("ended", "echo done"))
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    task = Task.objects.get(attempt__job__name="ended")
    page.goto(f"{portal_url}/jobs/alice~ended/tasks/{task.id}/terminal/")
    page.locator("#terminal-status", has_text="not available").wait_for()


def test_the_owner_downloads_the_ssh_key_from_the_ssh_panel(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("keyed", "sleep 120", SSH))
    page.locator("#ssh .ssh-command").first.wait_for()
    assert "ssh -i keyed.id_ed25519 -p " in page.locator("#ssh").inner_text()
    with page.expect_download() as info:
        page.click("#ssh-key-download")
    download = info.value
    assert download.suggested_filename == "keyed.id_ed25519"
    assert "OPENSSH PRIVATE KEY" in download.path().read_text()


def test_a_failed_job_shows_its_reason(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("broken", "exit 2"))
    page.locator("#live .summary .state", has_text="FAILED").wait_for()
    reason = page.locator("#reason").inner_text()
    assert "task role 'trainer'" in reason and "exited with code 2" in reason
    assert page.locator("#task-trainer-0 .exit-phrase").inner_text() == "Failed with exit code 2"


def test_another_user_finds_only_the_status_of_my_job(portal_url, browser_page, alice, bob):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("private", "sleep 120", SSH))
    page.locator("#ssh .ssh-command").first.wait_for()
    terminal = page.locator("#task-trainer-0 .terminal-link").get_attribute("href")
    task_id = terminal.rstrip("/").split("/")[-2]
    job_id = Job.objects.get(name="private").id
    # Leave the live page first: a poll of it after the cookies are gone is sent to the login
    # page, whose new CSRF cookie would then not match the form bob is about to fill in.
    page.goto("about:blank")
    page.context.clear_cookies()
    log_in(page, portal_url, "bob", "bob-secret-pw")
    base = f"{portal_url}/jobs/alice~private"
    # The status, as OpenPAI and squeue show it to anyone; no address, port, log or terminal.
    assert page.goto(base + "/").status == 200
    assert page.locator("#summary-only").count() == 1
    assert page.locator(".terminal-link, #ssh, .ssh-command").count() == 0
    for path in ("/logs/0/trainer-0/stdout/", "/logs/0/trainer-0/stdout/view/", "/ssh-key/"):
        assert page.goto(base + path).status == 404, path
    assert page.goto(portal_url + terminal).status == 404
    api = f"{portal_url}/api/v2/jobs/alice~private"
    detail = page.request.get(api)
    assert detail.status == 200
    (task,) = detail.json()["taskRoles"]["trainer"]["taskStatuses"]
    assert (task["containerIp"], task["containerPorts"], task["containerLog"]) == (None, {}, "")
    for path in ("/ssh", "/attempts/0/tasks/trainer-0/logs/stdout"):
        assert page.request.get(api + path).status == 404, path
    close_code = """(path) => new Promise((done) => {
            const socket = new WebSocket("ws://" + location.host + path);
            socket.onclose = (event) => done(event.code);
        })"""
    assert page.evaluate(close_code, f"/ws/jobs/{job_id}/") == 4404
    assert page.evaluate(close_code, f"/ws/tasks/{task_id}/terminal/") == 4404
    assert page.evaluate("document.body.innerText").strip()


def test_the_live_check_lists_every_resource_the_cluster_lacks(portal_url, browser_page, alice):
    """It said "✓ Valid" for a job submit refused for its size, and named only the first
    resource short (issue 28)."""
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    huge = job("huge", "echo hi").replace(
        "cpu: 1, memoryMB: 128, gpu: 0", "cpu: 4096, memoryMB: 1000000000, gpu: 64"
    )
    page.fill("#id_text", huge)
    issues = page.locator("#validation #issues")
    issues.wait_for()
    text = issues.inner_text()
    for what in ("4096 CPU", "1000000000 MB memory", "64 GPU"):
        assert f"the job needs {what} in total but the cluster has" in text
    assert page.locator("#valid").count() == 0
    page.click("#text-form button[type=submit]")
    refused = page.locator("body").inner_text()
    assert "the job needs 4096 CPU in total" in refused and "64 GPU" in refused
    assert not Job.objects.filter(name="huge").exists()
