"""Hypothesis in CI runs derandomized: the same examples on every run, so a red CI is reproducible and a
green one is not luck. On a developer's machine the property tests keep exploring new random examples (and
replay the failures hypothesis saved in .hypothesis/): that is where new counterexamples are found, as the
has() one in tests/test_cel_check.py was."""

import os

import pytest
from hypothesis import settings

from engine.core import contain

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _strict_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin's error is contained as a job's refusal in production (engine/core/contain.py); in tests it
    raises, so that no bug hides behind a refusal (tests/core/test_contain.py turns it off)."""
    monkeypatch.setattr(contain, "STRICT", True)
