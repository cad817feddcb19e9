"""What a person does on the portal's pages, shared by the browser tests."""

from __future__ import annotations


def log_in(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/jobs/")


def submit_text(page, base: str, text: str) -> None:
    page.goto(f"{base}/jobs/submit/")
    page.fill("#id_text", text)
    page.click("#text-form button[type=submit]")


def assert_tasks_succeeded(page, tasks: tuple[str, ...]) -> None:
    """Each of ``tasks`` (``role-index``) shows SUCCEEDED with exit code 0 on the job page."""
    for task in tasks:
        assert page.locator(f"#task-{task} .state").inner_text() == "SUCCEEDED"
        assert page.locator(f"#task-{task} .exit").inner_text().startswith("0")
