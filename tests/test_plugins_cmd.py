"""`atoll plugins list`, `atoll policy validate`, and a real pip-installed third-party plugin.

The example package (e2e/plugins/atoll-example-plugin) is pip-installed with ``--target``
into a temporary directory put on PYTHONPATH / sys.path, so the shared .venv is never
modified and nothing needs uninstalling. It is built without build isolation when
``wheel`` is available (offline), otherwise pip fetches setuptools from the registry.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from engine.commands.plugins_cmd import describe
from engine.core.scheduler import Engine
from engine.errors import InputError
from engine.hookspecs import hookimpl
from engine.model import Cluster, Failure, FailureKind, Job, JobState, Queue, Task
from engine.plugin import Plugin, PluginCatalog, PluginEntry, discover
from engine.policy import load_policy_text
from engine.resources import parse_resources
from tests.test_policy import CATALOG, GOOD, TCounter, TFifo

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "e2e" / "plugins" / "atoll-example-plugin"
ATOLL = Path(sys.executable).with_name("atoll")

POLICY = """\
apiVersion: atoll.dev/v1alpha1
kind: SchedulingPolicy
metadata: {name: with-example}
spec:
  pipeline:
    order: [t-fifo]
    admit: [t-counter]
    place: [t-counter]
    recover: [max-attempts]
  plugins:
    t-counter: {limit: 100}
    max-attempts:
      limit: "'tier' in job.labels && job.labels['tier'] == 'prod' ? 3 : 1"
      delay: 5
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip install the example plugin into a fresh --target directory; returns that directory."""
    work = tmp_path_factory.mktemp("example")
    source = work / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = work / "site"
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-input", "--target", str(target)]
    if importlib.util.find_spec("wheel") is not None:
        argv.append("--no-build-isolation")
    out = subprocess.run(argv + [str(source)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (target / "atoll_example_plugin-0.1.0.dist-info").is_dir()
    return target


def run_atoll(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), COLUMNS="200")
    return subprocess.run([str(ATOLL), *args], capture_output=True, text=True, env=env, timeout=120)


def test_plugins_list_shows_the_installed_package(installed: Path) -> None:
    out = run_atoll(installed, "plugins", "list", "--json")
    assert out.returncode == 0, out.stderr
    rows = {row["name"]: row for row in json.loads(out.stdout)}
    assert rows["max-attempts"] == {
        "name": "max-attempts", "stages": ["recover"], "source": "atoll-example-plugin 0.1.0",
        "description": "requeue a failed job away from its cluster until a CEL-computed attempt limit",
    }
    table = run_atoll(installed, "plugins", "list")
    assert table.returncode == 0 and "max-attempts" in table.stdout and "atoll-example-plugin 0.1.0" in table.stdout


def test_validate_cli_accepts_and_rejects_configs_of_the_installed_plugin(installed: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(POLICY.replace("    order: [t-fifo]\n    admit: [t-counter]\n    place: [t-counter]\n", "")
                    .replace("    t-counter: {limit: 100}\n", ""))
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("delay: 5", "delay: -5"))
    out = run_atoll(installed, "policy", "validate", str(good))
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"OK {good}: policy with-example (placementMode gate; enqueue: -; order: -; admit: -; " \
                         "place: -; preempt: -; recover: max-attempts)\n"
    out = run_atoll(installed, "policy", "validate", str(good), str(bad))
    assert out.returncode == 1
    assert out.stdout.startswith(f"OK {good}:")
    assert out.stderr == f"INVALID {bad}: spec.plugins.max-attempts.delay (line 10): invalid config for plugin " \
                         "max-attempts: -5 is less than the minimum of 0\n"


def test_installed_plugin_runs_in_the_engine(installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(installed))
    found = discover()
    assert found.entries["max-attempts"].source == "atoll-example-plugin 0.1.0"
    catalog = PluginCatalog({**found.entries, **CATALOG.entries})
    with pytest.raises(InputError, match=r"spec.plugins.max-attempts.limit \(line 13\): CEL syntax error at column"):
        load_policy_text(POLICY.replace("? 3 : 1", "? 3 :"), "p.yaml", catalog)
    engine = Engine(load_policy_text(POLICY, "p.yaml", catalog).pipeline)
    for name in ("m1", "m2", "m3"):
        engine.upsert_cluster(Cluster(name, allocatable=parse_resources({"cpu": "10"})))
    engine.upsert_queue(Queue("default"))
    for name, tier in (("exp", "dev"), ("prod", "prod")):
        engine.submit(Job(id=name, name=name, labels={"tier": tier},
                          tasks=[Task("w", 1, 1, parse_resources({"cpu": "1"}))]))
    assert {a.job_id for a in engine.cycle(0).admitted} == {"exp", "prod"}
    lost = Failure(FailureKind.CLUSTER_LOST, cluster="m1", message="NotReady")
    gave_up = engine.fail("exp", lost, now=1)
    assert not gave_up.requeue and engine.state.jobs["exp"].state is JobState.FAILED
    assert gave_up.reason == "max-attempts: gave up after 1 attempt(s) (limit 1): ClusterLost NotReady"
    retry = engine.fail("prod", lost, now=1)
    assert retry.requeue and retry.delay == 5 and retry.exclude_clusters == frozenset({"m1"})
    assert engine.cycle(2).admitted == []                         # still in its 5 s backoff
    again = engine.cycle(6).admitted
    assert [a.job_id for a in again] == ["prod"] and "m1" not in again[0].placement


def test_installed_plugin_falls_back_when_cel_fails_on_a_job(installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(installed))
    catalog = PluginCatalog({**discover().entries, **CATALOG.entries})
    text = POLICY.replace("'tier' in job.labels && job.labels['tier'] == 'prod' ? 3 : 1", "int(job.labels['attempts'])")
    text = text.replace("      delay: 5\n", "      delay: 5\n      fallbackLimit: 1\n")
    engine = Engine(load_policy_text(text, "p.yaml", catalog).pipeline)
    engine.upsert_cluster(Cluster("m1", allocatable=parse_resources({"cpu": "10"})))
    engine.upsert_queue(Queue("default"))
    engine.submit(Job(id="j", name="j", tasks=[Task("w", 1, 1, parse_resources({"cpu": "1"}))]))   # no label
    assert [a.job_id for a in engine.cycle(0).admitted] == ["j"]
    gave_up = engine.fail("j", Failure(FailureKind.JOB_FAILED, cluster="m1"), now=1)
    assert not gave_up.requeue
    assert gave_up.reason == ("max-attempts: gave up after 1 attempt(s) (limit 1; fallback, p.yaml: "
                              "spec.plugins.max-attempts.limit: \"int(job.labels['attempts'])\": "
                              "no such field or key 'attempts'): JobFailed")


def test_describe_rows_use_description_or_docstring() -> None:
    rows = describe(PluginCatalog({c.name: PluginEntry(c, "tests 0") for c in (TCounter, TFifo)}))
    assert rows == [
        {"name": "t-counter", "stages": ["admit", "place"], "source": "tests 0",
         "description": "Admits at most ``limit`` jobs; in admit and place to prove the instance is shared."},
        {"name": "t-fifo", "stages": ["order"], "source": "tests 0", "description": ""},
    ]


def test_validate_cli_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from engine import policy
    from engine.cli import main

    monkeypatch.setattr(policy, "default_catalog", lambda: CATALOG)
    good, bad, missing = tmp_path / "good.yaml", tmp_path / "bad.yaml", tmp_path / "missing.yaml"
    good.write_text(GOOD)
    bad.write_text(GOOD.replace("order: [t-priority, t-fifo]", "order: [t-priority, drf]"))
    assert main(["policy", "validate", str(good)]) == 0
    assert main(["policy", "validate", str(good), str(bad), str(missing)]) == 1
    out, err = capsys.readouterr()
    assert out.count(f"OK {good}: policy test (placementMode gate; enqueue: t-priority; order: t-priority, t-fifo;") \
        == 2
    assert f"INVALID {bad}: spec.pipeline.order[1] (line 10): unknown plugin 'drf'" in err
    assert f"INVALID {missing}: cannot read policy: No such file or directory" in err
    assert "Traceback" not in err


def test_broken_third_party_package_is_named_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = tmp_path / "broken_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[atoll.plugins]\nbroken = broken_pkg_missing_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InputError) as info:
        discover()
    assert str(info.value).startswith("plugins: cannot load plugin package broken-pkg 1.0 (entry point broken = "
                                      "broken_pkg_missing_module): ModuleNotFoundError:")


def plugin_module(monkeypatch: pytest.MonkeyPatch, name: str, cls: type[Plugin]) -> tuple[str, ...]:
    """An importable module ``name`` that provides ``cls`` the way a pip-installed package does."""
    module = types.ModuleType(name)
    module.atoll_plugin_classes = hookimpl(lambda: [cls])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, module)
    return (name,)


def test_misspelt_hook_name_is_reported_at_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    class Typo(Plugin):
        name = "typo"
        stages = ("admit",)

        @hookimpl
        def atoll_admitt(self) -> None:
            return None

    with pytest.raises(InputError) as info:
        discover(entry_points=False, extra_modules=plugin_module(monkeypatch, "atoll_test_typo", Typo))
    assert str(info.value) == ("plugins: atoll_test_typo: plugin 'typo' marks atoll_admitt as hook implementation(s), "
                               "but engine/hookspecs.py has no such hook (misspelt?)")


def test_plugin_names_must_be_listable(monkeypatch: pytest.MonkeyPatch) -> None:
    class Upper(Plugin):
        name = "My.Plugin"
        stages = ("admit",)

    with pytest.raises(InputError, match=r"plugin name 'My.Plugin' must be lower-case letters, digits and '-'"):
        discover(entry_points=False, extra_modules=plugin_module(monkeypatch, "atoll_test_upper", Upper))


def test_a_name_clash_with_a_builtin_names_both_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    class MyFifo(Plugin):
        name = "fifo"
        stages = ("order",)

    with pytest.raises(InputError) as info:
        discover(entry_points=False, extra_modules=plugin_module(monkeypatch, "atoll_test_clash", MyFifo))
    assert str(info.value) == "plugins: plugin name 'fifo' is provided twice: by atoll (built-in) and by atoll_test_clash"


def test_builtins_are_listed_as_built_in(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    assert main(["plugins", "list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["gang"]["source"] == "atoll (built-in)" and rows["gang"]["stages"] == ["admit", "place"]
    assert all(row["description"] for row in rows.values())


def test_contributing_example_plugin_works() -> None:
    """The MaxGpus example in CONTRIBUTING.md is real code: it loads through a policy and refuses."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(code, "CONTRIBUTING.md", "exec"), namespace)
    cls = namespace["MaxGpus"]
    catalog = PluginCatalog({"max-gpus": PluginEntry(cls, "docs")})  # type: ignore[arg-type]
    policy = load_policy_text("apiVersion: atoll.dev/v1alpha1\nkind: SchedulingPolicy\nmetadata: {name: x}\n"
                              "spec:\n  pipeline: {admit: [max-gpus]}\n  plugins: {max-gpus: {limit: '2'}}\n",
                              "p.yaml", catalog)
    job = Job(id="a", name="a", tasks=[Task("w", 3, 3, {"nvidia.com/gpu": 1})])
    refusal = policy.pipeline.admit(job=job, state=None)
    assert refusal is not None and refusal.reason == "3 GPUs > limit 2"
