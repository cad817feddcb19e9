"""On PostgreSQL, each job and task row carries ``changed``: the id of the transaction that last
inserted it or changed what admission reads of it while it lives (a job's state, retries and
virtual cluster; a task's state and node), set by a trigger. The admission book
(``jobs.lifecycle.feed``) reads only the rows changed since its last pass instead of every live
job and task. Measured reason (``bench/admission.py``, 10,000 waiting and 4,000 running jobs):
reading every live job's mark and every running task's node was 40-60 ms of each pass on this
2-core machine.

Rewriting a waiting job's reason and position does not set ``changed``, so it stays a heap-only
update (0014). The column is not in the models: nothing but the feed reads it, and the trigger
writes it whatever the ORM sends. Other databases have no feed: the book reads in full.
"""

from django.db import migrations

from jobs.migrations._postgresql import postgresql_only

FORWARD = """
CREATE FUNCTION portal_row_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed := pg_current_xact_id();
    RETURN NEW;
END $$;

ALTER TABLE jobs_job ADD COLUMN changed xid8 NOT NULL DEFAULT '0';
CREATE INDEX jobs_job_changed ON jobs_job (changed);
CREATE TRIGGER jobs_job_inserted BEFORE INSERT ON jobs_job
    FOR EACH ROW EXECUTE FUNCTION portal_row_changed();
CREATE TRIGGER jobs_job_moved BEFORE UPDATE OF state, retries, virtual_cluster_id ON jobs_job
    FOR EACH ROW WHEN (
        OLD.state IS DISTINCT FROM NEW.state
        OR OLD.retries IS DISTINCT FROM NEW.retries
        OR OLD.virtual_cluster_id IS DISTINCT FROM NEW.virtual_cluster_id
    ) EXECUTE FUNCTION portal_row_changed();

ALTER TABLE jobs_task ADD COLUMN changed xid8 NOT NULL DEFAULT '0';
CREATE INDEX jobs_task_changed ON jobs_task (changed);
CREATE TRIGGER jobs_task_inserted BEFORE INSERT ON jobs_task
    FOR EACH ROW EXECUTE FUNCTION portal_row_changed();
CREATE TRIGGER jobs_task_moved BEFORE UPDATE OF state, node ON jobs_task
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.node IS DISTINCT FROM NEW.node)
    EXECUTE FUNCTION portal_row_changed();
"""

BACKWARD = """
DROP TRIGGER jobs_task_moved ON jobs_task;
DROP TRIGGER jobs_task_inserted ON jobs_task;
ALTER TABLE jobs_task DROP COLUMN changed;
DROP TRIGGER jobs_job_moved ON jobs_job;
DROP TRIGGER jobs_job_inserted ON jobs_job;
ALTER TABLE jobs_job DROP COLUMN changed;
DROP FUNCTION portal_row_changed();
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0014_job_fillfactor")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
