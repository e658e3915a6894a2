"""vcs/refs.py reads HEAD, branches and fresh commits from the git dir's files: every answer it
gives is git's own (checked against `git rev-parse`, `git cat-file` and `git ls-tree` in real
repositories of each shape), and where the files are not plain it answers None for git to be
asked instead: packed refs and objects, linked worktrees, detached HEADs, ambiguous names,
unborn branches, SHA-256 repositories and the reftable backend."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import git

from specflux.flow.steps import branch_guard
from specflux.vcs.refs import GitDirs, commit_header, head, tree_entries


def git_head(repo: Path) -> tuple[str | None, str]:
    sha = git(repo, "rev-parse", "HEAD").strip()
    branch = subprocess.run(["git", "symbolic-ref", "-q", "--short", "HEAD"], cwd=repo, capture_output=True,
                            text=True).stdout.strip()
    return branch or None, sha


def git_commit_header(repo: Path, sha: str) -> tuple[str, tuple[str, ...]]:
    tree = git(repo, "rev-parse", f"{sha}^{{tree}}").strip()
    parents = tuple(git(repo, "rev-parse", f"{sha}^@").split())
    return tree, parents


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(f"{name}\n")
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD").strip()


def test_head_branch_and_fresh_commit_are_gits_own(git_repo: Path):
    sha = commit(git_repo, "a.txt")
    dirs = GitDirs.of(git_repo)
    assert head(dirs) == git_head(git_repo) == ("main", sha)
    header = commit_header(dirs, sha)
    assert (header.tree, header.parents) == git_commit_header(git_repo, sha)
    listed = git(git_repo, "ls-tree", "HEAD").splitlines()
    assert [f"{mode.zfill(6)} {'tree' if mode.startswith('4') else 'blob'} {obj}\t{name}"
            for mode, name, obj in tree_entries(dirs, header.tree)] == listed


def test_packed_refs_and_a_merge_commit(git_repo: Path):
    git(git_repo, "checkout", "-q", "-b", "side")
    side = commit(git_repo, "side.txt")
    git(git_repo, "checkout", "-q", "main")
    commit(git_repo, "main.txt")
    git(git_repo, "merge", "-q", "--no-edit", "side")
    git(git_repo, "pack-refs", "--all")
    assert not (git_repo / ".git" / "refs" / "heads" / "main").exists()
    dirs = GitDirs.of(git_repo)
    found = head(dirs)
    assert found == git_head(git_repo)
    header = commit_header(dirs, found[1])
    assert header.parents == git_commit_header(git_repo, found[1])[1] and side in header.parents


def test_packed_refs_are_read_again_when_git_rewrites_them(git_repo: Path):
    """packed-refs is parsed once and reused while its stat holds: a tag packed later (which makes
    the branch's name ambiguous) and a branch packed after a new commit are both seen."""
    commit(git_repo, "a.txt")
    git(git_repo, "pack-refs", "--all")
    dirs = GitDirs.of(git_repo)
    assert head(dirs) == git_head(git_repo)
    assert head(dirs) == git_head(git_repo)  # (from the parsed file)
    sha = commit(git_repo, "b.txt")
    git(git_repo, "pack-refs", "--all")
    assert not (git_repo / ".git" / "refs" / "heads" / "main").exists()
    assert head(dirs) == git_head(git_repo) == ("main", sha)
    git(git_repo, "tag", "main")
    git(git_repo, "pack-refs", "--all")
    assert not (git_repo / ".git" / "refs" / "tags" / "main").exists()
    assert head(dirs) is None  # ambiguous now, as git says


def test_a_packed_object_or_a_detached_head_or_an_ambiguous_name_is_left_to_git(git_repo: Path):
    sha = commit(git_repo, "a.txt")
    git(git_repo, "gc", "-q")
    dirs = GitDirs.of(git_repo)
    assert commit_header(dirs, sha) is None  # packed: git is asked
    git(git_repo, "checkout", "-q", "--detach")
    assert head(dirs) == (None, sha)
    git(git_repo, "checkout", "-q", "main")
    git(git_repo, "tag", "main")  # `main` is now ambiguous: git calls the branch heads/main
    assert head(dirs) is None
    assert branch_guard.where(git_repo) == branch_guard.Where("heads/main", sha)


def test_a_linked_worktree_reads_its_own_head_and_the_shared_refs(git_repo: Path, tmp_path: Path):
    commit(git_repo, "a.txt")
    other = tmp_path / "other"
    git(git_repo, "worktree", "add", "-q", "-b", "lane", str(other))
    sha = commit(other, "b.txt")
    dirs = GitDirs.of(other)
    assert dirs.own != dirs.common
    assert head(dirs) == git_head(other) == ("lane", sha)
    assert commit_header(dirs, sha).parents == git_commit_header(other, sha)[1]


@pytest.mark.parametrize("init", [("--object-format=sha256",), ("--ref-format=reftable",)])
def test_sha256_and_reftable_repositories_are_left_to_git(tmp_path: Path, init: tuple[str, ...]):
    repo = tmp_path / "repo"
    done = subprocess.run(["git", "init", "-q", "-b", "main", *init, str(repo)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"this git cannot: {done.stderr.strip()}")
    for key, value in (("user.name", "T"), ("user.email", "t@example.com"), ("commit.gpgsign", "false")):
        git(repo, "config", key, value)
    sha = commit(repo, "a.txt")
    assert head(GitDirs.of(repo)) is None
    assert branch_guard.where(repo) == branch_guard.Where("main", sha)


def test_an_unborn_branch_has_no_head(tmp_path: Path):
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    assert head(GitDirs.of(repo)) is None
    assert branch_guard.where(repo) is None


def test_the_branch_guard_sees_a_rewrite_through_the_files(git_repo: Path):
    """After a session commit on top, the guard is content; after an agent's `reset --hard` to an
    older commit plus a commit of its own (a loose commit whose parent is not the run's head), it
    says what happened."""
    first = commit(git_repo, "a.txt")
    before = branch_guard.where(git_repo)
    commit(git_repo, "b.txt")
    assert branch_guard.check(git_repo, before) is None
    moved = branch_guard.where(git_repo)
    git(git_repo, "reset", "-q", "--hard", first)
    commit(git_repo, "c.txt")
    said = branch_guard.check(git_repo, moved)
    assert said is not None and "does not hold it" in said
