"""clusters' migrations 0001 to 0004 in one, for new installs (``squashmigrations``, cleaned up
by hand): every model as it is after 0004, then the default virtual cluster (0001 created it,
0002 opened it to everyone).

Django runs this migration on a database that has none of the migrations it ``replaces``, and
the old files on one that has some of them: keep 0001 to 0004 until every install has migrated
past 0004; then delete them and this ``replaces`` list.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def create_default(apps, schema_editor):
    VirtualCluster = apps.get_model("clusters", "VirtualCluster")
    VirtualCluster.objects.get_or_create(
        name="default", defaults={"description": "The cluster's shared queue."}
    )
    VirtualCluster.objects.filter(name="default").update(open_to_all=True)


class Migration(migrations.Migration):
    replaces = [
        ("clusters", "0001_initial"),
        ("clusters", "0002_quota"),
        ("clusters", "0003_storage"),
        ("clusters", "0004_virtual_cluster_stopped"),
    ]

    initial = True

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="VirtualCluster",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.SlugField(max_length=64, unique=True)),
                ("description", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("cpu", models.PositiveIntegerField(blank=True, null=True)),
                ("gpus", models.JSONField(blank=True, null=True)),
                ("groups", models.ManyToManyField(blank=True, related_name="virtual_clusters", to="auth.group")),
                ("members", models.ManyToManyField(blank=True, related_name="virtual_clusters", to=settings.AUTH_USER_MODEL)),
                ("memory_mb", models.PositiveIntegerField(blank=True, null=True)),
                ("open_to_all", models.BooleanField(default=False)),
                ("strict_fifo", models.BooleanField(default=False)),
                ("stopped", models.BooleanField(default=False)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="Node",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=255, unique=True)),
                ("cpu", models.PositiveIntegerField(default=0)),
                ("memory_mb", models.PositiveIntegerField(default=0)),
                ("gpus", models.JSONField(default=dict)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="DefaultVirtualCluster",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("user", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="default_vc", to=settings.AUTH_USER_MODEL)),
                ("virtual_cluster", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="clusters.virtualcluster")),
            ],
        ),
        migrations.CreateModel(
            name="Storage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.SlugField(max_length=64, unique=True)),
                ("kind", models.CharField(choices=[("local-dir", "directory on the node"), ("pvc", "Kubernetes PVC"), ("nfs", "NFS export")], default="local-dir", max_length=16)),
                ("path", models.CharField(blank=True, help_text="directory, or NFS path", max_length=1024)),
                ("server", models.CharField(blank=True, help_text="NFS server", max_length=255)),
                ("claim_name", models.CharField(blank=True, help_text="PVC name", max_length=253)),
                ("read_only", models.BooleanField(default=False)),
                ("open_to_all", models.BooleanField(default=False)),
                ("groups", models.ManyToManyField(blank=True, related_name="storages", to="auth.group")),
                ("users", models.ManyToManyField(blank=True, related_name="storages", to=settings.AUTH_USER_MODEL)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.RunPython(create_default, migrations.RunPython.noop),
    ]
