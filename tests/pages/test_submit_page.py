"""The submit page: live validation, upload, the form, clone and export."""

from __future__ import annotations

import html
import re

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs import lifecycle
from jobs.models import Job
from tests.jobs.samples import hello_job

pytestmark = pytest.mark.django_db

SECRET = hello_job(command="echo <% $secrets.token %>", secrets="{token: s3cr3t-value}")


def form_data(**extra: str) -> dict[str, str]:
    data = {
        "mode": "form", "name": "built", "virtual_cluster": "default", "image": "python:3.11",
        "role-0-name": "trainer", "role-0-instances": "2", "role-0-cpu": "1",
        "role-0-memory": "256", "role-0-gpu": "0", "role-0-shm": "64",
        "role-0-ports": "http:1 ssh:1", "role-0-commands": "echo one\necho two",
        "role-0-min_failed": "1", "role-0-task_retry": "1",
        "parameters": "lr: 0.1", "secrets": "token: abc", "pre_commands": "echo pre",
    }  # fmt: skip
    data.update(extra)
    return data


def test_the_submit_page_offers_three_ways(web):
    body = web.get("/jobs/submit/").content.decode()
    assert 'id="text-form"' in body and 'id="upload-form"' in body and 'id="builder-form"' in body
    assert "free:" in body  # the virtual cluster's free quota


def test_validation_names_the_path_and_line_of_an_error(web):
    text = hello_job().replace("cpu: 1", "cpu: lots")
    body = web.post("/jobs/submit/validate/", {"text": text}).content.decode()
    assert "taskRoles.main.resourcePerInstance.cpu" in body
    assert "line 9" in body


def test_validation_gives_the_line_of_a_syntax_error(web):
    body = web.post("/jobs/submit/validate/", {"text": "name: [unclosed\n"}).content.decode()
    assert "line" in body


def test_validation_says_a_good_job_is_valid(web):
    body = web.post("/jobs/submit/validate/", {"text": hello_job()}).content.decode()
    assert "Valid" in body and "hello" in body


def test_the_live_check_names_every_resource_submit_refuses_and_agrees_with_submit(web, alice):
    """It said "Valid" for a job that submit then refused for its size, and submit named only
    the first resource short (memory, not the GPU missing too) (issue 28)."""
    from tests.clusters.helpers import cluster, job_text

    cluster(cpu=2, memory_mb=4096, gpus={})
    text = job_text("huge", cpu=4, gpu=1, memory_mb=8192)
    body = html.unescape(web.post("/jobs/submit/validate/", {"text": text}).content.decode())
    assert "Valid" not in body
    expected = [
        "the job needs 4 CPU in total but the cluster has 2: 2 more than the job could ever get",
        "the job needs 8192 MB memory in total but the cluster has 4096",
        "the job needs 1 GPU in total but the cluster has 0",
    ]
    for part in expected:
        assert part in body
    with pytest.raises(lifecycle.SubmitError) as refused:
        lifecycle.submit(alice, text)
    assert all(part in str(refused.value) for part in expected)


def test_the_live_check_reads_the_virtual_cluster_chosen_beside_the_text(web, bob):
    from tests.clusters.helpers import job_text, vc

    vc("private", bob)
    text = job_text("where")
    assert "Valid" in web.post("/jobs/submit/validate/", {"text": text}).content.decode()
    body = web.post("/jobs/submit/validate/", {"text": text, "virtual_cluster": "private"})
    assert "alice is not a member of it" in body.content.decode()


def test_validation_is_for_logged_in_posts_only(db):
    assert Client().post("/jobs/submit/validate/", {"text": "x"}).status_code == 302


def test_an_uploaded_yaml_file_is_submitted(web):
    upload = SimpleUploadedFile("job.yaml", hello_job(name="uploaded").encode())
    response = web.post("/jobs/submit/", {"mode": "file", "file": upload})
    assert response.status_code == 302
    assert response["Location"] == "/jobs/alice~uploaded/"


