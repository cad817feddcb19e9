"""Shapes the API documents in its OpenAPI schema (drf-spectacular); the views build plain
dicts, these serializers only describe them."""

from __future__ import annotations

from rest_framework import serializers

from apikit.openapi import nullable_int
from clusters.api.vcs import QuotaSerializer


class SubmittedSerializer(serializers.Serializer[dict[str, object]]):
    message = serializers.CharField()
    name = serializers.CharField()
    user = serializers.CharField()
    state = serializers.CharField()


class RetryDetailsSerializer(serializers.Serializer[dict[str, object]]):
    user = serializers.IntegerField()
    platform = serializers.IntegerField()
    resource = serializers.IntegerField()


class JobSummarySerializer(serializers.Serializer[dict[str, object]]):
    protocolVersion = serializers.CharField()
    debugId = serializers.CharField(help_text="the backend's name for the job's latest attempt")
    name = serializers.CharField()
    username = serializers.CharField()
    state = serializers.CharField()
    subState = serializers.CharField()
    executionType = serializers.ChoiceField(choices=["START", "STOP"])
    retries = serializers.IntegerField()
    retryDetails = RetryDetailsSerializer()
    retryDelayTime = serializers.IntegerField(
        allow_null=True, help_text="always null: a retry here starts without a delay"
    )
    submissionTime = serializers.IntegerField()
    createdTime = nullable_int()
    launchedTime = nullable_int()
    completedTime = nullable_int()
    appExitCode = nullable_int()
    virtualCluster = serializers.CharField()
    totalGpuNumber = serializers.IntegerField()
    totalTaskNumber = serializers.IntegerField()
    totalTaskRoleNumber = serializers.IntegerField()
    jobPriority = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField())


class JobPageSerializer(serializers.Serializer[dict[str, object]]):
    totalCount = serializers.IntegerField()
    data = JobSummarySerializer(many=True)


def summary_null(help_text: str = "") -> dict[str, object]:
    text = "null for a reader who is not the job's owner or an admin"
    return {"allow_null": True, "help_text": f"{help_text}; {text}" if help_text else text}


class ExitSpecSerializer(serializers.Serializer[dict[str, object]]):
    code = serializers.IntegerField(help_text="OpenPAI's exit code for this failure")
    originalCode = nullable_int()
    phrase = serializers.CharField()
    openpaiPhrase = serializers.CharField()
    type = serializers.CharField(help_text="OpenPAI's type: USER_FAILURE, PLATFORM_FAILURE, ...")
    stage = serializers.CharField()
    behavior = serializers.CharField()
    reaction = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    portalType = serializers.CharField(allow_null=True, help_text="ours: user/platform/resource")
    solution = serializers.ListField(child=serializers.CharField())
    matchedLines = serializers.ListField(child=serializers.CharField())


class TaskStatusSerializer(serializers.Serializer[dict[str, object]]):
    taskIndex = serializers.IntegerField()
    taskUid = serializers.CharField()
    taskState = serializers.CharField()
    containerId = serializers.CharField(allow_blank=True, **summary_null())
    containerIp = serializers.CharField(allow_blank=True, **summary_null())
    containerPorts = serializers.DictField(child=serializers.CharField())
    containerGpus = serializers.CharField(allow_null=True, help_text="a bit per GPU index")
    containerLog = serializers.CharField(
        allow_blank=True, help_text="the URL of the task's stdout; empty for a summary reader"
    )
    containerNodeName = serializers.CharField(allow_blank=True, **summary_null())
    containerExitCode = nullable_int()
    containerExitDiagnostics = serializers.CharField(allow_blank=True, **summary_null())
    containerExitSpec = ExitSpecSerializer(allow_null=True)
    retries = serializers.IntegerField()
    accountableRetries = serializers.IntegerField()
    createdTime = nullable_int()
    launchedTime = nullable_int()
    completedTime = nullable_int()
    attemptId = serializers.IntegerField(help_text="the task's attempt: its retries before it")
    attemptState = serializers.CharField()
    currentAttemptCreatedTime = nullable_int()
    currentAttemptLaunchedTime = nullable_int()
    currentAttemptCompletedTime = nullable_int()


