"""Atoll's built-in plugins. They register exactly the way a pip-installed plugin does:
this module implements the ``atoll_plugin_classes`` discovery hook.

Every module in this package that defines ``PLUGINS`` (a list of Plugin classes) is
built in; adding a plugin is adding a module, with no list to keep in sync.
"""

from __future__ import annotations

import importlib
import pkgutil

from engine.hookspecs import hookimpl
from engine.plugin import Plugin


def builtin_modules() -> list[str]:
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


@hookimpl
def atoll_plugin_classes() -> list[type[Plugin]]:
    classes: list[type[Plugin]] = []
    for module_name in builtin_modules():
        module = importlib.import_module(f"{__name__}.{module_name}")
        classes.extend(getattr(module, "PLUGINS", ()))
    return classes
