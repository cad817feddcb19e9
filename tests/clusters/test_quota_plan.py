"""The pure admission logic: quotas, order, FIFO modes, reasons, positions, preemption."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from clusters import fairness
from clusters.demand import demand_of, options_of
from clusters.limits import Limit, exceeds, never_fits
from clusters.quota import Queue, Running, Waiting, plan
from clusters.resources import Resources

T0 = datetime(2024, 1, 1)
BIG = Limit(1000, 10**6, {"V100": 100, "A100": 100})


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def fixed(name: str, quota: Limit, **kw) -> Queue:
    """A VC that borrows nothing (max capacity 0%): what its guarantee alone admits."""
    return Queue(name, quota, max_capacity=0, **kw)


def no_borrowing(vc: str) -> str:
    return f", and '{vc}' may hold at most 0% of the cluster"


def job(i: int, vc: str = "research", cpu: int = 1, mem: int = 0, gpus=None, **kw) -> Waiting:
    return Waiting(i, vc, Resources(cpu, mem, gpus or {}), kw.pop("at", at(i)), **kw)


def test_jobs_are_admitted_while_cpu_quota_allows():
    result = plan([fixed("research", Limit(cpu=3))], BIG, [], [job(i, cpu=1) for i in range(5)])
    assert result.admit == [0, 1, 2]
    assert result.waiting[3] == (
        f"waiting for 1 CPU in 'research': 0 free{no_borrowing('research')}, no job ahead",
        1,
    )
    assert result.waiting[4][1] == 2


def test_memory_quota_is_enforced():
    result = plan(
        [fixed("r", Limit(memory_mb=1000))], BIG, [], [job(1, "r", 0, 600), job(2, "r", 0, 600)]
    )
    assert result.admit == [1]
    assert result.waiting[2][0].startswith("waiting for 600 MB memory in 'r': 400 free")


def test_gpu_quota_is_enforced_per_type():
    quota = Limit(gpus={"V100": 4, "A100": 2})
    jobs = [job(1, gpus={"V100": 3}), job(2, gpus={"A100": 2}), job(3, gpus={"V100": 2})]
    result = plan([fixed("research", quota)], BIG, [], jobs)
    assert result.admit == [1, 2]
    assert result.waiting[3] == (
        f"waiting for 2 GPU (V100) in 'research': 1 free{no_borrowing('research')}, no job ahead",
        1,
    )


def test_gpus_of_no_type_use_any_type_but_not_more_than_all_types_together():
    quota = Limit(gpus={"V100": 2, "A100": 2})
    result = plan([fixed("research", quota)], BIG, [], [job(1, gpus={"": 3}), job(2, gpus={"": 2})])
    assert result.admit == [1]
    assert result.waiting[2][0].startswith("waiting for 2 GPU in 'research': 1 free")


def test_a_gpu_type_missing_from_the_quota_has_none():
    result = plan([fixed("research", Limit(gpus={"V100": 8}))], BIG, [], [job(1, gpus={"K80": 1})])
    assert result.admit == []
    assert "1 GPU (K80) in 'research': 0 free" in result.waiting[1][0]


def test_running_jobs_count_against_the_quota():
    running = [Running(9, "research", Resources(2, 0, {"V100": 3}), at(0))]
    result = plan(
        [fixed("research", Limit(gpus={"V100": 4}))], BIG, running, [job(1, gpus={"V100": 2})]
    )
    assert result.admit == []
    assert result.waiting[1][0] == (
        f"waiting for 2 GPU (V100) in 'research': 1 free{no_borrowing('research')}, no job ahead"
    )


def test_quotas_are_per_virtual_cluster():
    queues = [fixed("a", Limit(cpu=1)), fixed("b", Limit(cpu=2))]
    jobs = [job(1, "a"), job(2, "a"), job(3, "b"), job(4, "b"), job(5, "b")]
    result = plan(queues, BIG, [], jobs)
    assert sorted(result.admit) == [1, 3, 4]
    assert result.waiting[2][1] == 1 and result.waiting[5][1] == 1


def test_many_jobs_never_exceed_any_resource_of_the_quota():
    quota = Limit(cpu=40, memory_mb=64_000, gpus={"V100": 16, "A100": 8})
    kinds = ["V100", "A100", ""]
    jobs = [
        job(i, cpu=1 + i % 5, mem=1000 * (i % 7), gpus={kinds[i % 3]: i % 4}) for i in range(300)
    ]
    result = plan([fixed("research", quota)], BIG, [], jobs)
    used = Resources()
    for j in jobs:
        if j.id in result.admit:
            used = used + j.demand
    assert not exceeds(used, quota)
    assert len(result.admit) + len(result.waiting) == 300


def test_higher_priority_goes_first_then_submission_time():
    jobs = [job(1), job(2, priority=10), job(3, priority=10, at=at(-5)), job(4)]
    result = plan([fixed("research", Limit(cpu=2))], BIG, [], jobs)
    assert result.admit == [3, 2]
    assert result.waiting[1][1] == 1 and result.waiting[4][1] == 2
    assert result.waiting[4][0].endswith("1 job ahead")


def test_best_effort_fifo_lets_smaller_jobs_pass_a_big_one():
    jobs = [job(1, cpu=1), job(2, cpu=8), job(3, cpu=1)]
    result = plan([fixed("research", Limit(cpu=3))], BIG, [], jobs)
    assert result.admit == [1, 3]
    assert result.waiting[2] == (
        f"waiting for 8 CPU in 'research': 1 free{no_borrowing('research')}, no job ahead",
        1,
    )


def test_strict_fifo_holds_everything_behind_a_job_that_does_not_fit():
    jobs = [job(1, cpu=1), job(2, cpu=8), job(3, cpu=1), job(4, cpu=1)]
    result = plan([fixed("research", Limit(cpu=3), strict_fifo=True)], BIG, [], jobs)
    assert result.admit == [1]
    assert result.waiting[3][0] == "behind job 2 (strict FIFO), 1 job ahead"
    assert result.waiting[4] == ("behind job 2 (strict FIFO), 2 jobs ahead", 3)


def test_the_reason_names_the_blocking_job_by_its_label():
    jobs = [job(1, cpu=8, label="alice~big"), job(2)]
    result = plan([fixed("research", Limit(cpu=3), strict_fifo=True)], BIG, [], jobs)
    assert result.waiting[2][0].startswith("behind alice~big (strict FIFO)")


def test_an_unlimited_virtual_cluster_admits_everything_up_to_the_pass_limit():
    result = plan(
        [Queue("default", Limit())],
        BIG,
        [],
        [job(i, "default", 100) for i in range(5)],
        max_admit=3,
    )
    assert result.admit == [0, 1, 2]
    assert result.waiting[3] == ("fits; starts in the next pass, no job ahead", 1)


def test_an_unlimited_virtual_cluster_is_still_bounded_by_the_clusters_free_capacity():
    cap = Limit(100, 10**6, {"V100": 4})
    running = [Running(9, "research", Resources(1, 0, {"V100": 4}), at(0))]
    queues = [Queue("default", Limit()), Queue("research", Limit(gpus={"V100": 4}))]
    result = plan(queues, cap, running, [job(1, "default", gpus={"V100": 2}), job(2, "default")])
    assert result.admit == [2]
    # research guarantees every V100: default's share of them is 0, and none is idle to borrow
    assert result.waiting[1] == (
        "waiting for 2 GPU (V100) in 'default': 0 free, not enough idle room to borrow, "
        "no job ahead",
        1,
    )


def test_gpus_of_any_type_wait_for_free_gpus_of_every_type_together():
    cap = Limit(100, 10**6, {"V100": 2, "A100": 1})
    running = [Running(9, "other", Resources(1, 0, {"V100": 2}), at(0))]
    result = plan([Queue("default", Limit())], cap, running, [job(1, "default", gpus={"": 2})])
    assert result.waiting[1][0] == (
        "waiting for 2 GPU in 'default': 1 free, not enough idle room to borrow, no job ahead"
    )


def test_beyond_its_guarantee_a_job_is_told_whether_idle_room_is_there_not_how_much():
    cap = Limit(8, 10**6, {"V100": 3})
    running = [Running(9, "b", Resources(1, 0, {"V100": 2}), at(0))]
    queues = [Queue("a", Limit(cpu=1, gpus={})), Queue("b", Limit(cpu=1, gpus={"V100": 3}))]
    waiting = [job(1, "a", cpu=2, gpus={"V100": 2})]
    # a lacks a CPU of its guarantee; the cluster has 1 of the 2 GPUs idle
    told = "waiting for 2 CPU in 'a': 1 free, not enough idle room to borrow, no job ahead"
    assert plan(queues, cap, running, waiting).waiting[1][0] == told
    # how much is idle moves with every job anywhere (none now): what the job is told does not
    more = [Running(10, "b", Resources(1, 0, {"V100": 1}), at(0)), *running]
    assert plan(queues, cap, more, waiting).waiting[1][0] == told


def test_a_job_short_of_cluster_capacity_holds_back_a_strict_fifo_queue():
    cap = Limit(4, 10**6, {})
    running = [Running(9, "other", Resources(3), at(0))]
    queues = [Queue("research", Limit(), strict_fifo=True)]
    result = plan(queues, cap, running, [job(1, cpu=2, label="alice~big"), job(2, cpu=1)])
    assert result.admit == []
    assert result.waiting[1][0] == (
        "waiting for 2 CPU in 'research': 1 free, not enough idle room to borrow, no job ahead"
    )
    assert result.waiting[2][0] == "behind alice~big (strict FIFO), 1 job ahead"


def test_capacity_held_by_borrowers_counts_as_free_for_a_guaranteed_job():
    cap = Limit(4, 10**6, {})
    running = [Running(7, "a", Resources(4), at(1), borrowing=True)]
    queues = [Queue("a", Limit(cpu=0)), Queue("b", Limit())]
    result = plan(queues, cap, running, [job(1, "b", cpu=2)])
    assert result.admit == [1] and list(result.preempt) == [7]


def test_an_opportunistic_job_borrows_idle_capacity_beyond_its_quota():
    queues = [Queue("a", Limit(gpus={"V100": 1})), Queue("b", Limit(gpus={"V100": 3}))]
    cap = Limit(100, 10**6, {"V100": 4})
    result = plan(queues, cap, [], [job(1, "a", gpus={"V100": 3}, opportunistic=True)])
    assert result.admit == [1] and result.borrow == {1}


def test_an_opportunistic_job_that_fits_its_own_quota_is_guaranteed():
    result = plan([Queue("a", Limit(cpu=2))], BIG, [], [job(1, "a", opportunistic=True)])
    assert result.admit == [1] and result.borrow == set()


def test_borrowing_is_limited_by_the_idle_capacity():
    cap = Limit(4, 10**6, {})
    running = [Running(7, "b", Resources(3), at(0))]
    result = plan(
        [Queue("a", Limit(cpu=1)), Queue("b", Limit(cpu=3))],
        cap,
        running,
        [job(1, "a", cpu=2, opportunistic=True)],
    )
    assert result.admit == []
    assert (
        result.waiting[1][0]
        == "waiting for 2 CPU in 'a': 1 free, not enough idle room to borrow, no job ahead"
    )


def test_a_guaranteed_job_preempts_borrowers_newest_and_lowest_priority_first():
    cap = Limit(4, 10**6, {})
    running = [
        Running(7, "a", Resources(1), at(1), borrowing=True),
        Running(8, "a", Resources(1), at(2), borrowing=True),
        Running(9, "a", Resources(1), at(3), priority=5, borrowing=True),
        Running(6, "a", Resources(1), at(0)),
    ]
    queues = [Queue("a", Limit(cpu=1)), Queue("b", Limit(cpu=3))]
    result = plan(queues, cap, running, [job(1, "b", cpu=2)])
    assert result.admit == [1]
    assert list(result.preempt) == [8, 7]
    assert result.preempt[8] == "preempted: 'b' needed its quota back; waiting to run again"


def test_only_borrowers_holding_the_missing_resource_are_preempted():
    cap = Limit(4, 10**6, {"V100": 4})
    running = [
        Running(7, "a", Resources(0, 0, {"V100": 4}), at(2), borrowing=True),  # GPUs only
        Running(8, "a", Resources(3), at(1), borrowing=True),
    ]
    queues = [Queue("a", Limit(cpu=0, gpus={})), Queue("b", Limit(cpu=4))]
    result = plan(queues, cap, running, [job(1, "b", cpu=2)])
    assert result.admit == [1]
    assert list(result.preempt) == [8]


def test_no_more_borrowers_are_preempted_than_needed():
    cap = Limit(4, 10**6, {})
    running = [
        Running(7, "a", Resources(1), at(2), borrowing=True),  # newest: tried first
        Running(8, "a", Resources(3), at(1), borrowing=True),
    ]
    queues = [Queue("a", Limit(cpu=0)), Queue("b", Limit(cpu=4))]
    result = plan(queues, cap, running, [job(1, "b", cpu=3)])
    assert result.admit == [1]
    assert list(result.preempt) == [8]  # taking 7 as well would free more than is missing


def test_room_a_preempted_borrower_held_beyond_the_need_is_borrowed_in_the_same_pass():
    # b's 4-CPU borrower is preempted for a's 2-CPU job; b's 2-CPU job borrows the other 2
    # at once: the preempted borrower no longer counts against b's max capacity
    cap = Limit(4, 10**6, {})
    running = [Running(7, "b", Resources(4), at(0), borrowing=True)]
    queues = [Queue("a", Limit(cpu=2)), Queue("b", Limit(cpu=0))]
    result = plan(queues, cap, running, [job(1, "a", cpu=2), job(2, "b", cpu=2)])
    assert list(result.preempt) == [7]
    assert result.admit == [1, 2] and result.borrow == {2}


def test_a_borrower_of_another_gpu_type_is_not_preempted():
    cap = Limit(100, 10**6, {"V100": 2, "A100": 2})
    running = [
        Running(7, "a", Resources(1, 0, {"A100": 2}), at(2), borrowing=True),
        Running(8, "a", Resources(1, 0, {"V100": 2}), at(1), borrowing=True),
    ]
    queues = [Queue("a", Limit(gpus={})), Queue("b", Limit(gpus={"V100": 2}))]
    result = plan(queues, cap, running, [job(1, "b", gpus={"V100": 1})])
    assert list(result.preempt) == [8]


def test_the_head_of_a_strict_fifo_queue_may_borrow_and_the_rest_wait_behind_it():
    queues = [Queue("a", Limit(cpu=1), strict_fifo=True), Queue("b", Limit(cpu=3))]
    cap = Limit(4, 10**6, {})
    jobs = [job(1, "a", cpu=3, opportunistic=True, label="alice~big"), job(2, "a", cpu=1)]
    result = plan(queues, cap, [], jobs)
    assert result.admit == [1] and result.borrow == {1}
    assert result.waiting[2] == ("behind alice~big (strict FIFO), no job ahead", 1)


def test_an_opportunistic_job_is_told_idle_capacity_only_when_it_truly_starts_next_pass():
    queues = [Queue("a", Limit(cpu=1), strict_fifo=True), Queue("b", Limit(cpu=3))]
    cap = Limit(4, 10**6, {})
    jobs = [job(1, "b", cpu=1), job(2, "a", cpu=3, opportunistic=True)]
    result = plan(queues, cap, [], jobs, max_admit=1)
    assert result.admit == [1]
    assert result.waiting[2][0] == (
        "waiting for 3 CPU in 'a': 1 free, idle to borrow next pass, no job ahead"
    )
    assert plan(queues, cap, [], jobs).borrow == {2}


def test_guaranteed_jobs_are_never_preempted():
    cap = Limit(2, 10**6, {})
    running = [Running(6, "a", Resources(2), at(0))]
    queues = [Queue("a", Limit(cpu=2)), Queue("b", Limit(cpu=2))]
    result = plan(
        queues, cap, running, [job(1, "b", cpu=2), job(2, "b", cpu=1, opportunistic=True)]
    )
    assert result.preempt == {}


def test_no_preemption_when_the_cluster_has_room():
    cap = Limit(10, 10**6, {})
    running = [Running(7, "a", Resources(3), at(1), borrowing=True)]
    result = plan(
        [Queue("a", Limit(cpu=1)), Queue("b", Limit(cpu=3))], cap, running, [job(1, "b", cpu=3)]
    )
    assert result.admit == [1] and result.preempt == {}


def test_a_preempted_job_says_so_while_it_waits_again():
    result = plan([fixed("a", Limit(cpu=0))], BIG, [], [job(1, "a", preempted=True)])
    assert result.waiting[1][0].startswith("preempted earlier; waiting for 1 CPU in 'a'")


def test_never_fits_says_by_how_much():
    short = never_fits(Resources(2, 0, {"V100": 6}), Limit(8, None, {"V100": 4}))
    assert [(s.what, s.need, s.free) for s in short] == [("GPU (V100)", 6, 4)]
    assert never_fits(Resources(2), Limit()) == []


def test_never_fits_names_every_resource_short_not_only_the_first():
    short = never_fits(Resources(4, 8192, {"": 1}), Limit(2, 4096, {}))
    assert [(s.what, s.need, s.free) for s in short] == [
        ("CPU", 4, 2),
        ("MB memory", 8192, 4096),
        ("GPU", 1, 0),
    ]


def v2(roles: dict, extras: dict | None = None) -> dict:
    return {"taskRoles": roles, "extras": extras or {}}


def role(n: int, cpu: int, mem: int, gpu: int) -> dict:
    return {"instances": n, "resourcePerInstance": {"cpu": cpu, "memoryMB": mem, "gpu": gpu}}


def test_demand_sums_every_instance_and_reads_the_gpu_types():
    protocol = v2(
        {"ps": role(1, 2, 100, 0), "worker": role(3, 1, 50, 2)},
        {"hivedscheduler": {"taskRoles": {"worker": {"gpuType": "V100"}}}},
    )
    assert demand_of(protocol) == Resources(5, 250, {"V100": 6})


def test_a_v1_job_gives_one_gpu_type_for_every_role():
    protocol = v2({"a": role(2, 1, 10, 1), "b": role(1, 1, 10, 2)}, {"v1": {"gpuType": "K80"}})
    assert demand_of(protocol).gpus == {"K80": 4}


def test_priority_and_opportunism_come_from_extras():
    assert options_of({}) == (0, False)
    assert options_of({"extras": {"priority": 7, "opportunistic": True}}) == (7, True)
    assert options_of({"extras": {"hivedscheduler": {"jobPriorityClass": "oppo"}}}) == (-1, True)
    assert options_of({"extras": {"hivedscheduler": {"jobPriorityClass": "prod"}}}) == (100, False)


@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.booleans()), max_size=40),
    st.integers(0, 10),
    st.booleans(),
)
def test_every_waiting_job_is_admitted_or_has_a_reason_and_a_distinct_position(specs, cpus, strict):
    jobs = [job(i, cpu=c, gpus={"V100": g}, opportunistic=o) for i, (c, g, o) in enumerate(specs)]
    quota = Limit(cpus, None, {"V100": 3})
    result = plan([Queue("research", quota, strict)], Limit(12, 10**6, {"V100": 5}), [], jobs)
    assert set(result.admit) | set(result.waiting) == {j.id for j in jobs}
    assert not set(result.admit) & set(result.waiting)
    positions = sorted(p for _, p in result.waiting.values())
    assert positions == list(range(1, len(positions) + 1))
    assert result.left == len(result.waiting)
    # A wake-up that writes no standing decides the same, and only counts who is left.
    untold = plan(
        [Queue("research", quota, strict)], Limit(12, 10**6, {"V100": 5}), [], jobs, standing=False
    )
    assert (untold.admit, untold.borrow, untold.waiting) == (result.admit, result.borrow, {})
    assert untold.left == result.left
    guaranteed, everything = Resources(), Resources()
    for j in jobs:
        if j.id in result.admit:
            everything = everything + j.demand
        if j.id in result.admit and j.id not in result.borrow:
            guaranteed = guaranteed + j.demand
    assert not exceeds(guaranteed, quota)
    assert not exceeds(everything, Limit(12, 10**6, {"V100": 5}))


# -- guarantees that add up, borrowing and reclaim (issue 27) ----------------------------------


def test_a_vc_without_a_quota_is_guaranteed_only_what_no_other_vc_guarantees():
    """VC research guarantees 1 CPU of 2; default (no quota) filled the cluster with two 1-CPU
    jobs: the first within default's share (2 - 1), the second borrowing. A research job is
    admitted at once, and the borrower is preempted to make room."""
    cap = Limit(2, 10**6, {})
    queues = [Queue("default", Limit()), Queue("research", Limit(cpu=1))]
    running = [
        Running(1, "default", Resources(1), at(0)),
        Running(2, "default", Resources(1), at(1), borrowing=True),
    ]
    result = plan(queues, cap, running, [job(3, "research", cpu=1)])
    assert result.admit == [3] and result.borrow == set()
    assert list(result.preempt) == [2]


def test_default_fills_the_cluster_by_borrowing_beyond_its_share():
    cap = Limit(2, 10**6, {})
    queues = [Queue("default", Limit()), Queue("research", Limit(cpu=1))]
    result = plan(queues, cap, [], [job(1, "default"), job(2, "default"), job(3, "default")])
    assert result.admit == [1, 2] and result.borrow == {2}  # the second borrows research's CPU
    assert result.waiting[3][0] == (
        "waiting for 1 CPU in 'default': 0 free, not enough idle room to borrow, no job ahead"
    )


def test_a_job_beyond_its_guarantee_borrows_idle_capacity_whatever_its_priority_class():
    queues = [Queue("a", Limit(cpu=1)), Queue("b", Limit(cpu=3))]
    result = plan(queues, Limit(4, 10**6, {}), [], [job(1, "a", cpu=3)])
    assert result.admit == [1] and result.borrow == {1}


def test_max_capacity_caps_what_a_vc_may_borrow():
    queues = [Queue("a", Limit(cpu=1), max_capacity=50), Queue("b", Limit(cpu=3))]
    cap = Limit(4, 10**6, {})
    result = plan(queues, cap, [], [job(1, "a"), job(2, "a"), job(3, "a")])
    assert result.admit == [1, 2] and result.borrow == {2}  # 2 of 4 CPUs: 50%
    assert result.waiting[3][0] == (
        "waiting for 1 CPU in 'a': 0 free, and 'a' may hold at most 50% of the cluster, "
        "no job ahead"
    )


@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3)), max_size=30),
)
def test_guaranteed_jobs_never_exceed_their_vcs_guarantee_nor_the_cluster(quotas, jobs):
    """Whatever the quotas (the last VC has none) and the jobs, what a pass guarantees fits
    each VC's guarantee, their sum fits the cluster, and borrowers fit the idle rest."""
    cap = Limit(sum(quotas) + 2, 10**6, {})
    names = [f"vc{i}" for i in range(len(quotas))]
    queues = [Queue(n, Limit(cpu=q)) for n, q in zip(names[:-1], quotas, strict=False)]
    queues.append(Queue(names[-1], Limit()))
    waiting = [job(i, names[v % len(names)], cpu=c) for i, (v, c) in enumerate(jobs)]
    result = plan(queues, cap, [], waiting)
    by_id = {w.id: w for w in waiting}
    guaranteed: dict[str, int] = {}
    total = 0
    for i in result.admit:
        total += by_id[i].demand.cpu
        if i not in result.borrow:
            guaranteed[by_id[i].vc] = guaranteed.get(by_id[i].vc, 0) + by_id[i].demand.cpu
    assert total <= cap.cpu
    for queue in queues[:-1]:
        assert guaranteed.get(queue.name, 0) <= queue.quota.cpu
    assert sum(guaranteed.values()) <= cap.cpu
    rest = cap.cpu - sum(q.quota.cpu or 0 for q in queues[:-1])
    assert guaranteed.get(names[-1], 0) <= max(rest, 0)


