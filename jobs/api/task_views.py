"""A job's SSH details, tags and task logs, in OpenPAI's paths; owner and admins only."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import Http404, HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apikit.openapi import ERRORS, MessageSerializer
from clusters.registry import get_backend
from jobs.access import job_for, job_view_for
from jobs.api.openpai import api_base_url, container_log, task_detail
from jobs.api.serializers import TaskDetailSerializer, TaskLogListSerializer
from jobs.models import Job, JobAttempt, Task
from jobs.sshinfo import ssh_info, sshd_states
from jobs.tasklogs import MAX_TAIL_BYTES, LogResponse, read_task_log, task_log_chunks

STREAMS = ("stdout", "stderr")
# The names OpenPAI's runtime gives the same logs; openpaisdk appends them to a v1
# ``containerLog`` (job.py ``JobStatusParser.single_task_logs``: ``user.pai.stdout/?start=0``).
STREAM_FILES = {f"user.pai.{stream}": stream for stream in STREAMS}
# What a ``tail-mode=true`` log list's links read: OpenPAI's web portal shows the last 16 KB.
TAIL_MODE_BYTES = 16 * 1024
MAX_TAGS = 64


class TaskSshSerializer(serializers.Serializer[dict[str, object]]):
    taskRole = serializers.CharField()
    taskIndex = serializers.IntegerField()
    taskState = serializers.CharField()
    containerIp = serializers.CharField(allow_null=True)
    containerSshPort = serializers.IntegerField(allow_null=True)
    sshCommand = serializers.CharField(
        allow_null=True, help_text="null unless the task runs and its sshd listens"
    )
    sshd = serializers.ChoiceField(
        ["listening", "starting", "not started", "not running"],
        help_text="what the task's bootstrap said of its sshd; not running: the task is not",
    )
    sshdNote = serializers.CharField(help_text="why nobody can ssh in (empty when one can)")


class SshContainerSerializer(serializers.Serializer[dict[str, object]]):
    id = serializers.CharField(help_text="the task, <role>-<index>")
    sshIp = serializers.CharField(allow_null=True)
    sshPort = serializers.CharField(allow_null=True)


class KeyPairSerializer(serializers.Serializer[dict[str, object]]):
    folderPath = serializers.CharField()
    publicKeyFileName = serializers.CharField()
    privateKeyFileName = serializers.CharField()
    privateKeyDirectDownloadLink = serializers.CharField(
        allow_null=True, help_text="the private key's download, for the job's owner only"
    )
    publicKey = serializers.CharField(allow_null=True)


class SshInfoSerializer(serializers.Serializer[dict[str, object]]):
    containers = SshContainerSerializer(many=True)
    keyPair = KeyPairSerializer()
    keyPairName = serializers.CharField()
    keyFingerprint = serializers.CharField(allow_null=True)
    publicKey = serializers.CharField(allow_null=True)
    tasks = TaskSshSerializer(many=True)
    howToGetSshd = serializers.CharField()


class JobSshView(APIView):
    """Each task of the latest attempt: IP, SSH port, the ``ssh`` command, and the fingerprint
    of the job's key (download the key itself from the job's page)."""

    @extend_schema(responses={200: SshInfoSerializer, **ERRORS})
    def get(self, request: Request, username: str, name: str) -> Response:
        job = job_for(request.user, username, name)
        attempt = JobAttempt.objects.filter(job=job).order_by("-number").first()
        tasks = list(attempt.tasks.all()) if attempt else []
        info = ssh_info(job, tasks, sshd_states(job, tasks, get_backend()))
        return Response({**openpai_ssh(request, job, info), **info})


def openpai_ssh(request: Request, job: Job, info: dict[str, Any]) -> dict[str, Any]:
    """OpenPAI's ``containers`` and ``keyPair``: the private key itself is never in the
    answer; its owner gets the link that downloads it (jobs.views.sshkey, owner only)."""
    owner = job.owner_id == request.user.pk and bool(job.ssh_private_key)
    link = reverse("jobs:ssh-key", kwargs={"username": job.owner.username, "name": job.name})
    return {
        "containers": [
            {
                "id": f"{t['taskRole']}-{t['taskIndex']}",
                "sshIp": t["containerIp"],
                "sshPort": None if t["containerSshPort"] is None else str(t["containerSshPort"]),
            }
            for t in info["tasks"]
        ],
        "keyPair": {
            "folderPath": link.rstrip("/"),
            "publicKeyFileName": f"{info['keyPairName']}.pub",
            "privateKeyFileName": info["keyPairName"],
            "privateKeyDirectDownloadLink": request.build_absolute_uri(link) if owner else None,
            "publicKey": info["publicKey"],
        },
    }


class TagSerializer(serializers.Serializer[dict[str, str]]):
    value = serializers.RegexField(r"^[\w.:-]+$", max_length=64, help_text="the tag")


def tag_body(job: Job, message: str) -> dict[str, object]:
    return {"message": message, "tags": list(job.tags)}


def locked_tags(job: Job) -> list[str]:
    """The job's tags as stored now, its row locked until the transaction ends: two requests
    that tag the same job at once change them one after the other, and neither is lost."""
    row = Job.objects.select_for_update().only("tags").get(pk=job.pk)
    job.tags = list(row.tags)
    return job.tags


def save_tags(job: Job, tags: list[str]) -> None:
    job.tags = tags
    job.save(update_fields=["tags", "updated_at"])


def taggable_job(request: Request, username: str, name: str) -> Job:
    """The job to tag: its owner's and admins'; OpenPAI answers 403 to another user who sees
    it (one who does not gets 404, jobs.access)."""
    seen = job_view_for(request.user, username, name)
    if not seen.full:
        who = request.user.get_username()
        raise PermissionDenied(f"{who} may not change the tags of job {username}~{name}")
    return job_for(request.user, username, name)


def job_and_tag(request: Request, username: str, name: str) -> tuple[Job, str]:
    """The job to tag (``taggable_job``) and the tag in the body (``{"value": "<tag>"}``)."""
    job = taggable_job(request, username, name)
    form = TagSerializer(data=request.data)
    form.is_valid(raise_exception=True)
    return job, form.validated_data["value"]


class JobTagView(APIView):
    """``PUT`` adds a tag to the job, ``DELETE`` removes one (body ``{"value": "<tag>"}``)."""

    @extend_schema(request=TagSerializer, responses={200: MessageSerializer, **ERRORS})
    def put(self, request: Request, username: str, name: str) -> Response:
        job, tag = job_and_tag(request, username, name)
        with transaction.atomic():
            tags = locked_tags(job)
            if tag not in tags:
                if len(tags) >= MAX_TAGS:
                    return Response(
                        {"code": "BadRequestError", "message": f"value: at most {MAX_TAGS} tags"},
                        status=400,
                    )
                save_tags(job, [*tags, tag])
        return Response(tag_body(job, f"tag {tag} added to job {job.name}"))

    @extend_schema(request=TagSerializer, responses={200: MessageSerializer, **ERRORS})
    def delete(self, request: Request, username: str, name: str) -> Response:
        job, tag = job_and_tag(request, username, name)
        with transaction.atomic():
            tags = locked_tags(job)
            if tag not in tags:
                return Response(
                    {"code": "NoTagError", "message": f"value: job {job.name} has no tag {tag}"},
                    status=404,
                )
            save_tags(job, [t for t in tags if t != tag])
        return Response(tag_body(job, f"tag {tag} removed from job {job.name}"))


def tail_param(request: Request) -> int | None:
    raw = request.query_params.get("tail")
    if raw in (None, ""):
        return None
    if not raw.isdigit() or len(raw) > 10 or int(raw) > MAX_TAIL_BYTES:
        shown = raw if len(raw) <= 20 else f"{raw[:20]}... ({len(raw)} characters)"
        raise serializers.ValidationError(
            {
                "tail": f"a number of bytes from 0 to {MAX_TAIL_BYTES}, got {shown!r} "
                "(without tail the whole log comes, streamed)"
            }
        )
    return int(raw)


def start_param(request: Request) -> int | None:
    """OpenPAI's log manager's ``start``: a negative number reads the last that many bytes,
    0 (openpaisdk's) the whole log; the tail bytes, or None for the whole log."""
    raw = request.query_params.get("start")
    if raw in (None, "", "0"):
        return None
    if not raw.startswith("-") or not raw[1:].isdigit() or len(raw) > 11:
        shown = raw if len(raw) <= 20 else f"{raw[:20]}... ({len(raw)} characters)"
        raise serializers.ValidationError(
            {"start": f"0 (the whole log) or minus the bytes to read from its end, got {shown!r}"}
        )
    return min(int(raw[1:]), MAX_TAIL_BYTES)


class TaskLogView(APIView):
    """A task's stdout or stderr as text; ``tail`` keeps only its last bytes."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "tail", OpenApiTypes.INT, description="only the last N bytes (at most 16 MiB)"
            ),
            OpenApiParameter("stream", OpenApiTypes.STR, OpenApiParameter.PATH, enum=STREAMS),
        ],
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR), **ERRORS},
    )
    def get(
        self, request: Request, username: str, name: str, attempt: int, task: str, stream: str
    ) -> HttpResponse | LogResponse:
        job = job_for(request.user, username, name)
        tail = tail_param(request)
        if tail is None:
            tail = start_param(request)
        stream = STREAM_FILES.get(stream, stream)
        role, _, index = task.rpartition("-")
        if stream not in STREAMS or not index.isdigit() or len(index) > 9:
            raise Http404(f"no log {task}/{stream}")
        row = Task.objects.filter(
            attempt__job=job, attempt__number=attempt, role=role, index=int(index)
        ).first()
        if row is None or not row.backend_ref:
            raise Http404(f"no task {task} in attempt {attempt} of {job.name}")
        if tail is None:  # the whole log, streamed: it may be 1 GiB
            chunks = task_log_chunks(job, row.backend_ref, stream)
            return LogResponse(chunks)
        body = read_task_log(job, row.backend_ref, stream, tail)
        return HttpResponse(body, content_type="text/plain; charset=utf-8")


def task_of(job: Job, attempt: int, role: str, index: int) -> Task:
    """The task ``role``/``index`` of the job's attempt ``attempt``; 404 as OpenPAI's."""
    row = (
        Task.objects.filter(attempt__job=job, attempt__number=attempt, role=role, index=index)
        .select_related("attempt")
        .first()
    )
    if row is None:
        raise NotFound(
            {
                "code": "NoJobError",
                "message": f"task {role}-{index} not found in attempt {attempt} of {job.name}",
            }
        )
    return row


class TaskAttemptsView(APIView):
    """``GET .../attempts/<n>/taskRoles/<role>/taskIndex/<i>/attempts``: one task and its
    attempts, as OpenPAI's web portal reads it (its task's retry history page)."""

    @extend_schema(responses={200: TaskDetailSerializer, **ERRORS})
    def get(
        self, request: Request, username: str, name: str, attempt: int, role: str, index: int
    ) -> Response:
        seen = job_view_for(request.user, username, name)
        row = task_of(seen.job, attempt, role, index)
        base_url = api_base_url(request)
        return Response(task_detail(seen.job, attempt, row, full=seen.full, base_url=base_url))


class TaskAttemptLogsView(APIView):
    """``GET .../taskIndex/<i>/attempts/<task attempt>/logs``: the task attempt's logs as
    OpenPAI's log list, ``{locations: [{name, uri}]}`` (models/v2/job/log.js
    ``getLogListFromLogManager``); each ``uri`` reads one log here, ``tail-mode=true`` its
    last 16 KB. Owner and admins only, as the logs themselves."""

    @extend_schema(
        parameters=[OpenApiParameter("tail-mode", OpenApiTypes.STR, enum=["true", "false"])],
        responses={200: TaskLogListSerializer, **ERRORS},
    )
    def get(
        self,
        request: Request,
        username: str,
        name: str,
        attempt: int,
        role: str,
        index: int,
        task_attempt: int,
    ) -> Response:
        job = job_for(request.user, username, name)
        row = task_of(job, attempt, role, index)
        if task_attempt != row.retries or not row.backend_ref:
            # OpenPAI's answer for a task attempt it has no log of, or one not started yet.
            raise NotFound({"code": "NoTaskLogError", "message": "Log of task is not found."})
        tail_mode = request.query_params.get("tail-mode", "false")
        if tail_mode not in ("true", "false"):
            raise serializers.ValidationError({"tail-mode": f"true or false, got {tail_mode!r}"})
        suffix = f"?tail={TAIL_MODE_BYTES}" if tail_mode == "true" else ""
        base = api_base_url(request)
        locations = [
            {"name": stream, "uri": container_log(job, row, base, stream) + suffix}
            for stream in STREAMS
        ]
        return Response({"locations": locations})
