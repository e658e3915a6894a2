"""The branch is the engine's: what an agent step may not do to the run's git history.

Before an agent step the engine notes where the run's branch is (`Where`); after it, `check`
compares. An agent that checked out another branch, or moved the branch anywhere but forward
(`git reset --hard`, a rebase, an amend of a commit the run made), has its attempt failed, and
`restore` puts things back: the run's branch checked out again, at a commit that holds everything
it held before the step. The agent's own commits are kept on `specflux/rejected/<run>/<step>`, so
nothing it did is lost either. Nothing is ever forced over a person's uncommitted work: when git
refuses, the run pauses and says why.
"""

from __future__ import annotations

from pathlib import Path

from specflux.base.records import record
from specflux.vcs.process import run_git as _run
from specflux.vcs.refs import GitDirs, commit_header, head, head_at


@record(frozen=True)
class Where:
    branch: str | None  # None: a detached HEAD
    head: str


def where(root: Path) -> Where | None:
    """The branch checked out at `root` and its commit (None outside git or before a first commit)."""
    found = head_at(root)  # the git dir's files: no git process
    return Where(*found) if found is not None else _where(root)[0]


def _moved_on(root: Path, before: Where) -> tuple[Where | None, list[str]]:
    """Where the branch is now, and the parents of its commit when it moved since `before`
    (read from the git dir's files where they are plain: a commit just made is a loose object)."""
    dirs = GitDirs.of(root)
    found = head(dirs) if dirs is not None else None
    if found is not None:
        now = Where(*found)
        if now.head == before.head:
            return now, []
        header = commit_header(dirs, now.head)
        if header is not None:
            return now, list(header.parents)
    return _where(root)


def _where(root: Path) -> tuple[Where | None, list[str]]:
    """`where`, and the parents of HEAD's commit, from one git process (the engine asks before
    and after every agent step): HEAD's sha, its parents (`HEAD^@`), then the name HEAD points
    at, shortened as `git symbolic-ref --short` does ("loose": `heads/x` only when a tag or such is
    also named x), "HEAD" when it is detached; then the "--" that ends the list."""
    done = _run(("rev-parse", "HEAD", "HEAD^@", "--abbrev-ref=loose", "HEAD", "--"), root)
    lines = [line.strip() for line in done.stdout.split("\n")]
    end = lines.index("--") if "--" in lines else -1
    if done.returncode != 0 or end < 2 or not lines[0]:
        return None, []
    branch = lines[end - 1]
    return Where(None if branch in ("", "HEAD") else branch, lines[0]), lines[1:end - 1]


def check(root: Path, before: Where) -> str | None:
    """What the step did to the branch, in words, or None when it only moved it forward."""
    now, parents = _moved_on(root, before)
    if now is None:
        return f"the repository has no HEAD any more (it was {before.head[:12]} on {before.branch or 'a detached HEAD'})"
    if before.branch and now.branch != before.branch:
        return (f"the agent checked out {now.branch or 'a detached HEAD'} ({now.head[:12]}); the run's branch is "
                f"{before.branch}")
    if now.head == before.head or before.head in parents:  # (one commit on top: the session's own)
        return None
    ancestor = _run(("merge-base", "--is-ancestor", before.head, now.head), root)
    if ancestor.returncode == 0:
        return None
    lost = _run(("rev-list", "--count", before.head, f"^{now.head}"), root).stdout.strip() or "?"
    return (f"the agent moved {before.branch or 'HEAD'} from {before.head[:12]} to {now.head[:12]}, which does not "
            f"hold it ({lost} commit(s) of the branch were no longer on it: git reset, rebase or amend)")


def restore(root: Path, before: Where, keep_as: str) -> str:
    """Put the run's branch back as `before` had it, the agent's commits kept on branch `keep_as`.
    Returns what was done, in words; raises RuntimeError when git refuses (a person's work in the way)."""
    now = where(root)
    said = []
    if now is not None and now.head != before.head:
        _run(("branch", "-f", keep_as, now.head), root)
        said.append(f"the agent's commits are kept on {keep_as}")
    if before.branch and (now is None or now.branch != before.branch):
        done = _run(("checkout", "-q", before.branch), root)
        if done.returncode != 0:
            raise RuntimeError(f"could not check out {before.branch} again: {done.stderr.strip()}")
        said.append(f"{before.branch} is checked out again")
        now = where(root)
    if now is not None and now.head != before.head and \
            _run(("merge-base", "--is-ancestor", before.head, now.head), root).returncode != 0:
        done = _run(("reset", "-q", "--keep", before.head), root)
        if done.returncode != 0:
            raise RuntimeError(f"could not move {before.branch or 'HEAD'} back to {before.head[:12]}: "
                               f"{done.stderr.strip()}")
        said.append(f"{before.branch or 'HEAD'} is back at {before.head[:12]} (from the reflog)")
    return "; ".join(said) or "nothing to put back"
