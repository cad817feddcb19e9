"""``VirtualCluster.max_capacity``: OpenPAI's vcMaxCapacity, the most of the cluster a virtual
cluster's jobs may hold when they borrow beyond its guarantee (100: the whole cluster)."""

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0005_vc_usage_sample"),
    ]

    operations = [
        migrations.AddField(
            model_name="virtualcluster",
            name="max_capacity",
            field=models.FloatField(
                default=100.0,
                validators=[
                    django.core.validators.MinValueValidator(0.0),
                    django.core.validators.MaxValueValidator(100.0),
                ],
            ),
        ),
    ]
