"""On PostgreSQL, every statement that deletes or truncates job or task rows adds one to
``jobs_deletions.count``: a deleted row leaves no stamp for the change feed (0015), and the
admission book reads everything again when the count moved (``jobs.lifecycle.feed``). Rows of
live jobs are deleted only by hand or by a restore (the portal deletes ended jobs), so the
counter costs a row update per deleting statement and saves every pass counting the live rows
(an index scan of every live job and task: 4-15 ms of a pass at 14,000, bench/admission.py).
The count is a row, not a sequence: it moves when the deletion commits, not before.
"""

from django.db import migrations

from jobs.migrations._postgresql import postgresql_only

FORWARD = """
CREATE TABLE jobs_deletions (id integer PRIMARY KEY CHECK (id = 1), count bigint NOT NULL);
INSERT INTO jobs_deletions VALUES (1, 0);
CREATE FUNCTION portal_rows_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs_deletions SET count = count + 1 WHERE id = 1;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_job_deleted AFTER DELETE OR TRUNCATE ON jobs_job
    FOR EACH STATEMENT EXECUTE FUNCTION portal_rows_deleted();
CREATE TRIGGER jobs_task_deleted AFTER DELETE OR TRUNCATE ON jobs_task
    FOR EACH STATEMENT EXECUTE FUNCTION portal_rows_deleted();
"""

BACKWARD = """
DROP TRIGGER jobs_task_deleted ON jobs_task;
DROP TRIGGER jobs_job_deleted ON jobs_job;
DROP FUNCTION portal_rows_deleted();
DROP TABLE jobs_deletions;
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0015_change_feed")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
