"""Helpers shared by test modules (fixtures live in conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from patience import patience

from specflux.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    """`specflux --root ROOT ARGS...` in-process: exit code, stdout, stderr."""
    capsys.readouterr()
    code = main(["--root", str(root), *args])
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys, root: Path, *args: str) -> str:
    """Like `run`, asserting exit 0; returns stdout."""
    code, out, err = run(capsys, root, *args)
    assert code == 0, f"specflux {' '.join(args)} -> {code}: {err}"
    return out


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (not gone, not a zombie); needs /proc."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def fake_agent_plan(tmp_path: Path, **entries) -> dict[str, str]:
    """The environment for tests/fixtures/fake_flow_agent.py with this plan (key "coder:1" is
    written coder__1); the agent saves what it was told under tmp_path/agent-state."""
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({k.replace("__", ":"): v for k, v in entries.items()}))
    return {"SPECFLUX_FAKE_PLAN": str(path), "SPECFLUX_FAKE_STATE": str(tmp_path / "agent-state"),
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def specflux_process(repo: Path, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`specflux --root REPO ARGS...` as a process of its own."""
    return subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(repo), *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=patience(timeout))


def completions(repo: Path, task: str, ref: str = "HEAD") -> int:
    """The commits that completed `task` (`Specflux-Status: complete`): a one-lane run's reviewer
    commit that accepted it (flow/early_acceptance.py), a parallel run's acceptance, a person's
    `specflux complete`."""
    fmt = "%x1e%(trailers:key=Specflux-Task,valueonly,separator=%x2C)%x1f%(trailers:key=Specflux-Status,valueonly,separator=%x2C)"
    out = subprocess.run(["git", "log", f"--format={fmt}", ref], cwd=repo, capture_output=True, text=True,
                         check=True).stdout
    records = [r.strip().split("\x1f") for r in out.split("\x1e") if r.strip()]
    return sum(1 for r in records if len(r) == 2 and r[0].strip() == task and r[1].strip() == "complete")


LEFTOVER = ("import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n")


def hold(path: Path) -> subprocess.Popen:
    """A leftover process holding `path` through a read-only descriptor (all flock needs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    proc = subprocess.Popen([sys.executable, "-c", LEFTOVER, str(path), "stray-lock-holder"], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout.readline() == "held\n"
    return proc
