"""Live jobs store their demand task by task (clusters.demand.demand_json), for placement on nodes."""

from django.db import migrations

from clusters.demand import demand_json


def fill_tasks(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.filter(state__in=["WAITING", "RUNNING", "STOPPING"]).iterator():
        job.resources = demand_json(job.protocol)
        job.save(update_fields=["resources"])


class Migration(migrations.Migration):
    dependencies = [("jobs", "0011_task_usage")]

    operations = [migrations.RunPython(fill_tasks, migrations.RunPython.noop)]
