"""Where a specflux workspace lives and what its paths are called."""

from __future__ import annotations

import os
import re
from specflux.base.records import record
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from specflux.base.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from specflux.store.config import Config

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
STATE_FILE = re.compile(r"task-([A-Za-z0-9][A-Za-z0-9._-]*)-state\.md")
GITIGNORE = (
    "# specflux: locks and the list cache are per machine; recordings may hold file contents\n"
    "locks/\ncache/\nrecordings/\n"
    "# workflow runs: events, state and narrative are history; these are the engine's scratch\n"
    "runs/*/recordings/\nruns/*/steps/\nruns/*/handins/\nruns/*/*.lock\n"
    "# parallel runs: one git worktree per coder attempt, removed when the run ends\n"
    "worktrees/\n"
    "board.html\n"  # `specflux board`'s page, generated from the files above
    "# what a run put back after an agent changed it (kept, never lost)\n"
    "reverted/\n"
)


def ensure_ignored(ws_dir: Path) -> None:
    """Add any of GITIGNORE's lines missing from `.specflux/.gitignore` (older workspaces)."""
    path = ws_dir / ".gitignore"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    have = set(text.splitlines())
    missing = [line for line in GITIGNORE.splitlines() if line not in have]
    if missing:
        sep = "" if not text or text.endswith("\n") else "\n"
        path.write_text(text + sep + "\n".join(missing) + "\n", encoding="utf-8")


def check_folder(path: Path) -> Path:
    """`path` if it is a folder or can become one; a UsageError naming what is in the way."""
    for part in (path, *path.parents):
        if part.exists() or part.is_symlink():
            if not part.is_dir():
                raise UsageError(f"{part} is a file, not a folder: give a new or existing folder")
            break
    return path


def check_id(task_id: str) -> str:
    task_id = str(task_id).lstrip("#")
    if not ID_PATTERN.fullmatch(task_id):
        raise UsageError(f"{task_id!r} is not a task id (letters, digits, '.', '_' or '-', e.g. 101 or T001)")
    return task_id


@record(frozen=True)
class Workspace:
    root: Path  # the folder holding .specflux/

    @cached_property
    def dir(self) -> Path:
        return self.root / ".specflux"

    @cached_property
    def states_dir(self) -> Path:
        return self.dir / "task-states"

    @cached_property
    def archives_dir(self) -> Path:
        return self.dir / "archives"

    @property
    def recordings_dir(self) -> Path:
        return self.dir / "recordings"

    def task_path(self, task_id: str) -> Path:
        return self.states_dir / f"task-{task_id}-state.md"

    def task_rel(self, task_id: str) -> str:
        """The task file's path as shown to the user: relative to the workspace root."""
        return f".specflux/task-states/task-{task_id}-state.md"

    def _in_the_way(self, folder: Path) -> Exception:
        from specflux.base.files import FileSystemError

        return FileSystemError("is a file where specflux keeps a folder; move it away", self.relative(folder))

    def ensure_folder(self, folder: Path) -> None:
        """Create `folder` (and its parents) or say what is in the way."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise self._in_the_way(folder) from None
        except OSError as e:
            from specflux.base.files import os_error

            raise os_error(e, self.relative(folder), "create") from None

    def archive_path(self, task_id: str) -> Path:
        return self.archives_dir / f"task-{task_id}-archive.md"

    def lock_path(self, task_id: str) -> Path:
        return self.state_dir / "locks" / f"task-{task_id}.lock"

    @cached_property
    def state_dir(self) -> Path:
        """The engine's folder for this tree, out of agents' reach (store/state_dir.py)."""
        from specflux.store.state_dir import tree_dir

        return tree_dir(self.root)

    @cached_property
    def private_dir(self) -> Path:
        """The engine's private folder: holds, keys, run locks (store/state_dir.py)."""
        from specflux.store.state_dir import private_dir

        return private_dir(self.root)

    def relative(self, path: Path) -> str:
        if os.sep == "/":  # the common case in plain strings (a step asks ~35 times)
            full, root = os.fspath(path), os.fspath(self.root)
            if full.startswith(root + "/"):
                return full[len(root) + 1:]
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    @cached_property
    def config(self) -> Config:
        from specflux.store.config import load_config  # not at the top: `show` never reads it

        return load_config(self.dir / "config.toml")

    def template(self, name: str = "task-state.md") -> str:
        """A workspace's own template in .specflux/templates/ wins over the packaged one."""
        override = self.dir / "templates" / name
        if override.is_file():
            return override.read_text(encoding="utf-8")
        from importlib import resources

        return resources.files("specflux.templates").joinpath(name).read_text(encoding="utf-8")

    def task_ids(self) -> list[str]:
        """Ids of every task-state file, in natural order (2 before 10, numbers before slugs)."""
        try:
            names = os.listdir(self.states_dir)
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            raise self._in_the_way(self.states_dir) from None
        ids = [m.group(1) for m in map(STATE_FILE.fullmatch, names) if m]
        return sorted(ids, key=int if all(map(str.isdigit, ids)) else natural_key)  # the same order

    @classmethod
    def find(cls, start: Path | None = None, explicit: str | Path | None = None) -> "Workspace":
        """--root, then SPECFLUX_ROOT, then the nearest folder upwards holding .specflux/ (like git)."""
        chosen = explicit or os.environ.get("SPECFLUX_ROOT")
        if chosen:
            root = Path(chosen).resolve()
            if not (root / ".specflux").is_dir():
                raise NotFoundError(f"no .specflux/ folder in {root} (run `specflux init` there)")
            return cls(root)
        here = (start or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            if (folder / ".specflux").is_dir():
                return cls(folder)
        raise NotFoundError(f"no .specflux/ folder in {here} or above it (run `specflux init` to create one)")

    @classmethod
    def init(cls, root: Path) -> tuple["Workspace", bool]:
        """Create .specflux/ under `root`; returns the workspace and whether it was new.

        Every run also registers the task-state merge driver (`vcs.merge_driver.register_driver`): the
        `.gitattributes` line, and inside a git repository the driver in its local config, which
        git does not clone, so `specflux init` in a fresh clone is what sets it there."""
        ws = cls(check_folder(root.resolve()))
        check_folder(ws.states_dir)
        check_folder(ws.archives_dir)
        created = not ws.dir.exists()
        try:
            ws.states_dir.mkdir(parents=True, exist_ok=True)
            ws.archives_dir.mkdir(parents=True, exist_ok=True)
            from specflux.store.config import DEFAULT_CONFIG

            for name, text in ((".gitignore", GITIGNORE), ("config.toml", DEFAULT_CONFIG)):
                if not (ws.dir / name).exists():
                    (ws.dir / name).write_text(text, encoding="utf-8")
            from specflux.vcs.merge_driver import register_driver

            register_driver(ws.root)
        except OSError as e:
            from specflux.base.files import os_error

            raise os_error(e, e.filename or str(ws.dir), "create") from None
        return ws, created


def natural_key(task_id: str) -> tuple:
    if task_id.isdigit():  # the usual id, and `list` sorts thousands: the same key, 6x faster
        return ((0, int(task_id), ""),)
    parts = re.split(r"(\d+)", task_id)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in parts if p)
