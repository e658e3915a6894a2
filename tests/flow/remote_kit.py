"""What the tests of workers sharing a git remote (tests/flow/test_remote_*.py) set up: a bare
repository holding a specflux project, clones of it, a real `git daemon` on loopback, and workers
as processes of their own running the fake agent CLI (tests/fixtures/fake_flow_agent.py)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import GIT_ENV, git
from patience import patience

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_flow_agent.py"
SPECFLUX = [sys.executable, "-m", "specflux.cli"]


def agent_cmd() -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"


def env_for(tmp_path: Path, plan: dict) -> dict[str, str]:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return {**os.environ, **GIT_ENV, "SPECFLUX_FAKE_PLAN": str(path), "SPECFLUX_FAKE_STATE": str(tmp_path / "agent-state"),
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def coder(task: str, sleep: float = 0.0, **extra) -> dict:
    """A coder that writes out/<task>.txt, ticks its boxes and writes its chain output."""
    return {"write": {f"out/{task}.txt": f"task {task}\n"}, "check": True, "chain": f"out/{task}.txt written",
            "sleep": sleep, **extra}


def make_origin(tmp_path: Path, tasks: list[tuple[str, list[str]]], *, lease_s: float = 3, skew_s: float = 0.5,
                poll_s: float = 0.3) -> Path:
    """A bare repository `origin.git` whose main branch holds a specflux project with `tasks`
    ([(title, [dependency ids])], numbered from 1) and a `[remote]` section in its config."""
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("# project\n")
    specflux(seed, "init", str(seed))
    for title, deps in tasks:
        args = ["new", title, "--ac", f"{title} is done"]
        for dep in deps:
            args += ["--dep", dep]
        specflux(seed, *args)
    config = seed / ".specflux" / "config.toml"  # the fake agent keeps its notes outside the repository: unconfined
    config.write_text(config.read_text().replace('sandbox = "auto"', 'sandbox = "off"') + f"\n[remote]\nlease_s = {lease_s}\nskew_s = {skew_s}\npoll_s = {poll_s}\n"
                      "give_up_s = 120\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "project")
    bare = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    return bare


def clone(url: str, dest: Path) -> Path:
    git(dest.parent, "clone", "-q", url, str(dest))
    for key, value in (("user.name", "Worker"), ("user.email", "worker@example.com"), ("commit.gpgsign", "false")):
        git(dest, "config", key, value)
    return dest


def specflux(repo: Path, *args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([*SPECFLUX, "--root", str(repo), *args], capture_output=True, text=True,
                          env=env or {**os.environ, **GIT_ENV}, timeout=300)
    if check:
        assert done.returncode == 0, f"specflux {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


def worker(repo: Path, name: str, env: dict, *extra: str) -> subprocess.Popen:
    """`flow start --all --remote origin` in `repo`, as a process of its own (its output in repo/../NAME.log)."""
    log = open(repo.parent / f"{name}.log", "w")
    return subprocess.Popen([*SPECFLUX, "--root", str(repo), "flow", "start", "--all", "--remote", "origin",
                             "--worker", name, "--agent", "command", "--cmd", agent_cmd(), *extra],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def log_of(repo: Path, name: str) -> str:
    return (repo.parent / f"{name}.log").read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """`git daemon --enable=receive-pack` serving `base` on 127.0.0.1:`port`; stop and start it at will."""

    def __init__(self, base: Path, port: int | None = None):
        self.base, self.port = base, port or free_port()
        self.process: subprocess.Popen | None = None
        self._moves_left = 0 if port else 3  # until it first listens, no clone knows its port

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> "Daemon":
        self.process = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
                                         f"--base-path={self.base}", "--listen=127.0.0.1", f"--port={self.port}",
                                         str(self.base)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + patience(10)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:  # the port was taken between free_port() and now (another test's,
                if self._moves_left:             # under pytest-xdist): a daemon no clone knows yet takes another
                    self._moves_left -= 1
                    self.port = free_port()
                    return self.start()
                raise AssertionError(f"git daemon exited with {self.process.returncode}: port {self.port} taken?")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    self._moves_left = 0
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"git daemon did not listen on port {self.port} within {patience(10):.0f}s")

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait()

    def __enter__(self) -> "Daemon":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()


def remote_status(bare: Path, task: str) -> str:
    """Task `task`'s status on the bare repository's main branch."""
    text = git(bare, "show", f"main:.specflux/task-states/task-{task}-state.md")
    return json.loads(text.split("```json", 1)[1].split("```", 1)[0])["status"]


def completions(bare: Path, task: str) -> int:
    """How many commits on main (merges aside) turned task `task`'s status to complete."""
    log = git(bare, "log", "main", "-p", "--format=commit %H", "--", f".specflux/task-states/task-{task}-state.md")
    return sum(1 for line in log.splitlines() if line.startswith("+") and '"status": "complete"' in line)


def claims_on(bare: Path) -> list[str]:
    return git(bare, "for-each-ref", "--format=%(refname)", "refs/specflux/claims/").split()
