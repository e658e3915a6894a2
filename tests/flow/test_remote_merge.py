"""A worker's integration merges its task's work with the remote branch beside the work tree
(`git merge-tree --write-tree` and `git commit-tree`, task files through the task-file merge
driver), pushes the merge and moves nothing in its clone; with a git older than 2.38, which has no
`merge-tree --write-tree`, it merges in the work tree as `git merge` does, to the same result."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import git
from remote_kit import clone, make_origin

TASK = ".specflux/task-states/task-1-state.md"

OLD_GIT = """#!/bin/sh
# git as 2.37 and before answer `merge-tree --write-tree`: the trivial merge-tree's usage
if [ "$1" = merge-tree ] && [ "$2" = --write-tree ]; then
  echo "usage: git merge-tree <base-tree> <branch1> <branch2>" >&2
  exit 129
fi
exec {git} "$@"
"""


def _tick(root: Path, criterion: str) -> None:
    path = root / TASK
    path.write_text(path.read_text().replace(f"- [ ] {criterion}", f"- [x] {criterion}"))


def _two_sides(tmp_path: Path):
    """A queue of one task with two criteria; worker wa's clone `a` holding the claim and a commit
    that ticks the first and writes out-a.txt; another worker's result (the second criterion
    ticked, out-b.txt) pushed to main meanwhile: adjacent lines of one task file, which git's own
    line merge would call a conflict and the task-file merge driver merges."""
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.lease import Lease
    from specflux.flow.remote.transport import Remote

    bare = make_origin(tmp_path, [("Only", [])])
    person = clone(str(bare), tmp_path / "person")
    path = person / TASK
    path.write_text(path.read_text().replace("- [ ] Only is done", "- [ ] Only is done\n- [ ] Only is tested"))
    git(person, "commit", "-q", "-am", "a second criterion")
    git(person, "push", "-q", "origin", "main")
    a, b = clone(str(bare), tmp_path / "a"), clone(str(bare), tmp_path / "b")
    claims = Claims(Remote(a, "origin", "main"), lease_s=60)
    lease = Lease(claims, claims.create("1", "wa", "run-a"), "wa", "run-a", every_s=3600)
    _tick(a, "Only is done")
    (a / "out-a.txt").write_text("wa's result\n")
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "wa's result")
    _tick(b, "Only is tested")
    (b / "out-b.txt").write_text("another worker's result\n")
    git(b, "add", "-A")
    git(b, "commit", "-q", "-m", "another worker's result")
    git(b, "push", "-q", "origin", "HEAD:main")
    return bare, a, b, claims, lease


@pytest.mark.parametrize("git_version", ["2.38 and later", "before 2.38"])
def test_an_integration_merges_the_task_file_through_its_driver_and_pushes_the_merge(tmp_path, monkeypatch, git_version):
    from specflux.flow.remote.integrate import integrate

    if git_version == "before 2.38":
        shim = tmp_path / "old-git"
        shim.mkdir()
        (shim / "git").write_text(OLD_GIT.format(git=shutil.which("git")))
        (shim / "git").chmod(0o755)
        monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    bare, a, b, claims, lease = _two_sides(tmp_path)
    ours, theirs = git(a, "rev-parse", "HEAD").strip(), git(b, "rev-parse", "HEAD").strip()

    result = integrate(claims.remote, lease, "1")

    assert result.outcome == "pushed" and result.tries == 1, result
    main = git(bare, "rev-parse", "main").strip()
    assert git(bare, "log", "-1", "--format=%P %s", main).split(" ", 2) == [ours, theirs, "Merge origin/main into task 1's work\n"]
    merged = git(bare, "show", f"main:{TASK}")
    assert "- [x] Only is done\n- [x] Only is tested" in merged  # both ticks: the driver's merge, not a conflict
    assert {"out-a.txt", "out-b.txt"} <= set(git(bare, "ls-tree", "--name-only", "main").split())
    record = git(bare, "log", "-1", "--format=%P", "refs/specflux/done/1").split()
    assert record[0] == main  # the completion record vouches for what was pushed
    assert git(bare, "for-each-ref", "refs/specflux/claims/") == ""
    if git_version == "2.38 and later":  # beside the work tree: HEAD, the index and the files as they were
        assert claims.remote.merges_beside
        assert git(a, "rev-parse", "HEAD").strip() == ours and not (a / "out-b.txt").exists()
        assert git(a, "status", "--porcelain") == ""
        assert "- [ ] Only is tested" in (a / TASK).read_text()
    else:  # git merge, in the work tree, once the older git said it had no merge-tree --write-tree
        assert not claims.remote.merges_beside
        assert git(a, "rev-parse", "HEAD").strip() == main and (a / "out-b.txt").exists()


def test_a_real_conflict_merged_beside_the_work_tree_names_its_paths_and_moves_nothing(tmp_path):
    from specflux.flow.remote.integrate import integrate

    bare, a, b, claims, lease = _two_sides(tmp_path)
    for side, text in ((a, "apples\n"), (b, "pears\n")):
        (side / "NOTES.md").write_text(text)
        git(side, "add", "NOTES.md")
        git(side, "commit", "-q", "-m", f"notes: {text.strip()}")
    git(b, "push", "-q", "origin", "HEAD:main")
    before, ours = git(bare, "rev-parse", "main"), git(a, "rev-parse", "HEAD")

    result = integrate(claims.remote, lease, "1")

    assert result.outcome == "conflict" and result.conflicts == ["NOTES.md"], result
    assert result.detail == "merge conflict with origin/main in NOTES.md"
    assert git(bare, "rev-parse", "main") == before and git(a, "rev-parse", "HEAD") == ours
    assert git(a, "status", "--porcelain") == "" and (a / "NOTES.md").read_text() == "apples\n"
    assert not (a / ".git" / "MERGE_HEAD").exists()
