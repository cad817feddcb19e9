"""The shapes of the virtual-cluster API in its OpenAPI schema (drf-spectacular); the views
build plain dicts, these serializers only describe them."""

from __future__ import annotations

from rest_framework import serializers

from portal.openapi import nullable_int


class ResourcesSerializer(serializers.Serializer[dict[str, object]]):
    cpu = nullable_int()
    gpu = nullable_int()
    vCores = nullable_int()
    memory = nullable_int()
    GPUs = nullable_int()
    gpuTypes = serializers.DictField(child=serializers.IntegerField(), allow_null=True)


class QuotaSerializer(serializers.Serializer[dict[str, object]]):
    vCores = nullable_int()
    memory = nullable_int()
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
