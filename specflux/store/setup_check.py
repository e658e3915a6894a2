"""What `specflux init` checks beside creating `.specflux/`: a workspace above the folder (a new one
here would hide its tasks from every command run below it), and whether git has the workspace's
files yet (a run, a clone and a lane see only what is committed)."""

from __future__ import annotations

from pathlib import Path

from specflux.base.errors import Refused


def refuse_nested(root: Path) -> None:
    """Refuse a workspace inside another one's folder, naming the one above and what to do."""
    root = root.resolve()
    for folder in root.parents:
        if (folder / ".specflux").is_dir():
            raise Refused(f"{folder} already holds a workspace ({folder / '.specflux'}), and specflux finds it from "
                          f"any folder below it: a new one in {root} would hide its tasks here. Use that one, or "
                          f"`specflux init --nested {root}` for a separate workspace anyway")


def uncommitted_setup(root: Path) -> list[str]:
    """The workspace files git does not have committed (`.specflux/`, `.gitattributes`); [] outside git."""
    from specflux.vcs.process import run_git

    inside = run_git(("rev-parse", "--show-toplevel"), root)
    if inside.returncode != 0:
        return []
    done = run_git(("status", "--porcelain", "--untracked-files=normal", "--", ".specflux", ".gitattributes"), root)
    if done.returncode != 0:
        return []
    lines = [line[3:].strip().strip('"') for line in done.stdout.splitlines() if line.strip()]
    return [name for name, mark in ((".specflux/", ".specflux"), (".gitattributes", ".gitattributes"))
            if any(mark in line for line in lines)]
