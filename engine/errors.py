"""Errors that name the file, field or object they are about."""

from __future__ import annotations

from typing import Any


class AtollError(Exception):
    """Base of every error Atoll reports to a user (never shown as a traceback)."""


class InputError(AtollError):
    """Bad user input: a policy, a scenario, a quantity, an object from the API.

    ``where`` is a human path such as ``policy.yaml: spec.plugins.drf.weight``.
    """

    def __init__(self, message: str, where: str = "") -> None:
        self.message = message
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class UsageError(InputError):
    """A wrong combination of command-line arguments: exit code 2, like argparse's own usage errors."""


def shown(value: Any) -> str:
    """``repr`` of a bad value for an error message, cut short: a 100 KB value must not make a 100 KB log line, and an
    integer past 4,300 digits cannot even be printed (its repr raises ValueError)."""
    big = isinstance(value, int) and value.bit_length() >= 10_000
    text = f"an integer of {value.bit_length()} bits" if big else repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"
