from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

DEFAULT_VIRTUAL_CLUSTER = "default"


class VirtualClusterQuerySet(models.QuerySet["VirtualCluster"]):
    def named(self, name: str) -> VirtualCluster | None:
        """The virtual cluster ``name``; ``default`` always exists (made again if deleted)."""
        if name == DEFAULT_VIRTUAL_CLUSTER:
            return self.get_or_create(name=name, defaults={"open_to_all": True})[0]
        return self.filter(name=name).first()

    def usable_by(self, user: AbstractBaseUser | AnonymousUser) -> VirtualClusterQuerySet:
        """The virtual clusters ``user`` may submit to (admins: all of them)."""
        if getattr(user, "is_staff", False):
            return self.all()
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(open_to_all=True) | Q(members=user) | Q(groups__user=user)).distinct()


class VirtualCluster(models.Model):
    """A named share of the cluster that jobs are queued in, with its guaranteed quota.

    A quota of ``None`` means "not limited by this virtual cluster" (a fresh ``default``);
    ``gpus`` maps a GPU type to a count (``None``: GPUs not limited; ``{}``: no GPUs).
    """

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    cpu = models.PositiveIntegerField(null=True, blank=True)
    memory_mb = models.PositiveIntegerField(null=True, blank=True)
    gpus = models.JSONField(null=True, blank=True)
    strict_fifo = models.BooleanField(default=False)
    open_to_all = models.BooleanField(default=False)
    # OpenPAI's "stopped" status: the virtual cluster admits no new job; the ones it holds
    # (waiting or running) go on.
    stopped = models.BooleanField(default=False)
    # OpenPAI's vcMaxCapacity: the most of the cluster (percent of each resource) this VC's
    # jobs may hold, guaranteed and borrowed together (clusters.quota); 100: up to all of it.
    max_capacity = models.FloatField(
        default=100.0, validators=[MinValueValidator(0.0), MaxValueValidator(100.0)]
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="virtual_clusters"
    )
    groups = models.ManyToManyField(Group, blank=True, related_name="virtual_clusters")

    objects = VirtualClusterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def usable_by(self, user: AbstractBaseUser | AnonymousUser) -> bool:
        if getattr(user, "is_staff", False) or (self.open_to_all and user.is_authenticated):
            return True  # no query: what the queryset's first conditions say
        return VirtualCluster.objects.usable_by(user).filter(id=self.id).exists()


class DefaultVirtualCluster(models.Model):
    """A user's default virtual cluster; users without one submit to ``default``."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="default_vc"
    )
    virtual_cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE)

    def __str__(self) -> str:
        return f"{self.user} -> {self.virtual_cluster}"


class Node(models.Model):
    """The backend's capacity as last seen: one row per node, refreshed by beat."""

    name = models.CharField(max_length=255, unique=True)
    cpu = models.PositiveIntegerField(default=0)
    memory_mb = models.PositiveIntegerField(default=0)
    gpus = models.JSONField(default=dict)  # GPU type -> count
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_types(self) -> str:
        return ", ".join(sorted(self.gpus)) or "–"


class Storage(models.Model):
    """A storage admins define and jobs mount by name (``teamwise_storage`` plugin) at
    ``/mnt/<name>``: a directory of this machine, a Kubernetes PVC, or an NFS export."""

    LOCAL_DIR = "local-dir"
    PVC = "pvc"
    NFS = "nfs"
    KINDS = [(LOCAL_DIR, "directory on the node"), (PVC, "Kubernetes PVC"), (NFS, "NFS export")]

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=KINDS, default=LOCAL_DIR)
    path = models.CharField(max_length=1024, blank=True, help_text="directory, or NFS path")
    server = models.CharField(max_length=255, blank=True, help_text="NFS server")
    claim_name = models.CharField(max_length=253, blank=True, help_text="PVC name")
    read_only = models.BooleanField(default=False)
    open_to_all = models.BooleanField(default=False)
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="storages")
    groups = models.ManyToManyField(Group, blank=True, related_name="storages")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def usable_by(self, user: AbstractBaseUser | AnonymousUser) -> bool:
        if self.open_to_all or getattr(user, "is_staff", False):
            return True
        if not user.is_authenticated:
            return False
        mine = self.users.filter(pk=user.pk).exists()
        return mine or self.groups.filter(user__pk=user.pk).exists()


class VCUsageSample(models.Model):
    """What a virtual cluster's running jobs held at ``time``, and its queue: one row per
    virtual cluster each minute (``clusters.usage.record``, from beat), for its use over time
    against its guarantee. Past a day they are thinned to one an hour, and deleted after
    ``VC_USAGE_RETENTION_DAYS``.

    The counts are all its running jobs hold, borrowed included (``VCView.used`` +
    ``borrowed``): use over the guarantee is what the chart is for.
    """

    time = models.DateTimeField(db_index=True)
    virtual_cluster = models.ForeignKey(
        VirtualCluster, on_delete=models.CASCADE, related_name="usage_samples"
    )
    cpu = models.PositiveIntegerField(default=0)
    memory_mb = models.PositiveBigIntegerField(default=0)
    gpus = models.JSONField(default=dict)  # GPU type ("" = any) -> count held
    running = models.PositiveIntegerField(default=0)
    waiting = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["virtual_cluster", "time"], name="vc_usage_vc_time")]

    def __str__(self) -> str:
        return f"{self.virtual_cluster_id} at {self.time:%Y-%m-%d %H:%M}"

    @property
    def gpu_total(self) -> int:
        return sum(self.gpus.values())
