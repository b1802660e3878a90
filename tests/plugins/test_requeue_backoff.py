"""requeue-backoff: exponential delays, cluster exclusion that never strands a job, giving up."""

from __future__ import annotations

import pytest

from engine.core.state import FleetState
from engine.errors import InputError
from engine.model import Failure, FailureKind, JobState
from plugins.gang import Gang
from plugins.requeue_backoff import RequeueBackoff

from tests.plugins._fleet import cluster, engine, job, task


def fleet(*names: str) -> FleetState:
    s = FleetState()
    for name in names:
        s.upsert_cluster(cluster(name, cpu="8"))
    return s


def test_delays_grow_exponentially_up_to_the_cap() -> None:
    p = RequeueBackoff({"initialDelay": "10s", "factor": 3, "maxDelay": "1m", "maxAttempts": 10}, None)
    j = job("j", task("w", 1, cpu="1"))
    assert [p.delay(j, n) for n in range(1, 6)] == [10, 30, 60, 60, 60]


def test_defaults() -> None:
    p = RequeueBackoff({}, None)
    assert (p.initial, p.factor, p.maximum, p.max_attempts, p.exclude) == (10, 2, 600, 5, True)


def test_seeded_jitter_is_deterministic_and_bounded() -> None:
    a = RequeueBackoff({"jitter": 0.5, "seed": 7}, None)
    b = RequeueBackoff({"jitter": 0.5, "seed": 7}, None)
    c = RequeueBackoff({"jitter": 0.5, "seed": 8}, None)
    jobs = [job(f"j{i}", task("w", 1)) for i in range(20)]
    delays = [a.delay(j, 2) for j in jobs]
    assert delays == [b.delay(j, 2) for j in jobs]
    assert delays != [c.delay(j, 2) for j in jobs]
    assert all(20 <= d <= 30 for d in delays) and len(set(delays)) > 1


def test_requeue_excludes_the_failed_cluster_and_gives_up_after_max_attempts() -> None:
    g = Gang({}, None)
    r = RequeueBackoff({"maxAttempts": 3}, None)
    e = engine({"admit": [g], "place": [g], "recover": [r]}, [cluster("a", cpu="8"), cluster("b", cpu="8"),
                                                             cluster("c", cpu="8")])
    e.submit(job("j", task("w", 2, cpu="2")))
    now = 0.0
    seen = []
    for attempt in range(1, 4):
        result = e.cycle(now)
        assert [a.job_id for a in result.admitted] == ["j"]
        where = next(iter(result.admitted[0].placement))
        seen.append(where)
        recovery = e.fail("j", Failure(FailureKind.JOB_FAILED, where, "OOMKilled"), now)
        if attempt < 3:
            assert recovery.requeue and recovery.delay == 10 * 2 ** (attempt - 1)
            assert f"retry {attempt + 1} of 3" in recovery.reason
            assert e.cycle(now + recovery.delay - 1).admitted == []          # still backing off
            now += recovery.delay
        else:
            assert not recovery.requeue
            assert recovery.reason == "gave up after 3 attempt(s) (maxAttempts 3); last failure: JobFailed on c: OOMKilled"
    assert seen == ["a", "b", "c"]
    assert e.state.jobs["j"].state is JobState.FAILED


def test_exclusions_are_cleared_rather_than_leaving_no_cluster() -> None:
    r = RequeueBackoff({"maxAttempts": 10}, None)
    s = fleet("a", "b")
    j = job("j", task("w", 1, cpu="1"))
    j.attempts = 1
    first = r.atoll_recover(j, Failure(FailureKind.CLUSTER_LOST, "a"), s, 0)
    assert first is not None and first.exclude_clusters == {"a"}
    j.excluded_clusters |= first.exclude_clusters
    j.attempts = 2
    second = r.atoll_recover(j, Failure(FailureKind.JOB_FAILED, "b"), s, 0)
    assert second is not None and second.exclude_clusters == {"b"} and j.excluded_clusters == set()


def test_the_only_capable_cluster_is_never_excluded() -> None:
    r = RequeueBackoff({}, None)
    s = fleet("a")
    s.upsert_cluster(cluster("small", cpu="1"))
    j = job("j", task("w", 2, cpu="2"))          # only "a" can ever hold it
    j.attempts = 1
    recovery = r.atoll_recover(j, Failure(FailureKind.JOB_FAILED, "a"), s, 0)
    assert recovery is not None and recovery.requeue and recovery.exclude_clusters == frozenset()


