from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0004_task_address"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="tags",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
