"""accounts' migrations 0001 and 0002 in one, for new installs (``squashmigrations``).

Django runs this migration on a database that has none of the migrations it ``replaces``, and
the old files on one that has some of them: keep 0001 and 0002 until every install has migrated
past 0002; then delete them and this ``replaces`` list.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [('accounts', '0001_initial'), ('accounts', '0002_token_prefix')]

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('digest', models.CharField(max_length=64, unique=True)),
                ('kind', models.CharField(default='session', max_length=16)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('expires_at', models.DateTimeField()),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                ('prefix', models.CharField(blank=True, max_length=8)),
            ],
        ),
    ]
