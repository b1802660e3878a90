"""A binding the webhook did not pause (it was down, or the binding predates Atoll) is told once: a Warning
``NotGated`` Event and ``atoll_bindings_not_gated_total{handling}`` (engine/kube/not_gated.py)."""

from __future__ import annotations

from engine.kube import metrics
from engine.kube.webhook import PAUSED_ANNOTATION
from engine.model import JobState
from tests.kube import objects as o
from tests.kube.test_controller import controller, events, feed

DONE = {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}


def count(handling: str) -> float:
    value: float = metrics.NOT_GATED.labels(handling)._value.get()
    return value


def test_gate_mode_adopts_an_unpaused_binding_and_says_so_once_per_binding() -> None:
    ctl = controller()
    job = o.batch_job("bypass", parallelism=2)
    before = count("adopted")
    feed(ctl, o.cluster("m1"), job, o.binding(job, paused=False, clusters=["m1"]))
    items = ctl.step(10.0)
    (ev,) = events(items, "NotGated")
    assert ev.type == "Warning" and ev.involved["name"] == "bypass-job"
    assert ev.message.startswith("not paused by Atoll's webhook (it was down with failurePolicy Ignore, or the "
                                 "binding predates Atoll): karmada-scheduler places it without Atoll's admission; "
                                 "Atoll counts its usage (queue default) from now on"), ev.message
    assert count("adopted") == before + 1
    assert ctl.engine.state.jobs["team-a/bypass-job"].state.holds_resources   # still adopted into the books
    # a resync (a status change of the binding, a template change) tells nothing more
    resynced = o.binding(job, paused=False, clusters=["m1"], rv="11")
    ctl.on_binding("MODIFIED", resynced, ctl.bindings["team-a/bypass-job"])
    feed(ctl, o.batch_job("bypass", parallelism=2, rv="2"))
    assert events(ctl.step(11.0), "NotGated") == [] and count("adopted") == before + 1
    # deleted: forgotten (memory bounded by the bindings there are); a binding created again is told again
    ctl.on_binding("DELETED", None, ctl.bindings["team-a/bypass-job"])
    ctl.step(12.0)
    assert ctl.not_gated == set()
    feed(ctl, o.binding(job, paused=False, clusters=["m1"], rv="20"))
    assert len(events(ctl.step(13.0), "NotGated")) == 1 and count("adopted") == before + 2


def test_bindings_atoll_admitted_or_that_ended_are_not_told() -> None:
    ctl = controller()
    admitted, ended = o.batch_job("admitted", parallelism=2), o.batch_job("ended", parallelism=2, status=DONE)
    paused = o.batch_job("paused", parallelism=2)
    before = count("adopted")
    feed(ctl, o.cluster("m1"), admitted, ended, paused,
         o.binding(admitted, paused=False, clusters=["m1"],
                   annotations={"atoll.dev/admitted-at": "2026-11-22T21:00:00.000000Z"}),
         o.binding(ended, paused=False, clusters=["m1"]), o.binding(paused))
    items = ctl.step(10.0)
    assert events(items, "NotGated") == [] and count("adopted") == before
    assert ctl.engine.state.jobs["team-a/admitted-job"].state is JobState.ADMITTED
    assert [e.involved["name"] for e in events(items, "Admitted")] == ["paused-job"]


def test_paused_by_the_webhook_but_resumed_by_someone_else_is_told_in_those_words() -> None:
    ctl = controller()
    job = o.batch_job("lifted", parallelism=2)
    feed(ctl, o.cluster("m1"), job, o.binding(job, paused=False, clusters=["m1"],
                                              annotations={PAUSED_ANNOTATION: "2026-11-22T21:00:00.000000Z"}))
    (ev,) = events(ctl.step(10.0), "NotGated")
    assert ev.message.startswith("paused by Atoll's webhook but resumed by someone else, not by Atoll: "), ev.message


def test_bind_mode_leaves_an_unpaused_binding_to_karmada_scheduler_and_says_it_is_not_counted() -> None:
    ctl = controller(mode="bind")
    job, ended = o.batch_job("bypass", parallelism=2), o.batch_job("ended", parallelism=2, status=DONE)
    before = count("ignored")
    feed(ctl, o.cluster("m1"), o.binding(job, paused=False, clusters=["m1"]))
    assert events(ctl.step(10.0), "NotGated") == []            # template not seen yet: told once it is
    feed(ctl, job, ended, o.binding(ended, paused=False, clusters=["m1"]))
    (ev,) = events(ctl.step(11.0), "NotGated")
    assert ev.involved["name"] == "bypass-job" and ev.type == "Warning"
    assert "karmada-scheduler places it without Atoll's admission; Atoll does not count its usage in any queue" \
        in ev.message, ev.message
    assert "team-a/bypass-job" not in ctl.engine.state.jobs and count("ignored") == before + 1
    resynced = o.binding(job, paused=False, clusters=["m1"], rv="11")
    ctl.on_binding("MODIFIED", resynced, ctl.bindings["team-a/bypass-job"])
    assert events(ctl.step(12.0), "NotGated") == [] and count("ignored") == before + 1


def test_bind_mode_binding_addressed_to_atoll_and_placed_by_someone_else_is_adopted_and_told() -> None:
    ctl = controller(mode="bind")
    job = o.batch_job("placed", parallelism=2)
    feed(ctl, o.cluster("m1"), job, o.binding(job, paused=False, clusters=["m1"], scheduler="atoll"))
    (ev,) = events(ctl.step(10.0), "NotGated")
    assert "its spec.clusters were written without Atoll's admission; Atoll counts its usage (queue default)" \
        in ev.message, ev.message
    assert ctl.engine.state.jobs["team-a/placed-job"].state.holds_resources
