"""Running the git CLI: one process with English messages, and what its output means.

`run_git` is the one place a git process starts from a path (`Git` runs its own through it);
`run_git_waiting` retries while another git holds a lock (`BUSY`); `committed_sha` reads what `git commit` said,
telling "nothing to commit" and an unknown identity apart from a failure.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from specflux.base.errors import GitError, IdentityError

IDENTITY_HELP = (
    "git does not know who you are, so it cannot commit. Tell it once with:\n"
    '  git config --global user.name "Your Name"\n'
    '  git config --global user.email "you@example.com"'
)
_IDENTITY_MARKS = ("Please tell me who you are", "identity unknown", "unable to auto-detect",
                   "auto-detection is disabled", "empty ident name")  # fmt: skip
_NOTHING_MARKS = ("nothing to commit", "nothing added to commit", "no changes added to commit")
# Another git holds the index (or a ref, or the config file), or committed between our reading
# HEAD and locking it.
BUSY = re.compile(r"\.lock': File exists|cannot lock ref|could not lock config file")
_SUMMARY = re.compile(r"^\[.* ([0-9a-f]{40,64})\] ", re.MULTILINE)
# The commit summary line then shows the whole sha (a 40-hex prefix in a SHA-256 repository).
FULL_SHA = ("-c", "core.abbrev=40")
# specflux's commits start no `git maintenance run --auto` of their own (a process after each
# commit: 2.4 of the 13.4 git processes of a workflow step); a run's history commit, at its end,
# lets git maintain as after any commit (`Git.commit(maintain=True)`), and so do the user's own.
NO_MAINTENANCE = ("-c", "maintenance.auto=false")


def run_git(
    args: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None, input: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `git ARGS` in `cwd` (with `env` over this process's environment) and return its text."""
    full = {**os.environ, "LC_ALL": "C", **(env or {})}  # English messages, to recognise failures
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=full, input=input,
        stdin=None if input is not None else subprocess.DEVNULL, capture_output=True,
    )  # fmt: skip
    out, err = _text(done.stdout), _text(done.stderr)
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def run_git_waiting(
    args: Sequence[str], cwd: Path, wait_s: float, env: Mapping[str, str] | None = None, input: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """`run_git`, tried again (with backoff) for up to `wait_s` seconds while another git holds a
    lock (`BUSY`): git fails at once rather than wait for it."""
    deadline = time.monotonic() + wait_s
    delay = 0.01
    while True:
        done = run_git(args, cwd, env=env, input=input)
        if done.returncode == 0 or not BUSY.search(done.stderr) or time.monotonic() > deadline:
            return done
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.3)


def _text(data: bytes) -> str:
    """What `subprocess.run(text=True)` would give: UTF-8, universal newlines."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def nul_list(paths: Iterable[str]) -> bytes:
    """Paths for git's `-z --stdin` / `--pathspec-file-nul`: each one NUL-terminated."""
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def literal_pathspec(relative: str) -> str:
    """A pathspec that matches `relative` only, even when it holds `*`, `?` or `[`."""
    return f":(literal){relative}"


def check(done: subprocess.CompletedProcess[str], what: str) -> None:
    """Raise GitError saying `git WHAT failed` when the process did."""
    if done.returncode:
        raise GitError(f"git {what} failed: {(done.stderr or done.stdout).strip()}")


def committed_sha(done: subprocess.CompletedProcess[str]) -> str:
    """The sha `git commit` reported, "" when there was nothing to commit, or the error."""
    if done.returncode == 0:
        found = _SUMMARY.search(done.stdout)
        if not found:
            raise GitError(f"git commit said nothing recognisable: {done.stdout.strip()}")
        return found.group(1)
    if any(mark in done.stdout for mark in _NOTHING_MARKS):
        return ""
    if any(mark in done.stderr for mark in _IDENTITY_MARKS):
        raise IdentityError(IDENTITY_HELP)
    raise GitError(f"git commit failed: {(done.stderr or done.stdout).strip()}")
