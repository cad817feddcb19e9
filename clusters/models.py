from __future__ import annotations

from django.db import models

DEFAULT_VIRTUAL_CLUSTER = "default"


class VirtualClusterQuerySet(models.QuerySet["VirtualCluster"]):
    def named(self, name: str) -> VirtualCluster | None:
        """The virtual cluster ``name``; ``default`` always exists (made again if deleted)."""
        if name == DEFAULT_VIRTUAL_CLUSTER:
            return self.get_or_create(name=name)[0]
        return self.filter(name=name).first()


class VirtualCluster(models.Model):
    """A named share of the cluster that jobs are queued in."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VirtualClusterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
