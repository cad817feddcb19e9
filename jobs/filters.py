"""The one job filter of the job list page and ``GET /api/v2/jobs``, with OpenPAI's query
parameters: ``username``, ``vc``, ``state``, ``keyword``, ``tagsContain``, ``tagsNotContain``,
``jobPriority`` (each a comma-separated list where OpenPAI takes one) and ``order``
(``<field>[,ASC|DESC]``, or ``-<field>``/``+<field>``, with OpenPAI's field names).

A bad value is refused naming the parameter and the rule (the API answers 400; the page says
so and leaves that filter out). Names are turned into ids first (users, virtual clusters, a
keyword's users and virtual clusters): PostgreSQL plans with the number of rows it knows for an
id, and walks an index for a few ids where a join to a name makes it read every job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import django_filters
from django import forms
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Coalesce, Now

from clusters.demand import PRIORITY_CLASSES
from clusters.models import VirtualCluster
from jobs.models import Job
from jobs.states import JobState

MAX_LIST_ITEMS = 100
MAX_VALUE_CHARS = 1000


@dataclass(frozen=True)
class Order:
    """Columns to sort by, and whether the first goes down; ``id`` breaks ties."""

    columns: tuple[str, ...]
    descending: bool
    nulls: str = ""  # "first" or "last" for a column with nulls


# OpenPAI's order fields (its rest-server's and web portal's names), our older ones, and the
# page's: ``id`` is the order jobs were submitted in (by the primary key's index, where
# ``created_at``, without an index of its own, sorts every row) and ``duration``.
ORDER_FIELDS: dict[str, tuple[str, ...]] = {
    "submissionTime": ("created_at",),
    "createdTime": ("created_at",),
    "id": ("id",),
    "completionTime": ("completed_at",),
    "completedTime": ("completed_at",),
    "jobName": ("name",),
    "name": ("name",),
    "username": ("owner__username",),
    "vc": ("virtual_cluster__name",),
    "virtualCluster": ("virtual_cluster__name",),
    "state": ("state",),
    "retries": ("retries",),
    "totalTaskNumber": ("task_count",),
    "taskCount": ("task_count",),
    "totalGpuNumber": ("gpu_count",),
    "gpuCount": ("gpu_count",),
    "jobPriority": ("priority",),
    "duration": ("duration",),
}
NULLABLE = {"completed_at", "duration"}
DEFAULT_ORDER = Order(("id",), descending=True)


def comma_list(value: str, name: str) -> list[str]:
    if len(value) > MAX_VALUE_CHARS:
        raise forms.ValidationError(f"at most {MAX_VALUE_CHARS} characters")
    items = [item.strip() for item in value.split(",") if item.strip()]
    if len(items) > MAX_LIST_ITEMS:
        raise forms.ValidationError(f"at most {MAX_LIST_ITEMS} {name}, comma-separated")
    return items


class CommaListField(forms.CharField):
    """A comma-separated list; ``allowed`` (when given) says which items are known."""

    def __init__(self, *args: Any, allowed: tuple[str, ...] = (), what: str = "", **kw: Any):
        self.allowed = allowed
        self.what = what or "items"
        super().__init__(*args, **kw)

    def clean(self, value: Any) -> list[str] | None:
        text = super().clean(value)
        if not text:
            return None
        items = comma_list(text, self.what)
        unknown = [item for item in items if self.allowed and item not in self.allowed]
        if unknown:
            shown = unknown[0][:40]
            raise forms.ValidationError(
                f"unknown {self.what[:-1]} {shown!r}: one of {', '.join(self.allowed)}"
            )
        return items


class PriorityListField(CommaListField):
    """HiveD's priority class names (OpenPAI's ``jobPriority``) or integers."""

    def clean(self, value: Any) -> list[str] | None:
        items = super().clean(value)
        for item in items or []:
            if item not in PRIORITY_NAMES and not item.lstrip("-").isdigit():
                raise forms.ValidationError(
                    f"unknown priority {item[:40]!r}: one of {', '.join(PRIORITY_NAMES)} "
                    "or an integer"
                )
            if item.lstrip("-").isdigit() and len(item) > 10:
                raise forms.ValidationError(f"priority {item[:20]}...: at most 10 digits")
        return items


PRIORITY_NAMES = {**PRIORITY_CLASSES, "default": 0}


def parse_order(text: str) -> Order:
    """``field``, ``field,ASC``, ``field,DESC``, ``-field`` or ``+field`` (a ``+`` in a URL
    arrives as a space); times go newest first unless told otherwise, as OpenPAI's portal."""
    text = text.strip()
    sign = ""
    if text[:1] in "+-" and text:
        sign, text = text[0], text[1:]
    field, _, direction = text.partition(",")
    direction = direction.strip().upper()
    if field not in ORDER_FIELDS or direction not in ("", "ASC", "DESC") or (sign and direction):
        raise forms.ValidationError(
            "must be <field>[,ASC|DESC] or -<field>, with a field of " + ", ".join(ORDER_FIELDS)
        )
    if direction:
        descending = direction == "DESC"
    elif sign:
        descending = sign == "-"
    else:
        descending = field.endswith("Time")
    columns = ORDER_FIELDS[field]
    nullable = columns[0] in NULLABLE
    # OpenPAI's completionTime: ASC NULLS LAST, DESC NULLS FIRST (unfinished jobs are newest).
    nulls = ("first" if descending else "last") if nullable else ""
    if field == "duration":
        nulls = "last"
    return Order(columns, descending, nulls)


