"""git's side of the task-file merge: the merge driver git runs for `.specflux/task-states/*.md`
(`specflux merge-driver %O %A %B %P`) and its registration in a repository (`.gitattributes` and
the repository's local git config). The merge itself is format/merge.py's `merge_task`.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from specflux.format.line_merge import conflict_lines
from specflux.format.merge import merge_task

ATTRIBUTE = ".specflux/task-states/*.md merge=specflux"
DRIVER_NAME = "specflux task-state merge"


def run_driver(base: str, ours: str, theirs: str, path: str | None = None) -> int:
    """git's merge driver protocol (`%O %A %B %P`): merge the three files, write the result into
    `ours` (%A), exit 0 when clean and 1 when conflicts are left (git then reports the path as
    conflicted). Bytes that are not UTF-8 pass through unchanged (surrogate escapes)."""
    texts = [Path(p).read_bytes().decode("utf-8", "surrogateescape") for p in (base, ours, theirs)]
    shown = path or ours
    try:
        merged, clean = merge_task(*texts)
    except Exception as e:  # a bug here must not lose a side: let git merge the lines itself
        print(f"specflux merge-driver: {shown}: merging by parts failed ({e!r}); merged by lines", file=sys.stderr)
        done = subprocess.run(["git", "merge-file", "-L", "ours", "-L", "base", "-L", "theirs", ours, base, theirs])
        return 0 if done.returncode == 0 else 1
    Path(ours).write_bytes(merged.encode("utf-8", "surrogateescape"))
    if not clean:
        lines = conflict_lines(merged) or [1]
        for line in lines:
            print(f"{shown}:{line}: merge conflict left for a person to resolve", file=sys.stderr)
    return 0 if clean else 1


def register_driver(root: Path) -> None:
    """Make git merge the task files under `root` with `specflux merge-driver`.

    The attribute goes into `root/.gitattributes` (added only if missing; the file's other lines
    stay), so it travels with the repository. The driver itself is git config, which git never
    clones: a clone merges task files by lines until `specflux init` runs in it, which sets
    `merge.specflux.name` and `merge.specflux.driver` in that repository's local config (never the
    global one). A driver the user already configured is left as it is. Outside a git repository
    only the attribute is written.
    """
    _add_attribute(root / ".gitattributes")
    if _inside_git(root):
        for key, value in (("merge.specflux.name", DRIVER_NAME), ("merge.specflux.driver", driver_command())):
            if _git_config(root, "--get", key) is None:
                _git_config(root, key, value)


def driver_command() -> str:
    """`specflux merge-driver %O %A %B %P`, or the running interpreter's `-m specflux.cli` when
    `specflux` is not on PATH (a virtualenv that is not activated): git runs it through a shell."""
    program = "specflux" if shutil.which("specflux") else f"{shlex.quote(sys.executable)} -m specflux.cli"
    return f"{program} merge-driver %O %A %B %P"


def _add_attribute(path: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    if ATTRIBUTE in (line.strip() for line in text.splitlines()):
        return
    newline = "\r\n" if "\r\n" in text else "\n"
    sep = "" if not text or text.endswith(("\n", "\r")) else newline
    path.write_text(text + sep + ATTRIBUTE + newline, encoding="utf-8", newline="")


def _inside_git(root: Path) -> bool:
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
                              capture_output=True, text=True)
    except OSError:  # no git installed: nothing to configure
        return False
    return done.returncode == 0 and done.stdout.strip() == "true"


def _git_config(root: Path, *args: str) -> str | None:
    done = subprocess.run(["git", "-C", str(root), "config", "--local", *args], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None
