from django.urls import path

from jobs.views import detail, listing, logs, sshkey, submit, terminal

app_name = "jobs"

urlpatterns = [
    path("", listing.job_list, name="list"),
    path("submit/", submit.submit_job, name="submit"),
    path("<username:username>~<str:name>/", detail.job_detail, name="detail"),
    path("<username:username>~<str:name>/live/", detail.job_live, name="live"),
    path("<username:username>~<str:name>/stop/", detail.stop_job, name="stop"),
    path(
        "<username:username>~<str:name>/tasks/<int:task_id>/terminal/",
        terminal.task_terminal,
        name="terminal",
    ),
    path("<username:username>~<str:name>/ssh-key/", sshkey.download_ssh_key, name="ssh-key"),
    path(
        "<username:username>~<str:name>/logs/<int:attempt>/<str:task>/<str:stream>/",
        logs.download_log,
        name="log",
    ),
]