# -- fairness among a VC's users: dominant resource fairness ------------------------------------


def test_one_users_many_jobs_take_turns_with_anothers_one():
    many = [job(i, user="ann", at=at(i)) for i in range(10)]
    late = job(99, user="bob", at=at(50))
    result = plan([fixed("research", Limit(cpu=3))], BIG, [], [*many, late])
    assert result.admit == [0, 99, 1]  # ann's first, then bob (he holds least), then ann again
    assert result.waiting[2][1] == 1


def test_a_user_already_running_much_goes_after_one_running_nothing():
    running = [Running(50 + i, "research", Resources(1), at(0), user="ann") for i in range(2)]
    waiting = [job(1, user="ann", at=at(1)), job(2, user="bob", at=at(2))]
    result = plan([fixed("research", Limit(cpu=3))], BIG, running, waiting)
    assert result.admit == [2]
    assert result.waiting[1] == (
        f"waiting for 1 CPU in 'research': 0 free{no_borrowing('research')}, no job ahead",
        1,
    )


def test_the_dominant_resource_decides_whose_turn_it_is():
    # ann runs 1 GPU of 100 (1%) but bob 500 of 1000 CPUs (50%): ann's share is smaller
    running = [
        Running(50, "research", Resources(1, 0, {"V100": 1}), at(0), user="ann"),
        Running(51, "research", Resources(500), at(0), user="bob"),
    ]
    waiting = [job(1, user="bob", at=at(1)), job(2, user="ann", at=at(2))]
    result = plan([fixed("research", Limit(cpu=502))], BIG, running, waiting)
    assert result.admit == [2]


