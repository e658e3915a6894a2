"""Where the engine keeps what it believes: out of every agent's reach.

A task file is the agent's work and lives in the tree; the engine's own state (which run holds
which task, the runs' event keys, its locks, the `list` cache) must not be writable by an agent,
and the keys not even readable. Every sandbox mode keeps the git directory read-only, so that is
where it goes:

    <git dir>/specflux/                 this work tree's (a lane's worktree has its own git dir)
      locks/task-<id>.lock, new.lock    per-task locks, also taken (read-only) by an agent's `specflux`
      cache/summaries.json              `list` rows, keyed on each file's stat: display only
    <git common dir>/specflux/private/  shared by every worktree; hidden from sandboxed agents
      holds/, holds.lock                which run holds which task
      keys/<run>                        each run's event key
      runs/<run>/events.lock, engine.lock

Outside git there is no git directory: the same layout under a per-user folder,
`$SPECFLUX_STATE_HOME` (else `$XDG_STATE_HOME`, else `~/.local/state`) `/specflux/<name>-<hash>`,
named after the workspace's path. The engine hands SPECFLUX_STATE_HOME to an agent (whose HOME is
private), so that its own `specflux` finds the same folder.

Found with a few stats (no git process): `list` and `check` stay fast.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

FOLDER = "specflux"


def git_dirs(root: Path) -> tuple[Path, Path] | None:
    """(git dir, git common dir) of the work tree holding `root`, or None outside git: the
    nearest `.git` upwards, a folder, or a file saying `gitdir: PATH` (a worktree, whose git dir
    names the common one in its `commondir` file)."""
    for folder in (root, *root.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return dot_git, dot_git
        if dot_git.is_file():
            try:
                text = dot_git.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return None
            gitdir = text.partition("gitdir:")[2].strip()
            if not gitdir:
                return None
            git_dir = (folder / gitdir).resolve()
            try:
                common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
            except OSError:
                common = git_dir
            return git_dir, common
    return None


def state_home() -> Path:
    """The per-user folder for workspaces outside git."""
    chosen = os.environ.get("SPECFLUX_STATE_HOME") or os.environ.get("XDG_STATE_HOME")
    if chosen:
        return Path(chosen)
    import pwd  # the account's home, not $HOME: the same for the engine and for an agent given its own

    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        home = os.path.expanduser("~")
    return Path(home) / ".local" / "state"


def _outside_git(root: Path) -> Path:
    digest = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return state_home() / FOLDER / f"{root.name or 'root'}-{digest}"


def tree_dir(root: Path) -> Path:
    """This work tree's engine folder (locks, cache)."""
    found = git_dirs(root)
    return found[0] / FOLDER if found else _outside_git(root)


def private_dir(root: Path) -> Path:
    """The engine's private folder, shared by the work tree's worktrees (holds, keys, run locks)."""
    found = git_dirs(root)
    return (found[1] / FOLDER if found else _outside_git(root)) / "private"


def old_places(ws_dir: Path, root: Path) -> dict[str, Path]:
    """Where older versions kept what now lives here (read once, then moved or left)."""
    found = git_dirs(root)
    old = {"locks": ws_dir / "locks", "cache": ws_dir / "cache", "keys": ws_dir / "locks" / "keys"}
    if found:
        old["git_keys"] = found[1] / "specflux-keys"
    return old


def hidden(root: str | os.PathLike) -> list[str]:
    """The folders a sandboxed command must not read: the engine's private folder (made first, so
    that it is hidden even when the engine creates its contents later) and where older versions
    kept the runs' keys."""
    root = Path(root)
    private = private_dir(root)
    try:
        private.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        pass
    found = [private]
    places = old_places(root / ".specflux", root)
    found += [p for p in (places.get("git_keys"), places["keys"]) if p is not None]
    return [str(p) for p in found if p.is_dir() and not p.is_symlink()]


def prepare_task_lock(root: str | os.PathLike, task_id: str) -> None:
    """Make the lock file of `task_id` in this tree's engine folder, for an agent's own `specflux`,
    which cannot create it there (read-only to it) but can take it once it exists."""
    folder = tree_dir(Path(root)) / "locks"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.close(os.open(folder / f"task-{task_id}.lock", os.O_RDWR | os.O_CREAT, 0o666))
    except OSError:
        pass  # the agent's `specflux` says what it cannot do
