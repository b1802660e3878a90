"""Subcommands of the ``atoll`` CLI, one module each."""
