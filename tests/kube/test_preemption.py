"""Preemption carried out on Karmada (engine/kube/eviction.py): one atomic evict patch per victim, capacity
freed only when the victim's Works are gone (or after the timeout), restart adoption from the annotations."""

from __future__ import annotations

from typing import Any

import pytest

from engine.kube import metrics, plan
from engine.kube.controller import Controller
from engine.kube.eviction import EVICTION_TIMEOUT
from engine.model import JobState
from engine.pipeline import Pipeline
from plugins.capacity import Capacity
from plugins.fifo import Fifo
from plugins.gang import Gang
from plugins.job_priority import JobPriority
from plugins.priority_preemption import PriorityPreemption
from tests.kube import objects as o
from tests.kube.test_controller import events, feed, patches

T0 = 1_800_000_000.0
LOW, HIGH = "team-a/low-job", "team-a/high-job"


def controller() -> Controller:
    jp, gang = JobPriority({}, None), Gang({}, None)
    return Controller(Pipeline({"enqueue": [jp], "order": [jp, Fifo({}, None)],
                                "admit": [Capacity({}, None), gang], "place": [gang],
                                "preempt": [PriorityPreemption({}, None)]}))


def work(binding_key: str, cluster: str, name: str = "w") -> dict[str, Any]:
    ns, _, rb = binding_key.partition("/")
    return {"apiVersion": "work.karmada.io/v1alpha1", "kind": "PartialObjectMetadata",
            "metadata": {"name": f"{rb}-{name}", "namespace": f"karmada-es-{cluster}", "resourceVersion": "5",
                         "annotations": {"resourcebinding.karmada.io/name": rb,
                                         "resourcebinding.karmada.io/namespace": ns}}}


def report(ctl: Controller, cpu_used: str, now: float) -> None:
    ctl.on_cluster("MODIFIED", o.cluster("m1", cpu="64", allocated_cpu=cpu_used), None, now)


