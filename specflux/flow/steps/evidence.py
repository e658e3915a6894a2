"""Evidence the run checks itself instead of taking an agent's word for it.

- `work_tree_fingerprint`: the tree an attempt left (stall detection compares rounds by it);
- `task_unchanged`: whether a task's attempts in the run changed anything at all ("no change");
- `expects_change`: the few tasks that need none say so in their metadata;
- `unjudged`: a review that does not judge the task's own criteria cannot complete it;
- `untested_acceptance`: an acceptance the tests do not back, said when a workflow makes one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specflux.base.errors import SpecfluxError

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager


def task_unchanged(manager: "TaskStateManager", run_id: str, task_id: str, dirty: "list[str] | None" = None) -> bool:
    """Whether the task's coder attempts, together, changed nothing outside `.specflux/`: from
    before its first attempt's commit to the tree as it is now (the diff the reviewer is shown).
    A retry that adds nothing to earlier work is not "no change"; nor is an attempt that finds the
    work done by an earlier run that did not finish the task (a run cut short, or failed after
    its work was committed): its attempts count from the task's base, the last time it was
    complete, not only this run's. `dirty`: `uncommitted(manager)`, when the caller has it."""
    git = manager.git
    if git is None:
        return False  # nothing to compare with: the tests and the review decide
    from specflux.vcs.process import run_git as _run

    commits = _coder_commits(git, task_id)  # run_id's among them
    if commits:
        base = commits[-1].sha + "^"
        # exit 1: a change; 128: no `base` (the first attempt is the repository's first commit)
        if _run(("diff", "--quiet", base, "HEAD", *_OUTSIDE), manager.ws.root).returncode != 0:
            return False
    dirty = uncommitted(manager) if dirty is None else dirty
    return dirty is not None and not dirty


_OUTSIDE = ("--", ".", ":(exclude).specflux")


def uncommitted(manager: "TaskStateManager") -> list[str] | None:
    """"XY path" records (`vcs.status.dirty_records`: porcelain v1 letters, repository-relative
    paths, untracked files one by one, renames as a deletion and an addition) of the workspace's
    work tree outside `.specflux/`, or None where git fails: what both `work_tree_fingerprint` and
    `task_unchanged` read, asked of git once a step (or known from the step's session commit:
    `SessionReport.uncommitted`)."""
    from specflux.base.errors import GitError
    from specflux.vcs.status import dirty_records

    git = manager.git
    under = None if git is None else git.inside(manager.ws.root)
    if git is None or under is None:
        return None
    try:
        return dirty_records(git.status()[1], under)
    except GitError:
        return None


def _coder_commits(git, task_id: str) -> list:
    """The task's coder commits since it was last complete (this run's and earlier runs'), newest first."""
    found = []
    for commit in git.find_commits({"Specflux-Task": task_id}):
        if commit.trailers.get("Specflux-Status") == "complete":
            break  # the task's base: work before it was accepted once already
        if commit.trailers.get("Specflux-Role") == "coder" and commit.trailers.get("Specflux-Run"):
            found.append(commit)
    return found


def expects_change(manager: "TaskStateManager", task_id: str) -> bool:
    """Whether the task needs a change in the repository (all do, unless their metadata says
    `"expects_change": false`: an investigation, a decision written down in the task file)."""
    try:
        return manager.load(task_id).metadata.get("expects_change", True) is not False
    except SpecfluxError:
        return True


def unjudged(review: dict[str, Any] | None, manager: "TaskStateManager", task_id: str) -> str | None:
    """Why `review` (as the session summary holds it) cannot stand: it does not judge each of the
    task's own criteria. However it reached the run (a tool, `submit-review`, a hand-in file the
    agent wrote itself), a verdict on criteria the task does not have completes nothing."""
    if not review:
        return None
    from specflux.agent.handin_rules import HandinError, judges

    try:
        criteria = [item[3] for item in manager.load(task_id).criteria_lines]
        judges([str(r.get("criterion", "")) for r in review.get("criteriaResults") or []], criteria)
    except HandinError as e:
        return f"the review was refused: {e.message}"
    except (SpecfluxError, ValueError) as e:
        return f"the review could not be checked: {e}"
    return None


def work_tree_fingerprint(manager: "TaskStateManager", dirty: "list[str] | None" = None) -> str | None:
    """A fingerprint of the work tree (`.specflux/` aside): the commit's tree plus the content of
    every file git reports changed or untracked. The same fingerprint before and after an attempt
    means it changed nothing; the same after two attempts, that they left the same tree.
    `dirty`: `uncommitted(manager)`, when the caller has it."""
    git = manager.git
    if git is None:
        return None
    import hashlib

    root = manager.ws.root
    entries = _top_entries(root)
    top = git.root  # (the records' paths are the repository's)
    if entries is None:
        return None
    digest = hashlib.sha256()
    for mode, name, sha in entries:
        if name != ".specflux":
            digest.update(f"{mode} {sha}\t{name}\n".encode("utf-8", "surrogateescape"))
    dirty = uncommitted(manager) if dirty is None else dirty
    for entry in sorted(dirty or ()):
        digest.update(entry.encode() + b"\0")
        try:
            digest.update((top / entry[3:]).read_bytes())
        except OSError:  # deleted, a folder, a rename's old name: its status line says enough
            pass
    return digest.hexdigest()[:16]


def _top_entries(root) -> list[tuple[str, str, str]] | None:
    """(mode, name, sha) of each entry of HEAD's top tree: from the git dir's files where they are
    plain (a fresh commit's tree is a loose object: vcs/refs.py), else `git ls-tree`; None before
    a first commit."""
    from specflux.vcs.refs import GitDirs, commit_header, head, tree_entries

    dirs = GitDirs.of(root)
    found = head(dirs) if dirs is not None else None
    header = commit_header(dirs, found[1]) if found is not None else None
    entries = tree_entries(dirs, header.tree) if header is not None else None
    if entries is not None:
        return [(mode.zfill(6), name, sha) for mode, name, sha in entries]
    from specflux.vcs.process import run_git as _run

    done = _run(("ls-tree", "-z", "HEAD"), root)
    if done.returncode != 0:
        return None
    listed = []
    for record in done.stdout.split("\0"):
        if record:
            info, _, name = record.partition("\t")
            mode, _, sha = info.split(" ")
            listed.append((mode, name, sha))
    return listed


def untested_acceptance(state: dict[str, Any], task_id: str, manager: "TaskStateManager") -> str | None:
    """Why the task's acceptance is not backed by passing tests, where `[validate]` is set and the
    workflow accepted it anyway (a custom workflow with no path through the tests)."""
    if getattr(manager.ws.config, "validate", None) is None:
        return None
    own = (state.get("laneOutputs") or {}).get(task_id) or {}
    checked = (own.get("coderOutput") or {}).get("selfValidation") or {}
    if checked.get("passed") is True:
        return None
    issues = "; ".join(str(i) for i in (checked.get("issues") or [])[:3])
    return f"its last tests did not pass ({issues or 'no test result'})"
