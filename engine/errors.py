"""Errors that name the file, field or object they are about."""

from __future__ import annotations


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
