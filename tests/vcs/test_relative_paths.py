"""A path relative to the work tree, worked out in plain strings on the common case
(`Workspace.relative`, `Git._relative`), gives what pathlib gives, including the cases a string
prefix could get wrong: a sibling folder whose name starts with the root's, the root itself, a path
outside, `..` inside the path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specflux.base.errors import GitError
from specflux.store.workspace import Workspace
from specflux.vcs.git import Git


def _pathlib_relative(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


CASES = ["a.md", ".specflux/task-states/task-1-state.md", "src/../README.md", "deep/er/still/x.txt"]


@pytest.mark.parametrize("rel", CASES)
def test_workspace_relative_is_pathlibs(tmp_path: Path, rel: str):
    ws, _ = Workspace.init(tmp_path / "repo")
    for path in (ws.root / rel, tmp_path / "repo2" / rel, ws.root, tmp_path, Path(rel)):
        assert ws.relative(path) == _pathlib_relative(ws.root, path), path


@pytest.mark.parametrize("rel", CASES)
def test_git_relative_is_pathlibs(git_repo: Path, rel: str):
    git = Git(git_repo)
    expected = Path(os.path.abspath(git_repo / rel)).relative_to(git_repo).as_posix()
    assert git._relative(rel) == expected
    assert git._relative(git_repo / rel) == expected
    assert git._relative(git_repo) == "."
    for outside in (git_repo.parent / (git_repo.name + "2") / rel, git_repo.parent):
        with pytest.raises(GitError):
            git._relative(outside)
