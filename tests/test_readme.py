"""The README's policy example is a real, valid policy (docs that are true)."""

from __future__ import annotations

import re
from pathlib import Path

from engine.policy import load_policy_text

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_policy_example_validates() -> None:
    text = README.read_text()
    section = text.split("## The policy in one screen", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None, "README lost its policy example"
    policy = load_policy_text(block.group(1), "README.md")
    assert policy.pipeline.describe()["admit"] == ["queue-state", "capacity", "gpu-capacity", "gang"]
