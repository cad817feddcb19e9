from django.db import migrations, models


def create_default(apps, schema_editor):
    VirtualCluster = apps.get_model("clusters", "VirtualCluster")
    VirtualCluster.objects.get_or_create(
        name="default", defaults={"description": "The cluster's shared queue."}
    )


class Migration(migrations.Migration):
    initial = True
    dependencies = []

    operations = [
        migrations.CreateModel(
            name="VirtualCluster",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.SlugField(max_length=64, unique=True)),
                ("description", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.RunPython(create_default, migrations.RunPython.noop),
    ]
