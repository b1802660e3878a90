"""CLI habits: exit codes (0 ok, 1 invalid input, 2 usage), --version, --kubeconfig/--context like kubectl, one
line and no traceback for any user error (kubeconfig, connection, pipes, paths), -o json|yaml, output folders
made before the work, tables never cut when piped."""

from __future__ import annotations

import http.server
import io
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, Mapping

import pytest
import yaml

from engine.cli import main
from engine.commands.output import PIPED_WIDTH, console
from engine.sim import cli as sim_cli

ROOT = Path(__file__).resolve().parents[1]


def atoll(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 120,
          ) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(done: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("atoll: error: "), done.stderr
    return lines[0]


# -- exit codes and --version --------------------------------------------------------------------------------
def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("atoll ")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main([]) == 2
    assert "a COMMAND is required" in capsys.readouterr().err
    for argv in (["simulate", "--no-such-flag"], ["policy"], ["plugins", "list", "-o", "xml"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    capsys.readouterr()
    assert main(["simulate"]) == 2                                     # no SCENARIO
    assert main(["simulate", "--compare", "a.yaml", "quickstart"]) == 2
    assert main(["explain", "no-slash"]) == 2
    assert main(["webhook", "--cert", "c.pem"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("atoll: error: ") == 4


def test_invalid_input_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: &a [*a]\n")
    assert main(["simulate", str(bad)]) == 1
    assert main(["policy", "show", str(bad)]) == 1
    assert main(["bench", "--policy", str(tmp_path / "absent.yaml")]) == 1
    assert main(["simulate", "quickstart", "--policy", str(tmp_path)]) == 1        # a directory
    err = capsys.readouterr().err
    assert err.count("atoll: error: ") == 4 and "Traceback" not in err
    assert "Is a directory" in err and "recursive" in err


# -- pipes and tables ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [["plugins", "list", "--json"], ["plugins", "list"], ["policy", "show", "default"]])
def test_a_closed_pipe_ends_quietly(args: list[str]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()                       # like `| head` that has read enough: every write gets EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == "", err


def test_piped_tables_are_not_cut() -> None:
    done = atoll("plugins", "list")
    assert done.returncode == 0, done.stderr
    rows = json.loads(atoll("plugins", "list", "-o", "json").stdout)
    for row in rows:
        assert any(row["name"] in line and row["description"] in line for line in done.stdout.splitlines()), row
    assert console(io.StringIO()).width == PIPED_WIDTH


def test_output_formats_are_data() -> None:
    listed = yaml.safe_load(atoll("plugins", "list", "-o", "yaml").stdout)
    assert {"name", "stages", "source", "description"} <= set(listed[0])
    shown = json.loads(atoll("policy", "show", "default", "-o", "json").stdout)
    assert shown["kind"] == "SchedulingPolicy" and "drf" in shown["spec"]["plugins"]
    bench = yaml.safe_load(atoll("bench", "--jobs", "50", "--queues", "2", "--clusters", "2", "-o", "yaml").stdout)
    assert isinstance(bench, dict) and bench


# -- output files ---------------------------------------------------------------------------------------------
def test_report_folders_are_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out" / "deeper" / "r.json"
    assert main(["simulate", "quickstart", "--report", str(out)]) == 0
    assert json.loads(out.read_text())["scenario"] == "quickstart"


def test_unwritable_output_fails_before_the_simulation(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("simulated although the report cannot be written")

    monkeypatch.setattr(sim_cli, "simulate", never)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["simulate", "quickstart", "--report", str(blocker / "r.json")]) == 1
    assert main(["simulate", "quickstart", "--plot", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "cannot create the folder" in err and "is a directory" in err


# -- kubeconfig, context, API server ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dead_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound (so no other test or xdist worker can take it while
    these tests run) but never listening. A port closed right after binding could be reused meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        yield port


BINDING = {"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
           "metadata": {"name": "job-a", "namespace": "ns", "annotations": {"atoll.dev/queue": "team-a",
                                                                          "atoll.dev/pending-reason": "queue full"}},
           "spec": {"resource": {"kind": "Job", "name": "a"}, "suspension": {"scheduling": True}}}


@pytest.fixture(scope="module")
def fake_api() -> Iterator[str]:
    """A tiny HTTP "API server": the binding ns/job-a; 401 on /unauthorized paths' cluster (see kubeconfig)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:           # noqa: N802 (http.server's name)
            body: Mapping[str, object]
            if self.headers.get("Authorization") == "Bearer bad":
                body, status = {"kind": "Status", "code": 401, "message": "Unauthorized"}, 401
            elif self.path.startswith("/apis/work.karmada.io/v1alpha2/namespaces/ns/resourcebindings/job-a"):
                body, status = BINDING, 200
            elif self.path == "/version":
                body, status = {"major": "1", "minor": "31"}, 200
            else:
                body, status = {"kind": "Status", "code": 404}, 404
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def kubeconfig(tmp_path: Path, fake: str, dead_port: int) -> Path:
    dead = f"http://127.0.0.1:{dead_port}"
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "dead",
           "clusters": [{"name": "dead", "cluster": {"server": dead}}, {"name": "fake", "cluster": {"server": fake}}],
           "users": [{"name": "u", "user": {"token": "good"}}, {"name": "bad", "user": {"token": "bad"}}],
           "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}},
                        {"name": "fake", "context": {"cluster": "fake", "user": "u"}},
                        {"name": "refused", "context": {"cluster": "fake", "user": "bad"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_explain_with_context_and_output(tmp_path: Path, fake_api: str, dead_port: int) -> None:
    kc = str(kubeconfig(tmp_path, fake_api, dead_port))
    done = atoll("explain", "ns/job-a", "--kubeconfig", kc, "--context", "fake")
    assert done.returncode == 0, done.stderr
    assert "why: queue full" in done.stdout
    data = json.loads(atoll("explain", "ns/job-a", "--kubeconfig", kc, "--context", "fake", "-o", "json").stdout)
    assert data["state"] == "waiting" and data["queue"] == "team-a" and data["why"] == "queue full"
    data = yaml.safe_load(atoll("explain", "ns/job-a", "--context", "fake", "-o", "yaml",
                                env={"KUBECONFIG": kc}).stdout)                 # $KUBECONFIG, like kubectl
    assert data["binding"] == "ns/job-a"


@pytest.mark.parametrize("case, words", [
    ("missing", "kubeconfig not found"),
    ("garbage", "cannot use kubeconfig"),
    ("unknown context", "cannot use kubeconfig context 'nope'"),
    ("unreachable", "cannot reach the API server"),
    ("refused", "answered 401 Unauthorized (the kubeconfig's credentials were refused)"),
    ("no kubeconfig at all", "no kubeconfig"),
])
def test_kubeconfig_and_connection_errors_are_one_line(case: str, words: str, tmp_path: Path, fake_api: str,
                                                      dead_port: int) -> None:
    kc = kubeconfig(tmp_path, fake_api, dead_port)
    garbage = tmp_path / "garbage"
    garbage.write_text("clusters: [")
    args, env = {
        "missing": (["--kubeconfig", str(tmp_path / "absent")], {}),
        "garbage": (["--kubeconfig", str(garbage)], {}),
        "unknown context": (["--kubeconfig", str(kc), "--context", "nope"], {}),
        "unreachable": (["--kubeconfig", str(kc)], {}),
        "refused": (["--kubeconfig", str(kc), "--context", "refused"], {}),
        "no kubeconfig at all": ([], {"HOME": str(tmp_path), "KUBECONFIG": ""}),
    }[case]
    assert words in one_line_error(atoll("explain", "ns/job-a", *args, env=env))
    if case in ("unreachable", "refused", "garbage"):
        line = one_line_error(atoll("run", "--metrics-port", "0", "--policy", "policies/default.yaml", *args,
                                    env=env))
        assert words in line
        line = one_line_error(atoll("webhook", "--insecure-http", "--port", "0", "--policy-configmap", "ns/p",
                                    *args, env=env))
        assert words in line


def test_webhook_certificate_problems_are_one_line(tmp_path: Path) -> None:
    notpem, badpem = tmp_path / "notpem", tmp_path / "bad.pem"
    notpem.write_text("x")
    badpem.write_text("-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n")
    for cert, words in ((tmp_path / "absent.pem", "--cert: cannot read: No such file"),
                        (notpem, "--cert: not a PEM file"), (badpem, "cannot use the certificate and key")):
        line = one_line_error(atoll("webhook", "--cert", str(cert), "--key", str(cert), "--port", "0"))
        assert words in line and str(cert) in line


@pytest.mark.parametrize("argv", [
    ["webhook", "--insecure-http", "--port", "{port}"],
    ["run", "--metrics-port", "{port}"],
    ["run", "--dashboard-port", "{port}"],
    ["simulate", "scenarios/quickstart.yaml", "--serve", "--dashboard-port", "{port}"],
])
@pytest.mark.parametrize("port", ["70000", "-1", "65536"])
def test_a_port_outside_0_to_65535_is_a_usage_error(argv: list[str], port: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``atoll webhook --port 70000`` listened on port 4464 (70000 mod 65536) without a word, and ``simulate --serve
    --dashboard-port 70000`` ended in an OverflowError traceback from bind()."""
    from engine.cli import build_parser

    with pytest.raises(SystemExit) as info:          # parsed only: nothing is served if the port is taken
        build_parser().parse_args([a.replace("{port}", port) for a in argv])
    assert info.value.code == 2
    flag = argv[-2]
    assert f"argument {flag}: must be a port from 0 to 65535, got {port}" in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["bench-webhook", "--rate", "0"], "argument --rate: must be a finite number above 0, got 0"),
    (["bench-webhook", "--rate", "nan"], "argument --rate: must be a finite number above 0, got nan"),
    (["bench-webhook", "--requests", "0"], "argument --requests: must be at least 1, got 0"),
    (["bench-webhook", "--concurrency", "-1"], "argument --concurrency: must be at least 1, got -1"),
    (["webhook", "--reload-interval", "0"], "argument --reload-interval: must be a finite number above 0, got 0"),
    (["webhook", "--reload-interval", "-1"], "argument --reload-interval: must be a finite number above 0, got -1"),
    (["webhook", "--shutdown-delay", "-1"], "argument --shutdown-delay: must be a finite number of 0 or more, got -1"),
    (["webhook", "--shutdown-delay", "inf"], "argument --shutdown-delay: must be a finite number of 0 or more, got inf"),
    (["run", "--concurrency", "0"], "argument --concurrency: must be at least 1, got 0"),
    (["run", "--watch-timeout", "0"], "argument --watch-timeout: must be at least 1, got 0"),
    (["run", "--stuck-after", "nan"], "argument --stuck-after: must be a finite number of 0 or more, got nan"),
    (["run", "--stuck-after", "-5"], "argument --stuck-after: must be a finite number of 0 or more, got -5"),
])
def test_counts_rates_and_intervals_out_of_range_are_usage_errors(argv: list[str], says: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """bench-webhook --rate 0 ended in ZeroDivisionError and --requests 0 in IndexError (tracebacks); run
    --concurrency 0 made a Semaphore(0) that no binding write ever passes; --reload-interval 0 or less polled the
    files in a busy loop; --stuck-after nan compared false everywhere (stuck pods never failed, watches still on)."""
    from engine.cli import build_parser

    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2 and says in capsys.readouterr().err
