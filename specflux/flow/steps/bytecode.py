"""Python's cached bytecode of a project, made safe to test with before a validation runs.

CPython runs a `.pyc` whose recorded source size and modification time, in whole seconds, match
the source's. A file rewritten with the same size within the second its bytecode was compiled
(`a * b` to `a + b` by a coder's retry; the engine putting a file back after an agent's `git
reset`, right after a test imported it) is then tested as the old code, attempt after attempt.
Before each validation (`drop_stale`): the bytecode of the files the coder changed goes, and so
does every cached `.pyc` of the project written before its source last changed (the project's
files listed by git once a process).
It is a cache: deleting it costs a compile at most.

Where it is: `__pycache__/<name>.<tag>.pyc` beside the source, or under PYTHONPYCACHEPREFIX, the
source's folder mirrored there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable


def _folders(parent: Path, prefix: str | None) -> list[Path]:
    folders = [parent / "__pycache__"]
    if prefix:
        folders.append(Path(prefix) / str(parent.absolute()).lstrip(os.sep))
    return folders


def _cached(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as entries:
            return [e for e in entries if e.name.endswith(".pyc")]
    except OSError:
        return []


def drop_stale(root: Path, edited: Iterable[Path] = (), prefix: str | None = None) -> None:
    """Delete the cached bytecode of the Python files in `edited` (whatever its age, and even where
    the file itself went), and every cached `.pyc` of the project's Python files written before its
    source last changed. The project's files are git's list of them (tracked, and untracked but not
    ignored, so that no virtual environment inside is walked), asked once a process and kept with
    every edited file added: a file the engine puts back is one the project had, or one a coder
    made (edited); a file that appears otherwise mid-run (a person's, a merged lane's) has no
    bytecode from before it. Without git, the edited files' drop is what there is."""
    edited = {path for path in edited if path.suffix == ".py"}
    by_parent: dict[Path, set[Path]] = {}
    for path in _project_files(root, edited):
        by_parent.setdefault(path.parent, set()).add(path)
    for parent, paths in by_parent.items():
        for folder in _folders(parent, prefix):
            cached = _cached(folder)
            for path in paths if cached else ():
                changed = 0
                if path not in edited:
                    try:
                        changed = path.stat().st_mtime_ns
                    except OSError:
                        continue
                for entry in cached:
                    if not entry.name.startswith(path.stem + "."):
                        continue
                    try:
                        if path in edited or entry.stat().st_mtime_ns < changed:
                            os.unlink(entry.path)
                    except OSError:
                        pass


_LISTED: dict[Path, set[Path]] = {}  # root -> its Python files: git's list at the first validation, and every edited one since


def _project_files(root: Path, edited: set[Path]) -> set[Path]:
    """The project's Python files, `edited` among them (a git process the first time a process
    asks for `root`; the list kept then, with `edited` added: a validation a step, and a
    `git ls-files --others` walks the whole tree). Without git: `edited` alone."""
    known = _LISTED.get(root)
    if known is None:
        from specflux.vcs.process import run_git

        try:
            listed = run_git(("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py"), root)
        except OSError:  # no such folder (the validation says so), no git
            return set(edited)
        if listed.returncode != 0:  # not a git repository
            return set(edited)
        known = _LISTED[root] = {root / name for name in listed.stdout.split("\0") if name}
    known.update(edited)
    return known