class TaskAttemptSerializer(serializers.Serializer[dict[str, object]]):
    attemptId = serializers.IntegerField()
    attemptState = serializers.CharField()
    currentAttemptCreatedTime = nullable_int()
    currentAttemptLaunchedTime = nullable_int()
    currentAttemptCompletedTime = nullable_int()
    containerId = serializers.CharField(allow_blank=True, **summary_null())
    containerIp = serializers.CharField(allow_blank=True, **summary_null())
    containerNodeName = serializers.CharField(allow_blank=True, **summary_null())
    containerPorts = serializers.DictField(child=serializers.CharField())
    containerGpus = serializers.CharField(allow_null=True)
    containerLog = serializers.CharField(
        allow_blank=True, help_text="the URL of its log list; empty for a summary reader"
    )
    containerExitCode = nullable_int()
    containerExitSpec = ExitSpecSerializer(allow_null=True)
    containerExitDiagnostics = serializers.CharField(allow_blank=True, **summary_null())


class TaskDetailSerializer(serializers.Serializer[dict[str, object]]):
    username = serializers.CharField()
    jobName = serializers.CharField()
    jobAttemptId = serializers.IntegerField()
    taskRoleName = serializers.CharField()
    taskIndex = serializers.IntegerField()
    taskUid = serializers.CharField()
    taskState = serializers.CharField()
    retries = serializers.IntegerField()
    accountableRetries = serializers.IntegerField()
    createdTime = nullable_int()
    launchedTime = nullable_int()
    completedTime = nullable_int()
    attempts = TaskAttemptSerializer(many=True)


class LogLocationSerializer(serializers.Serializer[dict[str, object]]):
    name = serializers.CharField(help_text="stdout or stderr")
    uri = serializers.CharField()


class TaskLogListSerializer(serializers.Serializer[dict[str, object]]):
    locations = LogLocationSerializer(many=True)


class RoleNameSerializer(serializers.Serializer[dict[str, object]]):
    name = serializers.CharField()


class TaskRoleSerializer(serializers.Serializer[dict[str, object]]):
    taskRoleStatus = RoleNameSerializer()
    taskStatuses = TaskStatusSerializer(many=True)


class AppExitSpecSerializer(ExitSpecSerializer):
    taskRole = serializers.CharField()
    taskIndex = serializers.IntegerField()


class AppExitMessagesSerializer(serializers.Serializer[dict[str, object]]):
    container = serializers.CharField(allow_null=True)
    runtime = serializers.DictField(allow_null=True)
    launcher = serializers.CharField(allow_null=True)


class JobStatusSerializer(serializers.Serializer[dict[str, object]]):
    username = serializers.CharField()
    state = serializers.CharField()
    subState = serializers.CharField()
    attemptState = serializers.CharField()
    executionType = serializers.ChoiceField(choices=["START", "STOP"])
    virtualCluster = serializers.CharField()
    retries = serializers.IntegerField()
    retryDetails = RetryDetailsSerializer()
    retryDelayTime = nullable_int()
    attemptIndex = nullable_int()
    attemptId = nullable_int()
    submissionTime = serializers.IntegerField()
    createdTime = nullable_int()
    launchedTime = nullable_int()
    completedTime = nullable_int()
    appId = serializers.CharField(allow_blank=True)
    appProgress = serializers.IntegerField()
    appTrackingUrl = serializers.CharField(allow_blank=True)
    appCreatedTime = nullable_int()
    appLaunchedTime = nullable_int()
    appCompletedTime = nullable_int()
    appExitCode = nullable_int()
    appExitDiagnostics = serializers.CharField(allow_blank=True)
    appExitSpec = AppExitSpecSerializer(allow_null=True)
    appExitMessages = AppExitMessagesSerializer(allow_null=True)
    appExitTriggerMessage = serializers.CharField(allow_null=True)
    appExitTriggerTaskRoleName = serializers.CharField(allow_null=True)
    appExitTriggerTaskIndex = nullable_int()
    appExitType = serializers.CharField(allow_null=True)
    jobPriority = serializers.CharField(help_text="HiveD's class name (crit, prod, test, ...)")
    reason = serializers.CharField(allow_blank=True)
    waitingReason = serializers.CharField(allow_null=True, allow_blank=True)
    queuePosition = nullable_int()
    priority = serializers.IntegerField()
    opportunistic = serializers.BooleanField()
    preemptible = serializers.BooleanField()
    totalTaskNumber = serializers.IntegerField()
    totalTaskRoleNumber = serializers.IntegerField()
    totalGpuNumber = serializers.IntegerField()
    tags = serializers.ListField(child=serializers.CharField())


