"""Files Atoll ships as data: ``schemas/``, ``policies/`` and ``scenarios/``.

They live at the top of the source tree (where people look for them); the entries here are symbolic links
to those folders, so a wheel carries copies of them inside the package and every reader finds them with
``importlib.resources`` the same way in a source checkout, an editable install and an installed wheel.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def data_path(*parts: str) -> Path:
    """The path of a shipped data file, e.g. ``data_path("schemas", "policy.schema.json")``."""
    found = files(__name__).joinpath(*parts)
    if not isinstance(found, Path):       # a zipped install: Atoll's readers need real files
        raise RuntimeError(f"atoll's data file {'/'.join(parts)} is not on the file system ({found!r}); "
                           "install atoll as a regular (unzipped) package")
    return found


def shipped(name: str, folder: str) -> Path:
    """``name`` as given if it exists; else the file Atoll ships as ``folder/name`` (``.yaml`` optional), so
    ``atoll simulate quickstart --policy default`` works from any directory of an installed package."""
    given = Path(name)
    if given.exists():
        return given
    stem = given.name if given.parent in (Path("."), Path(folder)) else None
    if stem is not None:
        for candidate in (stem, f"{stem}.yaml"):
            found = data_path(folder, candidate)
            if found.is_file():
                return found
    return given