def test_exclusion_only_for_configured_kinds() -> None:
    s = fleet("a", "b")
    j = job("j", task("w", 1, cpu="1"))
    j.attempts = 1
    deadline = RequeueBackoff({}, None).atoll_recover(j, Failure(FailureKind.DEADLINE, "a"), s, 0)
    assert deadline is not None and deadline.exclude_clusters == frozenset()
    off = RequeueBackoff({"excludeFailedCluster": False}, None).atoll_recover(
        j, Failure(FailureKind.CLUSTER_LOST, "a"), s, 0)
    assert off is not None and off.exclude_clusters == frozenset()


def test_bad_durations_are_input_errors() -> None:
    with pytest.raises(InputError) as info:
        RequeueBackoff({"initialDelay": "ten seconds"}, None, "p.yaml: spec.plugins.requeue-backoff")
    assert "initialDelay" in str(info.value)
    assert RequeueBackoff({"initialDelay": "1m30s", "maxDelay": 3600}, None).initial == 90


def test_unschedulable_and_lost_clusters_do_not_count_towards_max_attempts() -> None:
    """A member that has no node for the pods yet (or goes away) is not the job's fault: by default the job
    is requeued for as long as it takes; only the giveUpOn kinds (JobFailed, DeadlineExceeded) count."""
    g = Gang({}, None)
    r = RequeueBackoff({"maxAttempts": 2, "maxDelay": "20s"}, None)
    e = engine({"admit": [g], "place": [g], "recover": [r]}, [cluster("a", cpu="8"), cluster("b", cpu="8")])
    e.submit(job("j", task("w", 2, cpu="2")))
    now = 0.0
    for kind in [FailureKind.UNSCHEDULABLE, FailureKind.CLUSTER_LOST] * 3:
        result = e.cycle(now)
        assert [a.job_id for a in result.admitted] == ["j"]
        where = next(iter(result.admitted[0].placement))
        recovery = e.fail("j", Failure(kind, where, "pods unschedulable"), now)
        assert recovery.requeue, recovery.reason
        assert f"retry ({kind.value} does not count towards maxAttempts 2) after" in recovery.reason
        now += recovery.delay
    assert e.state.jobs["j"].failures == {"Unschedulable": 3, "ClusterLost": 3}
    result = e.cycle(now)
    recovery = e.fail("j", Failure(FailureKind.JOB_FAILED, next(iter(result.admitted[0].placement)), "OOMKilled"), now)
    assert recovery.requeue and "JobFailed on" in recovery.reason and "retry 2 of 2" in recovery.reason
    now += recovery.delay
    result = e.cycle(now)
    recovery = e.fail("j", Failure(FailureKind.DEADLINE, next(iter(result.admitted[0].placement))), now)
    assert not recovery.requeue
    assert recovery.reason.startswith("gave up after 8 attempt(s) (maxAttempts 2); last failure: DeadlineExceeded")
    assert e.state.jobs["j"].state is JobState.FAILED


def test_give_up_on_every_kind_when_configured() -> None:
    r = RequeueBackoff({"maxAttempts": 1, "giveUpOn": ["Unschedulable"]}, None)
    e = engine({"recover": [r]}, [cluster("a", cpu="8")])
    e.submit(job("j", task("w", 1, cpu="1")))
    e.cycle(0.0)
    recovery = e.fail("j", Failure(FailureKind.UNSCHEDULABLE, "a"), 0.0)
    assert not recovery.requeue and "gave up after 1 attempt(s)" in recovery.reason
    with pytest.raises(InputError) as info:
        RequeueBackoff({"giveUpOn": ["Sometimes"]}, None, "p.yaml: spec.plugins.requeue-backoff")
    assert "giveUpOn" in str(info.value)


def test_a_duration_too_long_for_a_float_is_refused_not_infinite() -> None:
    """310 digits of 9 overflowed to inf and passed: a victim was then 'held until t=inf'."""
    import pytest

    from engine.errors import InputError
    from plugins._placeutil import parse_duration

    for value in ("9" * 400 + "s", int("9" * 400)):
        with pytest.raises(InputError, match="is not a finite number of seconds"):
            parse_duration(value, "p.yaml: spec.plugins.x.gracePeriod")
    assert parse_duration("1h30m", "w") == 5400.0 and parse_duration(2.5, "w") == 2.5


def test_a_max_delay_below_the_initial_delay_is_refused_with_its_field() -> None:
    """Every delay would be maxDelay: a typo (5s for 5m), not a policy. The schema cannot compare two durations."""
    import pytest

    from engine.errors import InputError
    from plugins.requeue_backoff import RequeueBackoff

    with pytest.raises(InputError, match="maxDelay '5s' is below initialDelay '10s'") as exc:
        RequeueBackoff({"initialDelay": "10s", "maxDelay": "5s"}, None)
    assert exc.value.where == "spec.plugins.requeue-backoff.maxDelay"
    assert RequeueBackoff({"initialDelay": "10s", "maxDelay": "10s"}, None).maximum == 10.0
