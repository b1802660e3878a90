"""Hypothesis in CI runs derandomized: the same examples on every run, so a red CI is reproducible and a
green one is not luck. On a developer's machine the property tests keep exploring new random examples (and
replay the failures hypothesis saved in .hypothesis/): that is where new counterexamples are found, as the
has() one in tests/test_cel_check.py was."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")
