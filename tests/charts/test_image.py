"""charts/atoll/Dockerfile and its constraints file, checked as text (no container runtime here: `make image`
builds the image where docker or podman exists)."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.charts.chart_support import CHART, ROOT

DOCKERFILE = (CHART / "Dockerfile").read_text()
CONSTRAINTS = CHART / "constraints.txt"


def pins() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and re.fullmatch(r"[0-9A-Za-z.+!-]+", version), f"constraints.txt: not an exact pin: {line!r}"
            out[canonicalize_name(name)] = version
    return out


def test_base_image_is_pinned_by_digest_and_the_runtime_is_non_root() -> None:
    (base,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE, re.M)
    assert re.fullmatch(r"[\w.:/-]+@sha256:[0-9a-f]{64}", base), base
    assert re.findall(r"^FROM (\S+)", DOCKERFILE, re.M) == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    (user,) = re.findall(r"^USER (\S+)$", DOCKERFILE, re.M)
    assert user.split(":")[0] not in ("0", "root"), user
    assert DOCKERFILE.rstrip().splitlines()[-2:] == ['ENTRYPOINT ["atoll"]', 'CMD ["--help"]']


def test_image_installs_the_wheel_under_the_constraints() -> None:
    assert "pip wheel --no-deps --no-cache-dir --wheel-dir /dist ." in DOCKERFILE
    assert "COPY charts/atoll/constraints.txt /etc/atoll/constraints.txt" in DOCKERFILE
    assert "--constraint /etc/atoll/constraints.txt /dist/*.whl" in DOCKERFILE
    assert "COPY engine" not in DOCKERFILE, "the runtime must come from the wheel, not the source tree"


def test_every_runtime_dependency_is_pinned() -> None:
    """Each dependency of pyproject.toml has an exact pin that satisfies its range (a new or changed dependency
    needs `make image-constraints`, which re-resolves with pip from the tested venv)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = pins()
    for spec in project["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name} is not in charts/atoll/constraints.txt: run `make image-constraints`"
        assert req.specifier.contains(pinned[name], prereleases=True), (spec, pinned[name])
