from django.urls import path

from jobs.views import bulk, clone, detail, listing, logs, sshkey, submit, terminal, validate

app_name = "jobs"
JOB = "<username:username>~<str:name>/"
LOG = JOB + "logs/<int:attempt>/<str:task>/<str:stream>/"

urlpatterns = [
    path("", listing.job_list, name="list"),
    path("stop/", bulk.stop_jobs, name="stop-many"),
    path("submit/", submit.submit_job, name="submit"),
    path("submit/validate/", validate.validate, name="validate"),
    path("submit/form-to-text/", validate.form_to_text, name="form-to-text"),
    path("submit/text-to-form/", validate.text_to_form, name="text-to-form"),
    path(JOB, detail.job_detail, name="detail"),
    path(JOB + "live/", detail.job_live, name="live"),
    path(JOB + "stop/", detail.stop_job, name="stop"),
    path(JOB + "clone/", clone.clone_job, name="clone"),
    path(JOB + "config.yaml", clone.export_config, name="export"),
    path(JOB + "tasks/<int:task_id>/terminal/", terminal.task_terminal, name="terminal"),
    path(JOB + "ssh-key/", sshkey.download_ssh_key, name="ssh-key"),
    path(LOG, logs.download_log, name="log"),
    path(LOG + "view/", logs.view_log, name="log-view"),
    path(LOG + "tail/", logs.tail_log, name="log-tail"),
    path(LOG + "search/", logs.search_log, name="log-search"),
]
