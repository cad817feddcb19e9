"""A researcher in the browser: submit by form and by file, reach a running task (terminal,
SSH key), read a failure, and another user who finds nothing of it."""

from __future__ import annotations

import re
import textwrap

import pytest

from tests.browser.test_submit_and_watch import log_in

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


def submit_text(page, base: str, text: str) -> None:
    page.goto(f"{base}/jobs/submit/")
    page.fill("#id_text", text)
    page.click("#text-form button[type=submit]")


def test_a_job_built_with_the_form_runs_to_success_live(portal_url, browser_page, alice):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.click("#tab-form")
    page.fill("#f-name", "from_form")
    page.fill("input[name=role-0-name]", "learner")
    page.fill("textarea[name=role-0-commands]", "echo role=$PAI_CURRENT_TASK_ROLE_NAME")
    page.click("#add-role")
    page.locator("#roles .role").nth(1).locator("input[name$=-name]").fill("helper")
    page.locator("#roles .role").nth(1).locator("textarea").fill("echo helping")
    page.click("#submit-form")
    page.wait_for_url(f"{portal_url}/jobs/alice~from_form/")
    page.evaluate("window.stillTheSamePage = true")
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
    assert page.evaluate("window.stillTheSamePage") is True
    assert "role=learner" in page.locator("#live .logs").inner_text()
    # The learner's success completes the job (OpenPAI's minSucceededInstances); the helper
    # either succeeded by then or is stopped: the page shows whichever, without a reload.
    helper = page.locator("#task-helper-0 .state", has_text=re.compile("^(SUCCEEDED|STOPPED)$"))
    helper.wait_for()


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
    path.write_text(job("uploaded", "echo from a file"))
    log_in(page, portal_url, "alice", "alice-secret-pw")
    page.goto(f"{portal_url}/jobs/submit/")
    page.click("#tab-file")
    page.set_input_files("#id_file", str(path))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url(f"{portal_url}/jobs/alice~uploaded/")
    page.locator("#live .summary .state", has_text="SUCCEEDED").wait_for()
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
    submit_text(page, portal_url, job("broken", "exit 3"))
    page.locator("#live .summary .state", has_text="FAILED").wait_for()
    assert page.locator("#reason").inner_text().strip()
    assert "3" in page.locator("#task-trainer-0 .exit").inner_text()


def test_another_user_finds_nothing_of_my_job(portal_url, browser_page, alice, bob):
    page = browser_page
    log_in(page, portal_url, "alice", "alice-secret-pw")
    submit_text(page, portal_url, job("private", "sleep 120", SSH))
    page.locator("#ssh .ssh-command").first.wait_for()
    terminal = page.locator("#task-trainer-0 .terminal-link").get_attribute("href")
    task_id = terminal.rstrip("/").split("/")[-2]
    page.context.clear_cookies()
    log_in(page, portal_url, "bob", "bob-secret-pw")
    base = f"{portal_url}/jobs/alice~private"
    for path in ("/", "/logs/0/trainer-0/stdout/", "/logs/0/trainer-0/stdout/view/", "/ssh-key/"):
        assert page.goto(base + path).status == 404, path
    assert page.goto(portal_url + terminal).status == 404
    assert page.request.get(f"{portal_url}/api/v2/jobs/alice~private").status == 404
    code = page.evaluate(
        """(path) => new Promise((done) => {
            const socket = new WebSocket("ws://" + location.host + path);
            socket.onopen = () => {};
            socket.onclose = (event) => done(event.code);
        })""",
        f"/ws/tasks/{task_id}/terminal/",
    )
    assert code != 1000
    assert page.evaluate("document.body.innerText").strip()
