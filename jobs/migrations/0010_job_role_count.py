"""``Job.role_count`` (OpenPAI's ``totalTaskRoleNumber`` in the job list), counted for the jobs
stored before it from their protocol."""

from django.db import migrations, models


def count_roles(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.only("id", "protocol").iterator(chunk_size=1000):
        roles = (job.protocol or {}).get("taskRoles") or {}
        Job.objects.filter(id=job.id).update(role_count=max(len(roles), 1))


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0009_task_accountable_retries"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="role_count",
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.RunPython(count_roles, migrations.RunPython.noop),
    ]
