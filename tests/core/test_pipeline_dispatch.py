"""The Pipeline's direct hook callers answer exactly as pluggy's own hook calls would."""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pluggy
import pytest

from engine.hookspecs import hookimpl
from engine.model import Cluster, Job, Refusal
from engine.pipeline import Pipeline, _direct, _manager, _positional
from engine.plugin import Plugin


class Told(Plugin):
    """Answers from a fixed table; None means "no opinion". Its subclasses' admit hooks take different arguments
    (pluggy calls each by its own parameter names), so the table holds none."""

    stages = ("admit", "place")

    def __init__(self, label: str, admit: Optional[str], filtered: Optional[dict[str, str]]) -> None:
        super().__init__({}, None, f"test.{label}")
        self.label, self.admit_reason, self.filtered = label, admit, filtered
        self.calls: list[str] = []

    @hookimpl
    def atoll_filter(self, job: Job, clusters: list[Cluster], state: Any) -> Optional[dict[str, str]]:
        self.calls.append("filter")
        return self.filtered


class Answering(Told):
    """Answers every hook from the table."""

    @hookimpl
    def atoll_admit(self, job: Job) -> Optional[Refusal]:        # a subset of the arguments, as allowed
        self.calls.append("admit")
        return Refusal(self.admit_reason, self.label) if self.admit_reason else None


def answering(label: str, admit: Optional[str], filtered: Optional[dict[str, str]]) -> Answering:
    """An instance of a subclass named ``label`` (pluggy registers plugins under their names)."""
    cls = type(f"Answers_{label}", (Answering,), {"name": label})
    return cls(label, admit, filtered)


CASES = [
    [(None, None), (None, {"c1": "no"})],
    [("full", {"c0": "x"}), ("later", {"c1": "y"})],
    [(None, {}), ("second", None), ("third", {"c2": "z"})],
    [(None, None)],
]


@pytest.mark.parametrize("answers", CASES)
def test_direct_calls_equal_pluggy_calls(answers: list[tuple[Optional[str], Optional[dict[str, str]]]]) -> None:
    def plugins() -> list[Answering]:
        return [answering(f"p{i}", admit, filtered) for i, (admit, filtered) in enumerate(answers)]

    ours, theirs = plugins(), plugins()
    direct, hooks = _manager(ours, "test").hook, _manager(theirs, "test").hook
    job = Job(id="j", name="j")
    kwargs = {"job": job, "clusters": [], "state": None}
    assert _direct(direct.atoll_admit)(job=job, state=None) == hooks.atoll_admit(job=job, state=None)
    assert _positional(direct.atoll_admit, None)(job, None) == hooks.atoll_admit(job=job, state=None)
    assert _direct(direct.atoll_filter)(**kwargs) == hooks.atoll_filter(**kwargs)
    assert [p.calls for p in ours] == [p.calls for p in theirs]      # same plugins called, same order


class Both(Told):
    """Its admit takes every argument of the spec, in order: ``_positional`` calls it with both as they are."""

    @hookimpl
    def atoll_admit(self, job: Job, state: Any) -> Optional[Refusal]:
        self.calls.append(f"admit {state}")
        return Refusal(self.admit_reason, self.label) if self.admit_reason else None


@pytest.mark.parametrize("answers", CASES)
def test_two_argument_calls_equal_pluggy_calls(answers: list[tuple[Optional[str], Optional[dict[str, str]]]]) -> None:
    def plugins() -> list[Told]:
        return [type(f"Both_{i}", (Both,), {"name": f"p{i}"})(f"p{i}", admit, None)
                for i, (admit, _) in enumerate(answers)]

    ours, theirs = plugins(), plugins()
    direct, hooks = _manager(ours, "test").hook, _manager(theirs, "test").hook
    job = Job(id="j", name="j")
    caller = _positional(direct.atoll_admit, None)
    assert caller.__qualname__.startswith("_first_of_two.")       # the plain two-argument caller
    assert caller(job, "s") == hooks.atoll_admit(job=job, state="s")
    assert [p.calls for p in ours] == [p.calls for p in theirs]      # same plugins called, same order, same state


def test_a_missing_argument_is_pluggy_s_error() -> None:
    hook = _manager([answering("p", None, None)], "test").hook
    with pytest.raises(pluggy.HookCallError, match="'job'"):
        _direct(hook.atoll_admit)(state=None)
    with pytest.raises(pluggy.HookCallError, match="'clusters'"):      # an implementation taking every argument
        _direct(hook.atoll_filter)(job=None, state=None, extra=1)


def test_wrappers_keep_pluggy_s_own_loop() -> None:
    class Wrapper(Plugin):
        name = "wrapper"
        stages = ("admit",)

        @hookimpl(wrapper=True)
        def atoll_admit(self, job: Job) -> Iterator[None]:
            result = yield
            return result

    hook = _manager([Wrapper({}, None), answering("p", "no", None)], "test").hook.atoll_admit
    assert _direct(hook) is hook
    assert hook(job=Job(id="j", name="j"), state=None) == Refusal("no", "p")
    assert _positional(hook, None)(Job(id="j", name="j"), None) == Refusal("no", "p")
    assert Pipeline({}).admit_positional(Job(id="j", name="j"), None) is None      # no admit plugin at all


def test_policy_order_decides_first_results() -> None:
    first, second = answering("first", "one", {"a": "1"}), answering("second", "two", {"b": "2"})
    pipeline = Pipeline({"admit": [first, second], "place": [first, second]})
    job = Job(id="j", name="j")
    assert pipeline.admit(job=job, state=None) == Refusal("one", "first")
    assert second.calls == []
    assert pipeline.filter(job=job, clusters=[], state=None) == [{"a": "1"}, {"b": "2"}]


def test_registered_plugins_get_a_plain_dict_of_their_attributes_again() -> None:
    """pluggy's register lists a plugin's attributes (``dir``), which leaves them in a split dict that CPython
    3.11 reads without specialising: the Pipeline gives each plugin a new dict of the same items (_own_dict)."""
    first, second = answering("first", "one", {"a": "1"}), answering("second", None, None)
    before = {id(p): (p.__dict__, dict(p.__dict__)) for p in (first, second)}
    pipeline = Pipeline({"admit": [first, second], "place": [first]})
    for plugin in (first, second):
        kept, items = before[id(plugin)]
        assert plugin.__dict__ is not kept and plugin.__dict__ == items and type(plugin.__dict__) is dict
    assert pipeline.admit_positional(Job(id="j", name="j"), None) == Refusal("one", "first")