class OrderField(forms.CharField):
    def clean(self, value: Any) -> Order | None:
        text = super().clean(value)
        return parse_order(text) if text else None


class CommaFilter(django_filters.Filter):
    field_class = CommaListField


class PriorityFilter(django_filters.Filter):
    field_class = PriorityListField


class OrderFilter(django_filters.Filter):
    field_class = OrderField


def tagged(tag: str) -> Q:
    """Jobs carrying the tag (JSON containment on PostgreSQL, the JSON text elsewhere)."""
    if connection.vendor == "postgresql":
        return Q(tags__contains=[tag])
    return Q(tags__icontains=json.dumps(tag))


def any_tag(tags: list[str]) -> Q:
    found = Q(pk__in=[])
    for tag in tags:
        found |= tagged(tag)
    return found


class JobFilter(django_filters.FilterSet):
    """OpenPAI's job list query; ``order`` is applied last (``apply_order``)."""

    username = CommaFilter(method="by_username", what="users")
    vc = CommaFilter(method="by_vc", what="virtual clusters")
    state = CommaFilter(method="by_state", allowed=tuple(JobState.values), what="states")
    keyword = django_filters.CharFilter(method="by_keyword", max_length=100)
    tagsContain = CommaFilter(method="by_tags", what="tags")
    tagsNotContain = CommaFilter(method="without_tags", what="tags")
    # Ours before OpenPAI's tagsContain: one tag.
    tag = CommaFilter(method="by_tags", what="tags")
    jobPriority = PriorityFilter(method="by_priority", what="priorities")
    order = OrderFilter(method="keep_order")

    class Meta:
        model = Job
        fields: list[str] = []

    def by_username(self, jobs: QuerySet[Job], name: str, value: list[str]) -> QuerySet[Job]:
        ids = list(User.objects.filter(username__in=value).values_list("id", flat=True))
        return jobs.filter(owner_id__in=ids)

    def by_vc(self, jobs: QuerySet[Job], name: str, value: list[str]) -> QuerySet[Job]:
        ids = list(VirtualCluster.objects.filter(name__in=value).values_list("id", flat=True))
        return jobs.filter(virtual_cluster_id__in=ids)

    def by_state(self, jobs: QuerySet[Job], name: str, value: list[str]) -> QuerySet[Job]:
        return jobs.filter(state__in=value)

    def by_keyword(self, jobs: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        """OpenPAI's rule: part of the job's name, its user's or its virtual cluster's."""
        value = value.strip()
        if not value:
            return jobs
        users = list(User.objects.filter(username__icontains=value).values_list("id", flat=True))
        vcs = VirtualCluster.objects.filter(name__icontains=value).values_list("id", flat=True)
        match = Q(name__icontains=value)
        if users:
            match |= Q(owner_id__in=users)
        if vcs_found := list(vcs):
            match |= Q(virtual_cluster_id__in=vcs_found)
        return jobs.filter(match)

    def by_tags(self, jobs: QuerySet[Job], name: str, value: list[str]) -> QuerySet[Job]:
        return jobs.filter(any_tag(value))

    def without_tags(self, jobs: QuerySet[Job], name: str, value: list[str]) -> QuerySet[Job]:
        return jobs.exclude(any_tag(value))

    def by_priority(self, jobs: QuerySet[Job], name: str, value: list[str]) -> QuerySet[Job]:
        levels = [PRIORITY_NAMES[v] if v in PRIORITY_NAMES else int(v) for v in value]
        return jobs.filter(priority__in=levels)

    def keep_order(self, jobs: QuerySet[Job], name: str, value: Order) -> QuerySet[Job]:
        return jobs  # applied by ``ordered``, after every filter

    def chosen_order(self) -> Order:
        chosen = self.form.cleaned_data.get("order") if self.form.is_valid() else None
        return chosen or DEFAULT_ORDER

    def ordered(self) -> QuerySet[Job]:
        return apply_order(self.qs, self.chosen_order())


def apply_order(jobs: QuerySet[Job], order: Order) -> QuerySet[Job]:
    """NULLS FIRST/LAST only on columns with nulls: on a NOT NULL column it would stop
    PostgreSQL from walking the column's index and make it sort every row."""
    if "duration" in order.columns:
        jobs = jobs.annotate(duration=Coalesce("completed_at", Now()) - F("started_at"))
    terms = []
    for column in (*order.columns, "id") if order.columns[-1] != "id" else order.columns:
        nulls = order.nulls if column in NULLABLE else ""
        expression = F(column)
        if order.descending:
            terms.append(
                expression.desc(
                    nulls_first=nulls == "first" or None, nulls_last=nulls == "last" or None
                )
            )
        else:
            terms.append(
                expression.asc(
                    nulls_first=nulls == "first" or None, nulls_last=nulls == "last" or None
                )
            )
    return jobs.order_by(*terms)


def filter_errors(job_filter: JobFilter) -> dict[str, list[str]]:
    """``{parameter: [rule, ...]}`` of the values the filter refused."""
    if job_filter.is_valid():
        return {}
    return {name: [str(e) for e in errors] for name, errors in job_filter.errors.items()}


class PageForm(forms.Form):
    """The API list's page: ``offset``, ``limit`` (0: none of the jobs, with
    ``withTotalCount`` only their number) and ``withTotalCount``."""

    offset = forms.IntegerField(required=False, min_value=0, max_value=10**9)
    limit = forms.IntegerField(required=False, min_value=0, max_value=1000)
    withTotalCount = forms.ChoiceField(
        required=False, choices=[(v, v) for v in ("", "true", "false", "True", "False", "1", "0")]
    )