def test_an_uploaded_file_of_another_kind_is_refused(web):
    upload = SimpleUploadedFile("job.txt", hello_job().encode())
    response = web.post("/jobs/submit/", {"mode": "file", "file": upload})
    assert response.status_code == 400
    assert b".json, .yaml or .yml" in response.content


def test_a_too_large_upload_says_the_limit(web, settings):
    settings.JOB_MAX_BYTES = 100
    upload = SimpleUploadedFile("job.yml", hello_job().encode())
    response = web.post("/jobs/submit/", {"mode": "file", "file": upload})
    assert response.status_code == 400
    assert b"at most 100 bytes" in response.content


def test_the_form_builds_and_submits_a_v2_job(web):
    response = web.post("/jobs/submit/", form_data())
    assert response.status_code == 302, response.content.decode()
    job = Job.objects.get(name="built")
    role = job.protocol["taskRoles"]["trainer"]
    assert role["instances"] == 2
    assert role["resourcePerInstance"]["ports"] == {"http": 1, "ssh": 1}
    assert role["commands"] == ["echo one", "echo two"]
    assert role["taskRetryCount"] == 1
    assert job.protocol["parameters"] == {"lr": "0.1"}
    assert job.protocol["deployments"][0]["taskRoles"]["trainer"]["preCommands"] == ["echo pre"]


def test_the_form_takes_several_roles_with_a_gpu_type(web):
    data = form_data(**{"role-7-name": "ps", "role-7-instances": "1", "role-7-gputype": "V100"})
    body = web.post("/jobs/submit/form-to-text/", data).content.decode()
    job = yaml.safe_load(html.unescape(body.split(">", 2)[2].split("</textarea>")[0]))
    assert list(job["taskRoles"]) == ["trainer", "ps"]
    assert job["extras"]["hivedscheduler"]["taskRoles"]["ps"]["gpuType"] == "V100"


def test_a_wrong_form_keeps_what_was_entered(web):
    response = web.post("/jobs/submit/", form_data(**{"role-0-cpu": "-3"}))
    assert response.status_code == 400
    body = response.content.decode()
    assert "taskRoles.trainer.resourcePerInstance.cpu" in body
    assert 'value="trainer"' in body and 'value="-3"' in body


def test_switching_from_form_to_text_keeps_the_job(web):
    body = web.post("/jobs/submit/form-to-text/", form_data()).content.decode()
    assert "trainer:" in body and "echo two" in body and "Valid" in body


def test_cloning_proposes_a_new_name_and_masks_secrets(web, alice):
    lifecycle.submit(alice, SECRET)
    body = web.get("/jobs/alice~hello/clone/").content.decode()
    assert "hello_clone" in body
    assert "s3cr3t-value" not in body
    assert "token: &#x27;******&#x27;" in body or "token: ******" in body
    assert "enter them again" in body and "<code>secrets.token</code>" in body


def test_a_second_clone_gets_another_name(web, alice):
    lifecycle.submit(alice, SECRET)
    lifecycle.submit(alice, SECRET.replace("name: hello", "name: hello_clone"))
    assert "hello_clone2" in web.get("/jobs/alice~hello/clone/").content.decode()


def test_nobody_clones_or_exports_another_users_job(alice, bob):
    lifecycle.submit(alice, SECRET)
    client = Client()
    client.force_login(bob)
    assert client.get("/jobs/alice~hello/clone/").status_code == 404
    assert client.get("/jobs/alice~hello/config.yaml").status_code == 404


def test_export_downloads_the_config_with_secrets_masked(web, alice):
    lifecycle.submit(alice, SECRET)
    response = web.get("/jobs/alice~hello/config.yaml")
    assert "attachment" in response["Content-Disposition"]
    exported = yaml.safe_load(response.content)
    assert exported["secrets"] == {"token": "******"}
    assert exported["name"] == "hello"