def apply(ctl: Controller, obj: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """What the API server makes of a merge patch (enough of RFC 7386 for these bodies)."""
    def merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
        for k, v in patch.items():
            if v is None:
                into.pop(k, None)
            elif isinstance(v, dict):
                merge(into.setdefault(k, {}), v)
            else:
                into[k] = v
    merge(obj, body)
    obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
    ctl.on_binding("MODIFIED", obj, None)
    return obj


def running_low(ctl: Controller) -> dict[str, Any]:
    """A low-priority job of 40 cpu running on m1 (adopted: resumed before), its Work on m1."""
    low = o.batch_job("low", parallelism=40, pc="low", status={"active": 40, "startTime": "2026-11-22T21:00:00Z"})
    rb = o.binding(low, paused=False, clusters=["m1"],
                   annotations={plan.ADMITTED_ANNOTATION: plan.stamp(T0 - 600)})
    feed(ctl, o.priority_class("low", 1), o.priority_class("high", 100), o.cluster("m1", cpu="64"), low, rb)
    ctl.on_work("ADDED", work(LOW, "m1"), None)
    ctl.step(T0 - 2)                               # adopted: it holds its capacity again
    report(ctl, "40", T0 - 1)                      # the member's report counts its pods
    return rb


def test_a_victim_is_evicted_with_one_patch_and_freed_only_when_its_works_are_gone() -> None:
    ctl = controller()
    rb = running_low(ctl)
    assert ctl.step(T0) == [] and ctl.engine.state.jobs[LOW].state.holds_resources
    before = metrics.PREEMPTIONS.labels("default", "priority")._value.get()
    high = o.batch_job("high", parallelism=40, pc="high")
    feed(ctl, high, o.binding(high))
    items = ctl.step(T0 + 1)
    (evict,) = patches(items, "evict")
    assert evict.ref.key == LOW
    annotations = evict.body["metadata"]["annotations"]
    assert annotations[plan.PREEMPTED_BY_ANNOTATION] == HIGH and annotations[plan.PREEMPTIONS_ANNOTATION] == "1"
    assert annotations[plan.EVICTING_ANNOTATION] == plan.stamp(T0 + 1)
    assert evict.body["spec"] == {"suspension": {"scheduling": True}, "clusters": None}
    (ev,) = events(items, "Preempted")
    assert HIGH in ev.message and "m1" in ev.message and ev.involved["name"] == "low-job"
    assert metrics.PREEMPTIONS.labels("default", "priority")._value.get() == before + 1
    assert not patches(items, "admit")
    assert ctl.engine.state.jobs[LOW].state is JobState.EVICTING
    assert "preempting" in ctl.engine.state.jobs[HIGH].pending_reason

    # the patch lands; Karmada starts deleting, the Work is still there: nothing is freed
    apply(ctl, rb, evict.body)
    assert not patches(ctl.step(T0 + 2), "evicted")
    assert ctl.engine.state.jobs[LOW].state is JobState.EVICTING
    assert "waiting for its Works to be gone on m1" in ctl.explain(LOW)

    # the Work is gone: the victim is back in its queue, paused; the preemptor starts
    assert ctl.on_work("DELETED", None, work(LOW, "m1")) is True
    items = ctl.step(T0 + 3)
    (done,) = patches(items, "evicted")
    assert done.body["metadata"]["annotations"][plan.EVICTING_ANNOTATION] is None
    assert events(items, "Evicted")
    low_job = ctl.engine.state.jobs[LOW]
    assert low_job.state is JobState.PENDING and low_job.preemptions == 1
    report(ctl, "0", T0 + 4)
    items = ctl.step(T0 + 5)
    assert [p.ref.key for p in patches(items, "admit")] == [HIGH]
    assert ctl.engine.state.jobs[LOW].state is JobState.PENDING
    assert f"preempted by {HIGH}" in ctl.explain(LOW)


def test_nothing_is_freed_before_the_evict_patch_shows_on_the_binding() -> None:
    """No Work yet (e.g. never placed) is not proof: the binding must show the eviction first."""
    ctl = controller()
    rb = running_low(ctl)
    ctl.on_work("DELETED", None, work(LOW, "m1"))
    ctl.step(T0)
    high = o.batch_job("high", parallelism=40, pc="high")
    feed(ctl, high, o.binding(high))
    (evict,) = patches(ctl.step(T0 + 1), "evict")
    assert not patches(ctl.step(T0 + 2), "evicted")          # the patch has not landed yet
    apply(ctl, rb, evict.body)
    assert patches(ctl.step(T0 + 3), "evicted")


def test_a_stuck_eviction_frees_capacity_after_the_timeout_with_a_warning() -> None:
    ctl = controller()
    rb = running_low(ctl)
    ctl.step(T0)
    high = o.batch_job("high", parallelism=40, pc="high")
    feed(ctl, high, o.binding(high))
    (evict,) = patches(ctl.step(T0 + 1), "evict")
    apply(ctl, rb, evict.body)
    assert not patches(ctl.step(T0 + EVICTION_TIMEOUT), "evicted")
    items = ctl.step(T0 + 1 + EVICTION_TIMEOUT)
    assert patches(items, "evicted")
    (warn,) = events(items, "EvictionTimeout")
    assert "m1" in warn.message and warn.type == "Warning"
    assert ctl.engine.state.jobs[LOW].state is JobState.PENDING


def evicting_binding(works_left: bool, since: str = plan.stamp(T0 - 5)) -> tuple[Controller, dict[str, Any]]:
    """A new leader finds the victim's binding carrying the intent (the old one crashed mid-eviction)."""
    ctl = controller()
    low = o.batch_job("low", parallelism=40, pc="low", status={"active": 40})
    high = o.batch_job("high", parallelism=40, pc="high")
    rb = o.binding(low, paused=True, annotations={plan.EVICTING_ANNOTATION: since,
                                                  plan.PREEMPTED_BY_ANNOTATION: HIGH,
                                                  plan.PREEMPTIONS_ANNOTATION: "2"})
    feed(ctl, o.priority_class("low", 1), o.priority_class("high", 100), o.cluster("m1", cpu="64"), low, high,
         o.binding(high), rb)
    if works_left:
        ctl.on_work("ADDED", work(LOW, "m1"), None)
    return ctl, rb


def test_after_a_restart_a_victim_with_works_left_is_adopted_as_evicting_and_nothing_is_admitted() -> None:
    """Another low job runs on m2: a new leader that examined the preemptor at once would evict it too."""
    ctl, rb = evicting_binding(works_left=True)
    other = o.batch_job("other", parallelism=40, pc="low", status={"active": 40})
    feed(ctl, o.cluster("m2", cpu="64"), other,
         o.binding(other, paused=False, clusters=["m2"], annotations={plan.ADMITTED_ANNOTATION: plan.stamp(T0 - 900)}))
    items = ctl.step(T0)
    low = ctl.engine.state.jobs[LOW]
    assert low.state is JobState.EVICTING and low.preempted_by == HIGH
    assert not patches(items, "admit") and not patches(items, "evict")    # nothing admitted, no victim twice
    assert HIGH not in ctl.engine.state.jobs                               # deferred until its victim is gone
    assert "waiting for its Works to be gone on m1" in ctl.explain(LOW)
    ctl.on_cluster("MODIFIED", o.cluster("m2", cpu="64", allocated_cpu="40"), None, T0 + 0.5)
    report(ctl, "40", T0 + 0.5)
    items = ctl.step(T0 + 0.6)
    assert not patches(items, "admit") and not patches(items, "evict")
    ctl.on_work("DELETED", None, work(LOW, "m1"))
    items = ctl.step(T0 + 1)
    (done,) = patches(items, "evicted")
    assert ctl.engine.state.jobs[LOW].preemptions == 2
    apply(ctl, rb, done.body)                                              # the intent is cleared
    report(ctl, "0", T0 + 2)
    items = ctl.step(T0 + 3)
    assert [p.ref.key for p in patches(items, "admit")] == [HIGH] and not patches(items, "evict")
    assert ctl.engine.state.jobs["team-a/other-job"].state.holds_resources


def test_after_a_restart_a_victim_whose_works_are_gone_waits_in_its_queue() -> None:
    ctl, _ = evicting_binding(works_left=False)
    items = ctl.step(T0)
    low = ctl.engine.state.jobs[LOW]
    assert low.state is JobState.PENDING and low.preemptions == 2 and low.preempted_by == HIGH
    (done,) = patches(items, "evicted")
    assert done.ref.key == LOW and done.body["metadata"]["annotations"][plan.EVICTING_ANNOTATION] is None
    assert [p.ref.key for p in patches(items, "admit")] == [HIGH]


def test_explain_from_the_annotations_says_by_whom_and_when() -> None:
    from engine.kube.cli import describe_binding

    low = o.batch_job("low")
    rb = o.binding(low, annotations={plan.EVICTING_ANNOTATION: "2027-01-15T08:00:01.000000Z",
                                     plan.PREEMPTED_BY_ANNOTATION: HIGH, plan.PREEMPTIONS_ANNOTATION: "1",
                                     plan.PENDING_ANNOTATION: "preempted by team-a/high-job (priority)"})
    text = describe_binding(rb)
    assert "evicting since 2027-01-15T08:00:01.000000Z" in text
    assert f"preempted by {HIGH} (1 time(s) in all)" in text


def test_bind_mode_evicts_with_the_same_patch() -> None:
    """Bind mode wrote spec.clusters itself; eviction clears them and pauses, exactly as in gate mode."""
    jp, gang = JobPriority({}, None), Gang({}, None)
    ctl = Controller(Pipeline({"enqueue": [jp], "order": [jp, Fifo({}, None)], "admit": [Capacity({}, None), gang],
                               "place": [gang], "preempt": [PriorityPreemption({}, None)]}), mode="bind")
    low = o.batch_job("low", parallelism=40, pc="low", status={"active": 40})
    rb = o.binding(low, paused=False, clusters=["m1"], scheduler="atoll",
                   annotations={plan.ADMITTED_ANNOTATION: plan.stamp(T0 - 600)})
    feed(ctl, o.priority_class("low", 1), o.priority_class("high", 100), o.cluster("m1", cpu="64"), low, rb)
    ctl.step(T0 - 2)
    report(ctl, "40", T0 - 1)
    high = o.batch_job("high", parallelism=40, pc="high")
    feed(ctl, high, o.binding(high, scheduler="atoll", paused=False))
    (evict,) = patches(ctl.step(T0), "evict")
    assert evict.ref.key == LOW and evict.body["spec"] == {"suspension": {"scheduling": True}, "clusters": None}


def test_bind_mode_follows_a_gate_placed_job_after_admission_so_its_victim_capacity_frees() -> None:
    """Bind mode (the shipped default), a workload placed by karmada-scheduler: once Atoll resumed its binding,
    its start (which drops the in-flight reservation at the next report) and its end must still reach the
    engine. Before, the resumed binding was ignored: the job stayed Admitted with its reservation booked on
    top of the report counting its pods, so a preemptor's dry run found no fit, and its capacity never came back."""
    jp, gang = JobPriority({}, None), Gang({}, None)
    ctl = Controller(Pipeline({"enqueue": [jp], "order": [jp, Fifo({}, None)], "admit": [Capacity({}, None), gang],
                               "place": [gang], "preempt": [PriorityPreemption({}, None)]}), mode="bind")
    low = o.batch_job("low", parallelism=2, cpu="30")
    feed(ctl, o.cluster("m1", cpu="64"), low, o.binding(low))
    assert [p.why for p in ctl.step(T0) if hasattr(p, "why")] == ["admit"]
    ctl.on_binding("MODIFIED", o.binding(low, paused=False, clusters=["m1"],
                                         annotations={plan.ADMITTED_ANNOTATION: plan.stamp(T0)}, rv="11"), None)
    started = dict(low, status={"active": 2})
    started["metadata"] = dict(low["metadata"], resourceVersion="2")
    ctl.on_template("MODIFIED", started, low)
    ctl.step(T0 + 1)
    assert ctl.engine.state.jobs[LOW].state is JobState.RUNNING
    report(ctl, "60", T0 + 5)                       # counts low's pods: its reservation is dropped
    high = o.batch_job("high", parallelism=2, cpu="30", pc="high")
    feed(ctl, o.priority_class("high", 1000), high, o.binding(high))
    ctl.step(T0 + 6)
    assert ctl.engine.state.jobs[LOW].state is JobState.EVICTING


def test_a_victim_that_completes_while_being_evicted_is_finished_not_run_again() -> None:
    """The Job succeeded in its member before the eviction reached its pods: requeuing it would run it twice."""
    ctl = controller()
    rb = running_low(ctl)
    high = o.batch_job("high", parallelism=40, pc="high")
    feed(ctl, high, o.binding(high))
    (evict,) = patches(ctl.step(T0 + 1), "evict")
    apply(ctl, rb, evict.body)
    done_status = {"succeeded": 40, "conditions": [{"type": "Complete", "status": "True"}]}
    low = o.batch_job("low", parallelism=40, pc="low", status=done_status, rv="9")
    ctl.on_template("MODIFIED", low, None)
    assert ctl.engine.state.jobs[LOW].state is JobState.EVICTING      # still holding until its Works are gone
    ctl.on_work("DELETED", None, work(LOW, "m1"))
    items = ctl.step(T0 + 3)
    (done,) = patches(items, "evicted")
    assert "already succeeded: not run again" in done.body["metadata"]["annotations"][plan.PENDING_ANNOTATION]
    assert ctl.engine.state.jobs[LOW].state is JobState.SUCCEEDED
    report(ctl, "0", T0 + 4)
    items = ctl.step(T0 + 5)
    assert [p.ref.key for p in patches(items, "admit")] == [HIGH]
    apply(ctl, rb, done.body)
    assert not patches(ctl.step(T0 + 400), "admit")                   # never again, even with room

    # a new leader sees the paused binding of an ended Job: it is not admitted either
    fresh = controller()
    feed(fresh, o.priority_class("low", 1), o.cluster("m1", cpu="64"), low, rb)
    assert not patches(fresh.step(T0 + 500), "admit") and LOW not in fresh.engine.state.jobs


@pytest.mark.parametrize("works_left", [True, False])
@pytest.mark.parametrize("forged", ["0001-01-01T00:00:00+01:00", "1969-12-31T23:59:59Z", "9999-12-31T23:59:59Z"])
def test_a_forged_eviction_stamp_never_stops_the_controller(forged: str, works_left: bool) -> None:
    """An annotation is data anyone who may edit a binding can write. ``0001-01-01T00:00:00+01:00`` once parsed,
    timed the eviction out at once, and raised out of ``Controller.step`` when written back (year 0): scheduling
    stopped for the whole fleet, again after every restart. A stamp before 1970 or after 9999 is now no stamp, and
    one in the future counts from now: the eviction still times out, the victim's capacity is not held for ever."""
    ctl, _ = evicting_binding(works_left, since=forged)
    items = ctl.step(T0)
    low = ctl.engine.state.jobs[LOW]
    if forged.startswith("9999") and works_left:
        assert low.state is JobState.EVICTING                  # adopted as evicting, timed from now
        assert not patches(ctl.step(T0 + EVICTION_TIMEOUT - 1), "evicted")
        assert patches(ctl.step(T0 + EVICTION_TIMEOUT), "evicted")
    elif forged.startswith("9999"):
        (done,) = patches(items, "evicted")                    # waits in its queue, as for a true stamp
        assert f"at {plan.stamp(T0)};" in done.body["metadata"]["annotations"][plan.PENDING_ANNOTATION]   # not 9999
    else:
        assert low.state is not JobState.EVICTING              # no stamp: not an eviction under way


def test_an_error_in_one_binding_s_admission_leaves_the_others_scheduled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each binding's part of a step after the engine's cycle runs contained (engine.kube.bindings.contained): an
    unforeseen error in one is logged with its key, and the others' writes still go out."""
    ctl = controller()
    jobs = [o.batch_job(name, parallelism=4) for name in ("a", "b", "c")]
    feed(ctl, o.cluster("m1", cpu="64"), *jobs, *[o.binding(job) for job in jobs])
    real = Controller._admitted

    def admitted(self: Controller, key: str, *args: Any) -> None:
        if key == "team-a/b-job":
            raise RuntimeError("an object shape nobody foresaw")
        real(self, key, *args)

    monkeypatch.setattr(Controller, "_admitted", admitted)
    assert sorted(p.ref.key for p in patches(ctl.step(T0), "admit")) == ["team-a/a-job", "team-a/c-job"]


def test_stamps_outside_1970_to_9999_are_no_stamps_and_any_time_can_be_written() -> None:
    assert plan.parse_stamp("0001-01-01T00:00:00+01:00") is None and plan.parse_stamp("1969-12-31T23:59:59Z") is None
    assert plan.parse_stamp("9999-12-31T23:59:59Z") == plan.MAX_STAMP and plan.parse_stamp("1970-01-01T00:00:00Z") == 0
    assert plan.stamp(-6.2e10) == "1970-01-01T00:00:00.000000Z" and plan.stamp(1e20).startswith("9999-12-31T23:59:59")
