"""The job lifecycle: every change of a job's state happens in this package, one step a module.

    submit.py      check a job file, choose its virtual cluster, queue it
    admit.py       admission: may it go there, and one pass of the queues (quota plan applied;
                   ``book.py``: the live jobs a process keeps between passes)
    preempt.py     a borrowing job gives its room back
    launch.py      start an attempt (tasks placed) and hand its tasks to the backend
    observe.py     what the backend says of live tasks, saved (``exits.py``: an exit explained
                   by the exit spec)
    settle.py      completion policy (``completion.py``) applied to running attempts
    retry.py       task and job retries
    stop.py        a user's stop, and the pass asking the backend to stop tasks
    finish.py      closing an attempt and a job
    cleanup.py     what the backend still holds of attempts nobody needs
    passes.py      the reconcile pass: its lock and the order of the steps above
    events.py      the job's event log; report.py: what a pass did

Each step is a compare-and-swap update (``filter(id=..., state=old).update(...)``): when it
changes no row, someone else got there first and the step does nothing. Views, the API,
consumers and Celery tasks call in here; this package calls down into ``protocol`` and
``backends`` (see the import-linter contracts in pyproject.toml).

Only what most callers use is named here (``lifecycle.submit``, ``lifecycle.stop``); the rest
is imported from its module.
"""

from jobs.errors import SubmitError
from jobs.lifecycle.stop import stop
from jobs.lifecycle.submit import submit

__all__ = ["SubmitError", "stop", "submit"]