def test_the_form_says_what_a_vc_without_a_quota_may_use_of_the_cluster(alice):
    from jobs.forms.quota import vc_choices
    from tests.clusters.helpers import cluster, vc

    cluster(cpu=8, memory_mb=64_000, gpus={"V100": 4})
    vc("research", alice, cpu=4, memory_mb=8_000, gpus={"V100": 2})
    choices = {choice.name: choice.free for choice in vc_choices(alice)}
    assert choices["research"] == "4 CPU, 8000 MB, 2 GPU"
    assert choices["default"] == (
        "CPU: no quota (cluster: 8), MB: no quota (cluster: 64000), GPU: no quota (cluster: 4)"
    )


def test_a_blank_min_succeeded_lets_every_role_run_to_the_end(web):
    data = form_data(**{"role-0-min_succeeded": "", "role-0-min_failed": ""})
    body = web.post("/jobs/submit/form-to-text/", data).content.decode()
    job = yaml.safe_load(html.unescape(body.split(">", 2)[2].split("</textarea>")[0]))
    completion = job["taskRoles"]["trainer"]["completion"]
    assert completion == {"minFailedInstances": 1, "minSucceededInstances": -1}


def test_the_form_says_what_min_failed_and_min_succeeded_do(web):
    body = web.get("/jobs/submit/").content.decode()
    assert 'name="role-0-min_succeeded" type="number" min="-1" value="-1"' in body
    assert "-1: the job goes on until every task has ended" in body
    assert "-1: this role's failures never end the job" in body


def test_the_submit_page_offers_only_the_virtual_clusters_one_may_use(alice, bob, admin):
    from tests.clusters.helpers import vc

    vc("research", alice)
    bobs = Client()
    bobs.force_login(bob)
    body = bobs.get("/jobs/submit/").content.decode()
    text_choices = re.findall(
        r'<option value="([^"]+)"', body.split('id="id_virtual_cluster"')[1].split("</select>")[0]
    )
    form_choices = re.findall(
        r'<option value="([^"]+)"', body.split('id="f-vc"')[1].split("</select>")[0]
    )
    assert text_choices == form_choices == ["default"]
    alices = Client()
    alices.force_login(alice)
    body = alices.get("/jobs/submit/").content.decode()
    assert 'value="research"' in body.split('id="id_virtual_cluster"')[1].split("</select>")[0]


def test_a_virtual_cluster_one_may_not_use_is_refused_by_the_text_form(bob):
    from tests.clusters.helpers import vc

    vc("research")
    bobs = Client()
    bobs.force_login(bob)
    data = {"mode": "text", "text": hello_job(), "virtual_cluster": "research"}
    response = bobs.post("/jobs/submit/", data)
    assert response.status_code == 400
    assert "virtual_cluster: Select a valid choice" in html.unescape(response.content.decode())
    assert not Job.objects.exists()


def test_the_form_starts_on_the_users_default_virtual_cluster_and_says_where_jobs_go(web, alice):
    """The form builder ignored the user's default VC (text and files used it), and the text
    tab's "(as the job says, else default)" read as the VC named default (issue 27)."""
    from clusters.models import DefaultVirtualCluster
    from tests.clusters.helpers import vc

    research = vc("research", alice)
    vc("another", alice)
    DefaultVirtualCluster.objects.create(user=alice, virtual_cluster=research)
    body = web.get("/jobs/submit/").content.decode()
    builder = body[body.index('id="f-vc"') : body.index("</select>", body.index('id="f-vc"'))]
    assert re.search(r'<option value="research" selected>', builder)
    assert "(as the job says, else your default: research)" in body
    DefaultVirtualCluster.objects.filter(user=alice).delete()
    body = web.get("/jobs/submit/").content.decode()
    builder = body[body.index('id="f-vc"') : body.index("</select>", body.index('id="f-vc"'))]
    assert re.search(r'<option value="default" selected>', builder)
    assert "(as the job says, else your default: default)" in body
