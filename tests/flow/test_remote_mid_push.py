"""A push cut off half-way: a worker's machine disappearing during its integration push, and the git
daemon killed during one. The remote is before or after, never half: the task is complete on the
remote exactly when its claim is gone, and the queue finishes with each task complete once."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from conftest import git
from patience import patience
from remote_kit import (Daemon, claims_on, clone, coder, completions, env_for, log_of, make_origin, remote_status,
                        worker)

HOOK = """#!/bin/sh
# the first push that moves main: say so, then take a while (the moment the test kills something)
while read old new ref; do
  if [ "$ref" = "refs/heads/main" ] && [ ! -e "{mark}" ]; then touch "{mark}"; sleep 3; fi
done
exit 0
"""


def _slow_first_integration(bare: Path, mark: Path) -> None:
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(HOOK.format(mark=mark))
    hook.chmod(0o755)


def _wait_for(path: Path, timeout: float = 60) -> None:
    end = time.time() + patience(timeout)
    while not path.exists():
        assert time.time() < end, f"{path} never appeared"
        time.sleep(0.02)


def _before_or_after(bare: Path, task: str) -> str:
    complete = remote_status(bare, task) == "complete"
    claimed = any(r.endswith(f"/{task}") for r in claims_on(bare))
    assert complete != claimed, f"half: complete={complete}, claimed={claimed}"
    return "after" if complete else "before"


def test_a_worker_killed_during_its_integration_push_leaves_the_remote_before_or_after(tmp_path):
    bare = make_origin(tmp_path, [("Only", [])], lease_s=2, skew_s=0.5)
    mark = tmp_path / "pushing"
    _slow_first_integration(bare, mark)
    env = env_for(tmp_path, {"coder:1": [coder("1")]})
    with Daemon(tmp_path) as daemon:
        a, b = clone(daemon.url("origin.git"), tmp_path / "a"), clone(daemon.url("origin.git"), tmp_path / "b")
        first = worker(a, "wa", env)
        _wait_for(mark)
        os.killpg(first.pid, signal.SIGKILL)  # the machine is gone mid-push
        first.wait()
        time.sleep(3.5)  # the server side finishes (or not) on its own
        _before_or_after(bare, "1")
        second = worker(b, "wb", env)
        assert second.wait(timeout=120) == 0, log_of(b, "wb")
    assert remote_status(bare, "1") == "complete" and completions(bare, "1") == 1
    assert claims_on(bare) == []


def test_the_daemon_killed_during_an_integration_push_then_back_the_worker_finishes(tmp_path):
    bare = make_origin(tmp_path, [("Only", []), ("Next", ["1"])], lease_s=30)
    mark = tmp_path / "pushing"
    _slow_first_integration(bare, mark)
    env = env_for(tmp_path, {"coder:1": [coder("1")], "coder:2": [coder("2")]})
    daemon = Daemon(tmp_path).start()
    try:
        a = clone(daemon.url("origin.git"), tmp_path / "a")
        proc = worker(a, "wa", env)
        _wait_for(mark)
        daemon.kill()  # and every receive-pack it started
        assert _before_or_after(bare, "1") == "before"
        time.sleep(2.0)
        daemon.start()
        assert proc.wait(timeout=120) == 0, log_of(a, "wa")
    finally:
        daemon.kill()
    assert "waiting for the remote origin" in log_of(a, "wa")
    for task in "12":
        assert remote_status(bare, task) == "complete" and completions(bare, task) == 1
    assert claims_on(bare) == []
    assert git(bare, "rev-parse", "main") == git(a, "rev-parse", "main")