def test_priority_orders_before_fairness():
    waiting = [job(1, user="ann", at=at(1)), job(2, user="ann", at=at(2), priority=5)]
    waiting.append(job(3, user="bob", at=at(3)))
    result = plan([fixed("research", Limit(cpu=2))], BIG, [], waiting)
    assert result.admit == [2, 3]  # ann's high-priority job first, then bob's (ann holds 1)


def test_a_queue_is_ordered_again_only_when_its_jobs_or_users_holdings_moved(monkeypatch):
    calls: list[str] = []
    real = fairness.fair_order

    def counted(jobs, held, capacity):
        calls.append(jobs[0].vc)
        return real(jobs, held, capacity)

    monkeypatch.setattr(fairness, "fair_order", counted)
    queues = [fixed("a", Limit(cpu=1)), fixed("b", Limit(cpu=1))]
    who = [("a", "ann"), ("a", "bob"), ("a", "ann"), ("b", "ann"), ("b", "bob")]
    waiting = [job(i, vc, user=user) for i, (vc, user) in enumerate(who)]
    orders: dict = {}  # kept from pass to pass, as jobs.lifecycle.book keeps it
    first = plan(queues, BIG, [], waiting, orders=orders)
    assert sorted(calls) == ["a", "b"] and first.admit == [0, 3]

    started = [waiting[i] for i in first.admit]
    running = [Running(w.id, w.vc, w.demand, w.created_at, user=w.user) for w in started]
    still = [w for w in waiting if w.id not in first.admit]
    calls.clear()
    second = plan(queues, BIG, running, still, orders=orders)
    assert sorted(calls) == ["a", "b"]  # each queue lost its head: ordered again
    assert second == plan(queues, BIG, running, still)

    calls.clear()
    assert plan(queues, BIG, running, still, orders=orders) == second
    assert calls == []  # nothing moved: the orders kept

    a_ended = [r for r in running if r.vc == "b"]
    calls.clear()
    fourth = plan(queues, BIG, a_ended, still, orders=orders)
    assert calls == ["a"]  # what ann holds in 'a' moved; 'b' kept its order
    assert fourth == plan(queues, BIG, a_ended, still)


