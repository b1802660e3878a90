"""Whatever the text, loading a policy either succeeds or raises InputError: never another exception."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.policy.cel import CelCompiler
from engine.errors import InputError
from engine.policy import load_policy_text
from tests.test_policy import CATALOG, GOOD

CelCompiler()          # builds celpy's parser (and its recursion limit) before hypothesis watches

NOISE = st.text(alphabet=st.sampled_from(list("abc-_:{}[]'\"!&*|>#?%@`,.\n\t 0123456789~\\")), max_size=12)


def load_or_input_error(text: str) -> None:
    try:
        load_policy_text(text, "p.yaml", CATALOG)
    except InputError as exc:
        assert str(exc).startswith("p.yaml"), str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=st.integers(0, len(GOOD)), length=st.integers(0, 40), noise=NOISE)
def test_mutated_policies_never_raise_anything_but_input_error(start: int, length: int, noise: str) -> None:
    load_or_input_error(GOOD[:start] + noise + GOOD[start + length:])


@settings(max_examples=200, deadline=None)
@given(value=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=8),
       where=st.sampled_from(["metadata", "spec", "spec.pipeline", "spec.plugins", "spec.plugins.t-counter",
                              "spec.pipeline.order", "spec.managedWorkloads", "spec.plugins.t-priority.priority"]))
def test_any_value_anywhere_is_handled(value: object, where: str) -> None:
    import yaml

    doc = yaml.safe_load(GOOD)
    node = doc
    parts = where.split(".")
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
    load_or_input_error(yaml.safe_dump(doc))


def test_a_plugin_config_keyed_by_null_is_an_input_error() -> None:
    """Found by the fuzz test above: an anchor with no key (`&t-counter: ...`) or `~:` makes the key None."""
    text = GOOD.replace("    t-counter:", "    ~:", 1)
    assert text != GOOD
    try:
        load_policy_text(text, "p.yaml", CATALOG)
    except InputError as exc:
        assert "spec.plugins.None" in str(exc) and "is not a plugin name" in str(exc), str(exc)
    else:
        raise AssertionError("a null plugin config key was accepted")


def test_sibling_errors_under_keys_of_mixed_types_are_an_input_error() -> None:
    """Found by the fuzz test above (start=314, length=10, noise='0'): a YAML key that is an int (`0:`) beside
    string keys, each with an error; jsonschema's best_match compared their paths and raised TypeError."""
    text = GOOD.replace("      priority:", "    0:", 1)
    assert text != GOOD
    try:
        load_policy_text(text, "p.yaml", CATALOG)
    except InputError as exc:
        assert str(exc).startswith("p.yaml: spec.plugins."), str(exc)
    else:
        raise AssertionError("a policy with two errors under keys of mixed types was accepted")
