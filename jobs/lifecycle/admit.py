"""Admit: where a new job may go (``submit_check``), and one admission pass on the database:
load in a constant number of queries, plan, apply (start, preempt, tell waiting jobs where
they stand).

The decisions are made by :func:`clusters.quota.plan`; this module only reads and writes.
Reads: what ``jobs.lifecycle.book`` keeps, a constant number of queries whatever the number
of jobs, and a pass with nothing moved since one that changed nothing plans nothing. Writes:
one statement for every waiting job's reason and position, plus the work of starting each
admitted job and stopping each preempted one (bounded by ``MAX_ADMIT``).
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import Q

from backends.base import Backend
from clusters import capacity
from clusters.demand import demand_json, demand_of, options_of, tasks_of
from clusters.limits import ceiling, never_fits
from clusters.models import DEFAULT_VIRTUAL_CLUSTER, DefaultVirtualCluster, VirtualCluster
from clusters.placement import place, shortfall_by_node
from clusters.quota import Plan, guarantee, plan, quota_of
from jobs import wakeup
from jobs.lifecycle.book import BOOK
from jobs.lifecycle.launch import start_waiting
from jobs.lifecycle.preempt import preempt
from jobs.lifecycle.report import PassReport
from jobs.models import Job
from jobs.states import JobState

log = logging.getLogger(__name__)
MAX_ADMIT = 100  # jobs started per pass; the rest are told they start in the next pass
STANDING_KEY = "portal:reconcile:standing"  # in the cache for a while after standing was written
STANDING_EVERY_SECONDS = 1.0


def job_fields(protocol: dict[str, Any]) -> dict[str, Any]:
    """The admission fields of a new Job: its total demand, priority and opportunism."""
    priority, opportunistic = options_of(protocol)
    return {
        "resources": demand_json(protocol),
        "priority": priority,
        "opportunistic": opportunistic,
    }


def chosen_or_default(user: Any, vc_name: str | None) -> VirtualCluster | None:
    """The virtual cluster ``vc_name``, or without one the user's default, else ``default``.

    One query: at most two rows, and of two the user's is the one not named default.
    """
    wanted = Q(name=vc_name or DEFAULT_VIRTUAL_CLUSTER)
    if not vc_name:
        users_default = DefaultVirtualCluster.objects.filter(user_id=user.pk)
        wanted |= Q(id__in=users_default.values("virtual_cluster_id"))
    rows = list(VirtualCluster.objects.filter(wanted))
    if len(rows) == 2:
        return next(vc for vc in rows if vc.name != DEFAULT_VIRTUAL_CLUSTER)
    if rows:
        return rows[0]
    if vc_name and vc_name != DEFAULT_VIRTUAL_CLUSTER:
        return None
    return VirtualCluster.objects.named(DEFAULT_VIRTUAL_CLUSTER)  # made again if deleted


def submit_check(user: Any, protocol: dict[str, Any], vc_name: str | None) -> VirtualCluster:
    """The virtual cluster a job goes to. PermissionError when ``user`` is not a member;
    ValueError when it does not exist or the job could never fit its quota or the cluster's
    capacity (when known), saying by how much."""
    vc = chosen_or_default(user, vc_name)
    if vc is None:
        raise ValueError(f"defaults.virtualCluster: no virtual cluster named {vc_name!r}")
    if not vc.usable_by(user):
        raise PermissionError(
            f"virtual cluster '{vc.name}': {user.get_username()} is not a member of it"
        )
    if vc.stopped:
        raise ValueError(
            f"defaults.virtualCluster: virtual cluster '{vc.name}' is stopped and admits no new "
            "job until an admin sets it running again"
        )
    # Beyond its VC's guarantee a job may borrow idle capacity (clusters.quota): only what the
    # cluster could never hold is refused (issue 27).
    nodes = capacity.node_capacities()
    cluster = capacity.summed(nodes)
    limits = [(cluster, "the cluster has")]
    if vc.max_capacity < 100:
        # at least the VC's guarantee; a resource it has no quota of is not checked here
        most = ceiling(cluster, vc.max_capacity, guarantee(quota_of(vc), cluster))
        limits.append((most, f"'{vc.name}' may hold at most {vc.max_capacity:g}% of it,"))
    for limit, where in limits:
        short = never_fits(demand_of(protocol), limit)
        if short:
            raise ValueError(
                "taskRoles: "
                + "; ".join(
                    f"the job needs {s.need} {s.what} in total but {where} {s.free}: "
                    f"{s.need - s.free} more than the job could ever get"
                    for s in short
                )
            )
    if len(nodes) > 1 and place(tasks_of(protocol), nodes) is None:
        lacking = shortfall_by_node(tasks_of(protocol), nodes)
        if lacking.what:
            raise ValueError(
                f"taskRoles.{lacking.role}: a task needs {lacking.need} {lacking.what} on one "
                f"node, and the most any node has is {lacking.most} ({lacking.node})"
            )
        raise ValueError(
            f"taskRoles.{lacking.role}: the job's tasks could never all fit on the cluster's "
            "nodes at once"
        )
    return vc


def admit(backend: Backend, report: PassReport, full: bool = True) -> None:
    """Start waiting jobs as their virtual clusters' quotas allow (``plan_and_apply``).

    Where each waiting job stands (its reason and queue position) is written by every full
    pass but by a wake-up at most once every ``STANDING_EVERY_SECONDS``: when jobs end one
    after another with a thousand waiting, every pass moves all their positions, and writing
    them (and telling their pages) each time cost more than the rest of the pass. A wake-up
    that leaves it asks for a pass once that second is over, so no standing stays stale. A
    wake-up with no job waiting skips admission (which reads every running job)."""
    if not full and not Job.objects.filter(state=JobState.WAITING).exists():
        BOOK.crowded = False
        return  # nothing to admit: spare a wake-up reading every running job
    write = full or cache.add(STANDING_KEY, 1, STANDING_EVERY_SECONDS)
    decided = plan_and_apply(backend, report, standing=write)
    if not write and decided.left:
        wakeup.request_pass_later(STANDING_EVERY_SECONDS)


def plan_and_apply(backend: Backend, report: PassReport, standing: bool = True) -> Plan:
    """Plan one pass and apply it: preempt, start, and (with ``standing``) tell every waiting
    job where it stands."""
    BOOK.refresh(backend)
    if BOOK.settled:
        return Plan()  # nothing moved since a pass that changed nothing and told every job
    loaded = BOOK.loaded()
    waiting, was = loaded.waiting, loaded.standing
    decided = plan(
        loaded.queues,
        loaded.capacity,
        loaded.running,
        waiting,
        max_admit=MAX_ADMIT,
        nodes=loaded.nodes,
        orders=BOOK.orders,
        standing=standing,
        holdings=BOOK.holdings,
        told=BOOK.told,
    )
    BOOK.crowded = decided.left > 0
    # The book remembers what it writes, so the next pass need not read it back (10,000
    # waiting jobs' reasons: 15-19 ms of a pass, bench/admission.py); first it stamps the
    # standing as its own, so that another process does not trust what it remembers.
    standing = standing and wakeup.stamp_standing(BOOK.stamp)
    if standing:
        BOOK.wrote(None)  # until this pass has committed
    with transaction.atomic():  # one commit for the pass; each job in its own savepoint
        for job_id, reason in decided.preempt.items():
            if preempt(job_id, reason):
                report.touched_jobs.add(job_id)
        started = start_waiting(decided.admit, backend, borrowing=decided.borrow)
        report.admitted += len(started)
        started_ids = {job.id for job in started}
        report.touched_jobs |= started_ids
        report.started_jobs |= started_ids
        if standing:
            changed = {i: s for i, s in decided.waiting.items() if was.get(i) != s}
            Job.objects.set_standing(changed)
            # Their pages show the new reason and position: one message per queue that moved.
            report.touched_queues.update(BOOK.waiting[i].vc for i in changed)
    if standing:
        BOOK.wrote(decided.waiting)
    BOOK.settled = standing and not decided.admit and not decided.preempt  # once committed
    return decided