def test_a_queue_is_told_where_its_jobs_stand_again_only_when_it_moved():
    queues = [fixed("a", Limit(cpu=1)), fixed("b", Limit(cpu=1))]
    waiting = [job(i, vc) for i, vc in enumerate(["a", "a", "a", "b", "b", "b"])]
    running = [Running(w.id, w.vc, w.demand, w.created_at) for w in (waiting[0], waiting[3])]
    waiting = [w for w in waiting if w.id not in (0, 3)]
    orders: dict = {}
    told: dict = {}  # kept from pass to pass, as jobs.lifecycle.book keeps it
    assert plan(queues, BIG, running, waiting, orders=orders, told=told).admit == []
    kept = {vc: told[vc][3] for vc in "ab"}

    running = running[1:]  # a's job ended: a moves, b does not
    second = plan(queues, BIG, running, waiting, orders=orders, told=told)
    assert second.admit == [1]
    assert second == plan(queues, BIG, running, waiting)
    assert told["a"][3] is not kept["a"]  # a's jobs told again
    assert told["b"][3] is kept["b"]  # what b's were told stands

    running = [Running(1, "a", Resources(1), at(1)), *running]  # a's admitted job runs
    waiting = [w for w in waiting if w.id != 1]
    assert plan(queues, BIG, running, waiting, orders=orders, told=told).admit == []
    kept["a"] = told["a"][3]
    running = running[:1]  # b's job ended: b moves, a does not
    fourth = plan(queues, BIG, running, waiting, orders=orders, told=told)
    assert fourth.admit == [4]
    assert fourth == plan(queues, BIG, running, waiting)
    assert told["a"][3] is kept["a"]
    assert fourth.waiting[5] == (
        f"waiting for 1 CPU in 'b': 0 free{no_borrowing('b')}, no job ahead",
        1,
    )
