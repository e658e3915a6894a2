"""One worker (or one crew of `--parallel` workers) per clone: the worker checks out the remote's
tip in the clone and works there, so a second one in the same clone would pull the tree from under
the first. The first holds an `flock` on `<git common dir>/specflux-worker.lock` (shared by the
clone's worktrees; released by the kernel when its process ends, however it ends) and writes who it
is into the file; a second is refused at once, with the first one's name, pid and since when."""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from specflux.base.errors import SpecfluxError


class AnotherWorker(SpecfluxError):
    """A worker already runs in this clone."""


def lock_path(root: Path) -> Path:
    from specflux.vcs.process import run_git
    from specflux.vcs.refs import GitDirs

    dirs = GitDirs.of(root)  # the git dir's files, where plain: no git process
    if dirs is not None:
        return dirs.common.resolve() / "specflux-worker.lock"
    common = run_git(("rev-parse", "--git-common-dir"), root).stdout.strip() or ".git"
    return (root / common).resolve() / "specflux-worker.lock"


@contextmanager
def only_worker(root: Path, worker: str, remote: str, branch: str) -> Iterator[None]:
    """Hold this clone's worker lock while the block runs; AnotherWorker when a live worker has it."""
    path = lock_path(root)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AnotherWorker(_refusal(path)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"worker": worker, "pid": os.getpid(), "remote": remote, "branch": branch,
                                  "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # (closing releases the lock)


def _refusal(path: Path) -> str:
    try:
        held = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        held = {}
    if not isinstance(held, dict):
        held = {}
    who = (f"worker {held.get('worker', '?')} (pid {held.get('pid', '?')}) on {held.get('remote', '?')}/"
           f"{held.get('branch', '?')}, since {held.get('since', '?')}") if held else "another worker (it has not said who yet)"
    return (f"a worker already runs in this clone: {who}. One worker per clone (it checks out the remote's tip "
            "here): stop it first (Ctrl-C in its terminal), use another clone, or run more workers in this one "
            "with `flow start --all --remote NAME --parallel N`")
