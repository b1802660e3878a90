"""Start, track and stop the fleet's processes.

Every component runs in its own session (process group), detached from ``fleet up`` so the
fleet outlives the command. ``<state>/pids/<name>.json`` records pid, start time and argv; a
pid is only signalled if /proc still shows the same start time (no killing a recycled pid).
``stop_all`` sends SIGTERM to each group in reverse start order, then SIGKILL after a grace.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


@dataclass(frozen=True)
class Proc:
    name: str
    pid: int
    start_ticks: int
    argv: list[str]
    log: Path
    seq: int


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat: start time in clock ticks, or None if the pid is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z" and not _threads_left(pid):
        return None
    return int(fields[19])


def _threads_left(pid: int) -> bool:
    """True while a process whose main thread is a zombie still has threads exiting (and holds its fds)."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def exited(pid: int) -> bool:
    """True once ``pid`` is gone or a zombie with no thread left (its ports and files are released)."""
    return _start_ticks(pid) is None


class Supervisor:
    """Process table persisted under ``state/pids`` with logs under ``state/logs``."""

    def __init__(self, state_dir: Path) -> None:
        self.pid_dir = state_dir / "pids"
        self.log_dir = state_dir / "logs"

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        existing = self.get(name)
        if existing is not None:
            raise RuntimeError(f"{name} is already running as pid {existing.pid}")
        if not Path(argv[0]).is_file():
            raise FileNotFoundError(f"{name}: binary {argv[0]} not found (run `e2e/fleet build`)")
        full_env = {k: v for k, v in os.environ.items() if k not in _PROXY_VARS}
        full_env["NO_PROXY"] = full_env["no_proxy"] = "127.0.0.1,localhost,::1"
        full_env.update(env or {})
        log = self.log_path(name)
        with open(log, "ab") as out:
            out.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {name}: {' '.join(argv)}\n".encode())
            out.flush()
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=full_env, start_new_session=True, close_fds=True)
        ticks = _start_ticks(p.pid) or 0
        seq = len(list(self.pid_dir.glob("*.json")))
        proc = Proc(name, p.pid, ticks, argv, log, seq)
        (self.pid_dir / f"{name}.json").write_text(json.dumps(
            {"pid": p.pid, "start_ticks": ticks, "argv": argv, "log": str(log), "seq": seq}))
        return proc

    def get(self, name: str) -> Proc | None:
        """The recorded process if it is still the same live process, else None."""
        f = self.pid_dir / f"{name}.json"
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            return None
        if _start_ticks(d["pid"]) != d["start_ticks"]:
            return None
        return Proc(name, d["pid"], d["start_ticks"], d["argv"], Path(d["log"]), d.get("seq", 0))

    def recorded(self) -> list[str]:
        """Names of all recorded components, in start order."""
        items = []
        for f in self.pid_dir.glob("*.json"):
            try:
                items.append((json.loads(f.read_text()).get("seq", 0), f.stem))
            except (OSError, ValueError):
                items.append((0, f.stem))
        return [n for _, n in sorted(items)]

    def alive(self, name: str) -> bool:
        return self.get(name) is not None

    def check_alive(self, name: str) -> None:
        """Raise with the log tail if a component has exited (used inside readiness waits)."""
        if self.get(name) is None:
            raise RuntimeError(f"{name} exited; log {self.log_path(name)}:\n{tail(self.log_path(name), 25)}")

    def _signal_and_wait(self, procs: list[Proc], sig: signal.Signals, grace: float) -> None:
        """Signal each process group, then wait up to ``grace`` seconds until none of them is left."""
        for p in procs:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(self.get(p.name) for p in procs):
            time.sleep(0.1)

    def stop(self, name: str, sig: signal.Signals = signal.SIGTERM, grace: float = 10.0) -> Proc:
        """Stop one running component (its whole process group); raises if it is not running or survives."""
        proc = self.get(name)
        if proc is None:
            raise RuntimeError(f"{name} is not running")
        self._signal_and_wait([proc], sig, grace)
        if self.get(name) is not None:
            self._signal_and_wait([proc], signal.SIGKILL, grace)
        if self.get(name) is not None:
            raise RuntimeError(f"{name} (pid {proc.pid}) still running {grace:.0f}s after SIGKILL")
        return proc

    def restart(self, name: str, sig: signal.Signals = signal.SIGTERM) -> Proc:
        """Stop one component and start it again with the same argv, keeping its place in the start order
        (fault-injection tests: an apiserver restarted under load)."""
        old = self.stop(name, sig)
        new = self.start(name, old.argv)
        record = self.pid_dir / f"{name}.json"
        data = json.loads(record.read_text())
        data["seq"] = old.seq
        record.write_text(json.dumps(data))
        return Proc(name, new.pid, new.start_ticks, new.argv, new.log, old.seq)

    def stop_all(self, grace: float = 10.0) -> list[str]:
        """Stop every recorded component (reverse order); returns the names that were running."""
        names = list(reversed(self.recorded()))
        running = [p for p in (self.get(n) for n in names) if p is not None]
        self._signal_and_wait(running, signal.SIGTERM, grace)
        # SIGKILL is asynchronous too: a big process (kube-apiserver) can take a moment to go
        self._signal_and_wait([p for p in running if self.get(p.name) is not None], signal.SIGKILL, grace)
        survivors = [p.name for p in running if self.get(p.name) is not None]
        if survivors:  # keep their pid files, so a later `down` can try again
            raise RuntimeError(f"still running {grace:.0f}s after SIGKILL: {survivors}")
        for n in names:
            (self.pid_dir / f"{n}.json").unlink(missing_ok=True)
        return [p.name for p in running]


def tail(path: Path, lines: int = 40) -> str:
    """Last ``lines`` lines of a log file (reads at most 256 KiB)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            data = f.read().decode(errors="replace")
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    return "\n".join(data.splitlines()[-lines:])


def port_in_use(port: int) -> bool:
    """True if something listens on 127.0.0.1:port (checked before starting, for a clear error)."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.3)
        return s.connect_ex(("127.0.0.1", port)) == 0


def rss_kib(pid: int) -> int:
    """Resident set size (KiB) of every process in the session led by ``pid``."""
    try:
        out = subprocess.run(["ps", "-o", "rss=", "--sid", str(pid)], capture_output=True, text=True,
                             check=False).stdout
        return sum(int(x) for x in out.split())
    except (OSError, ValueError):
        return 0
