"""jobs' migrations 0001 to 0008 in one, for new installs (``squashmigrations``, cleaned up by
hand): every model as it is after 0008, then the job list's trigram index (0007's ``create``,
on PostgreSQL only, copied here). 0002's and 0004's data steps are left out: they filled new
columns of existing rows, and a database this migration runs on has no rows yet.

Django runs this migration on a database that has none of the migrations it ``replaces``, and
the old files on one that has some of them: keep 0001 to 0008 until every install has migrated
past 0008; then delete them and this ``replaces`` list.
"""

import logging

import django.db.models.deletion
import django.utils.timezone
import jobs.model_fields
from django.conf import settings
from django.db import migrations, models, transaction

log = logging.getLogger(__name__)


def create_trigram_index(apps, schema_editor):
    """0007's: a GIN trigram index on ``UPPER(name)`` for ``name__icontains``; it needs the
    ``pg_trgm`` extension, and where the database user may not create it the list still works,
    only without the index. SQLite gets nothing."""
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(using=schema_editor.connection.alias):
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            schema_editor.execute(
                "CREATE INDEX IF NOT EXISTS job_name_trgm ON jobs_job"
                " USING gin (UPPER(name) gin_trgm_ops)"
            )
    except Exception:
        log.warning("no trigram index for the job list's keyword search (pg_trgm unavailable)")


def drop_trigram_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS job_name_trgm")


class Migration(migrations.Migration):
    replaces = [
        ("jobs", "0001_initial"),
        ("jobs", "0002_quota"),
        ("jobs", "0003_runtime"),
        ("jobs", "0004_task_address"),
        ("jobs", "0005_job_tags"),
        ("jobs", "0006_job_state_name"),
        ("jobs", "0007_job_name_trigram"),
        ("jobs", "0008_task_backend_ref"),
    ]

    initial = True

    dependencies = [
        ("clusters", "0001_squashed_0004_virtual_cluster_stopped"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Job",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=255)),
                ("submitted_text", models.TextField()),
                ("source_format", models.CharField(default="v2", max_length=8)),
                ("protocol", jobs.model_fields.OrderedJSONField()),
                ("state", models.CharField(choices=[("WAITING", "Waiting"), ("RUNNING", "Running"), ("STOPPING", "Stopping"), ("SUCCEEDED", "Succeeded"), ("FAILED", "Failed"), ("STOPPED", "Stopped")], default="WAITING", max_length=16)),
                ("reason", models.TextField(blank=True)),
                ("exit_code", models.IntegerField(blank=True, null=True)),
                ("retries", models.PositiveIntegerField(default=0)),
                ("task_count", models.PositiveIntegerField(default=0)),
                ("gpu_count", models.PositiveIntegerField(default=0)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("completed_at", models.DateTimeField(blank=True, null=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("owner", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="jobs", to=settings.AUTH_USER_MODEL)),
                ("virtual_cluster", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="jobs", to="clusters.virtualcluster")),
                ("borrowing", models.BooleanField(default=False)),
                ("opportunistic", models.BooleanField(default=False)),
                ("priority", models.IntegerField(default=0)),
                ("queue_position", models.PositiveIntegerField(blank=True, null=True)),
                ("resources", models.JSONField(default=dict)),
                ("ssh_private_key", models.TextField(blank=True)),
                ("ssh_public_key", models.TextField(blank=True)),
                ("tags", models.JSONField(blank=True, default=list)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["owner", "-created_at"], name="job_owner_recent"),
                    models.Index(fields=["state", "created_at"], name="job_state_fifo"),
                    models.Index(fields=["state", "name", "id"], name="job_state_name"),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("owner", "name"), name="job_name_unique_per_owner"),
                ],
            },
        ),
        migrations.CreateModel(
            name="JobAttempt",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("number", models.PositiveIntegerField()),
                ("key", models.SlugField(max_length=63, unique=True)),
                ("state", models.CharField(choices=[("WAITING", "Waiting"), ("RUNNING", "Running"), ("STOPPING", "Stopping"), ("SUCCEEDED", "Succeeded"), ("FAILED", "Failed"), ("STOPPED", "Stopped")], default="RUNNING", max_length=16)),
                ("reason", models.TextField(blank=True)),
                ("exit_code", models.IntegerField(blank=True, null=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("completed_at", models.DateTimeField(blank=True, null=True)),
                ("job", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="attempts", to="jobs.job")),
            ],
            options={
                "ordering": ["job", "number"],
                "constraints": [
                    models.UniqueConstraint(fields=("job", "number"), name="attempt_number_unique"),
                ],
            },
        ),
        migrations.CreateModel(
            name="JobEvent",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("attempt_number", models.IntegerField(blank=True, null=True)),
                ("task", models.CharField(blank=True, max_length=80)),
                ("kind", models.CharField(max_length=32)),
                ("message", models.TextField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("job", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="events", to="jobs.job")),
            ],
            options={"ordering": ["id"]},
        ),
        migrations.CreateModel(
            name="Task",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("role", models.CharField(max_length=64)),
                ("index", models.PositiveIntegerField()),
                ("state", models.CharField(choices=[("WAITING", "Waiting"), ("RUNNING", "Running"), ("SUCCEEDED", "Succeeded"), ("FAILED", "Failed"), ("STOPPED", "Stopped")], default="WAITING", max_length=16)),
                ("ip", models.CharField(blank=True, max_length=64)),
                ("ports", jobs.model_fields.OrderedJSONField(default=dict)),
                ("exit_code", models.IntegerField(blank=True, null=True)),
                ("diagnostics", models.TextField(blank=True)),
                ("retries", models.PositiveIntegerField(default=0)),
                ("backend_ref", models.CharField(blank=True, max_length=255)),
                ("node", models.CharField(blank=True, max_length=255)),
                ("stop_requested", models.BooleanField(default=False)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("completed_at", models.DateTimeField(blank=True, null=True)),
                ("attempt", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="tasks", to="jobs.jobattempt")),
                ("exit_spec", models.JSONField(blank=True, default=dict)),
                ("address", models.CharField(blank=True, max_length=255)),
            ],
            options={
                "ordering": ["attempt", "id"],
                "indexes": [
                    models.Index(fields=["state"], name="task_state"),
                    models.Index(fields=["backend_ref"], name="task_backend_ref"),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("attempt", "role", "index"), name="task_unique"),
                ],
            },
        ),
        migrations.RunPython(create_trigram_index, drop_trigram_index),
    ]
