"""On PostgreSQL, jobs_job's pages keep 30% free, so that rewriting a waiting job's reason and
queue position (every admission pass that moves a queue: about 300 rows after 5 jobs end with
10,000 waiting) is a heap-only update that touches none of the table's eight indexes. Measured
with bench/admission.py on this 2-core machine: the pass's standing write 21.7 ms at the default
(100; 220 of 17,856 updates heap-only), 14.5 ms at 70 (9,239), 9.3 ms at 60. The price: new rows
take 1/0.7 the pages. Rows written before this migration keep their pages until a rewrite."""

from django.db import migrations

from jobs.migrations._postgresql import postgresql_only


class Migration(migrations.Migration):
    dependencies = [("jobs", "0013_job_vc_keeps_finished_jobs")]

    operations = [
        postgresql_only(
            "ALTER TABLE jobs_job SET (fillfactor = 70)",
            "ALTER TABLE jobs_job SET (fillfactor = 100)",
        )
    ]