class JobDetailSerializer(serializers.Serializer[dict[str, object]]):
    debugId = serializers.CharField()
    name = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    jobStatus = JobStatusSerializer()
    taskRoles = serializers.DictField(child=TaskRoleSerializer())


class JobAttemptSerializer(serializers.Serializer[dict[str, object]]):
    jobName = serializers.CharField()
    userName = serializers.CharField()
    state = serializers.CharField()
    attemptIndex = serializers.IntegerField()
    maxAttemptCount = serializers.IntegerField()
    jobStartedTime = serializers.IntegerField()
    attemptStartedTime = nullable_int()
    attemptCompletedTime = nullable_int()
    exitCode = nullable_int()
    exitPhrase = serializers.CharField(allow_null=True)
    exitType = serializers.CharField(allow_null=True)
    appExitSpec = AppExitSpecSerializer(allow_null=True)
    appExitMessages = AppExitMessagesSerializer(allow_null=True)
    appExitTriggerMessage = serializers.CharField(allow_null=True)
    appExitTriggerTaskRoleName = serializers.CharField(allow_null=True)
    appExitTriggerTaskIndex = nullable_int()
    appExitDiagnostics = serializers.CharField(allow_blank=True)
    totalGpuNumber = serializers.IntegerField()
    totalTaskNumber = serializers.IntegerField()
    totalTaskRoleNumber = serializers.IntegerField()
    taskRoles = serializers.DictField(child=TaskRoleSerializer())
    isLatest = serializers.BooleanField()


class HealthSerializer(serializers.Serializer[dict[str, object]]):
    isHealthy = serializers.BooleanField()
    message = serializers.CharField()


class EventSerializer(serializers.Serializer[dict[str, object]]):
    uid = serializers.CharField()
    frameworkName = serializers.CharField()
    taskroleName = serializers.CharField(allow_null=True)
    taskIndex = nullable_int()
    type = serializers.ChoiceField(choices=["Normal", "Warning"])
    reason = serializers.CharField()
    message = serializers.CharField(allow_blank=True)
    firstTimestamp = serializers.CharField(allow_null=True)
    lastTimestamp = serializers.CharField(allow_null=True)
    count = serializers.IntegerField()
    sourceComponent = serializers.CharField()
    time = serializers.CharField(allow_null=True)
    attempt = nullable_int()
    task = serializers.CharField(allow_blank=True)
    kind = serializers.CharField()


class JobEventsSerializer(serializers.Serializer[dict[str, object]]):
    name = serializers.CharField()
    state = serializers.CharField()
    totalCount = serializers.IntegerField()
    data = EventSerializer(many=True)


class ResourcesSerializer(serializers.Serializer[dict[str, object]]):
    cpu = nullable_int()
    gpu = nullable_int()
    vCores = nullable_int()
    memory = nullable_int()
    GPUs = nullable_int()
    gpuTypes = serializers.DictField(child=serializers.IntegerField(), allow_null=True)


class VirtualClusterSerializer(serializers.Serializer[dict[str, object]]):
    description = serializers.CharField(allow_blank=True)
    quota = QuotaSerializer(
        required=False, help_text="the limits as set (null: none); resources* count them"
    )
    capacity = serializers.FloatField()
    usedCapacity = serializers.FloatField()
    maxCapacity = serializers.FloatField()
    resourcesUsed = ResourcesSerializer()
    resourcesBorrowed = ResourcesSerializer()
    resourcesGuaranteed = ResourcesSerializer()
    resourcesTotal = ResourcesSerializer()
    numJobs = serializers.IntegerField()
    numActiveJobs = serializers.IntegerField()
    numPendingJobs = serializers.IntegerField()
    strictFifo = serializers.BooleanField()
    openToAll = serializers.BooleanField()
    dedicated = serializers.BooleanField()
    status = serializers.CharField()
