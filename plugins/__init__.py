"""Atoll's built-in plugins. They register exactly the way a pip-installed plugin does:
this module implements the ``atoll_plugin_classes`` discovery hook."""

from __future__ import annotations

from engine.hookspecs import hookimpl
from engine.plugin import Plugin

BUILTIN_MODULES: tuple[str, ...] = ()


@hookimpl
def atoll_plugin_classes() -> list[type[Plugin]]:
    import importlib

    classes: list[type[Plugin]] = []
    for module_name in BUILTIN_MODULES:
        module = importlib.import_module(f"plugins.{module_name}")
        classes.extend(module.PLUGINS)
    return classes
