"""Git worktrees for parallel lanes: one worktree and branch per coder attempt, merged back into
the user's branch by the run itself.

A lane's worktree lives at `.specflux/worktrees/<run>/<step>` (ignored by git) on branch
`specflux/<run>/<task>-<step>`. Merges are made in a scratch worktree, never in the user's: the
user's branch then moves forward only by `git merge --ff-only`, which refuses to overwrite their
uncommitted changes. A merge that conflicts is aborted and reported with its paths; nothing is
half-merged. A merge, rebase or other operation in progress in the user's worktree, or another
branch checked out there (the run commits its completions where the user is), makes the merge
wait: nothing is touched.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from specflux.base.crashpoint import crash_point
from specflux.base.errors import GitError, Refused, UsageError
from specflux.base.records import Factory, record
from specflux.vcs.process import NO_MAINTENANCE, run_git as _run

BRANCH_PREFIX = "specflux/"
DIFF_LIMIT = 12_000  # characters of a conflicted attempt's change shown to the next attempt


@record(frozen=True)
class MergeResult:
    merged: bool
    commit: str = ""  # the merge commit now at the tip of the target branch
    conflicts: tuple[str, ...] = ()  # paths git could not merge
    reason: str = ""  # why it did not merge, in one line

    def to_output(self, task_id: str, branch: str) -> dict:
        return {"taskId": task_id, "branch": branch, "merged": self.merged, "commit": self.commit,
                "conflicts": list(self.conflicts), "reason": self.reason}


@record
class Worktrees:
    """The lanes of run `run_id` in the repository whose main worktree is `root`."""

    root: Path
    run_id: str
    setup: str = ""
    setup_timeout_s: float = 900
    log: list[str] = Factory(list)

    @property
    def home(self) -> Path:
        return self.root / ".specflux" / "worktrees" / self.run_id

    def path_of(self, step_id: str) -> Path:
        return self.home / step_id

    def branch_of(self, task_id: str, step_id: str) -> str:
        """The attempt's branch; the task id with anything but letters, digits, `_` and `-` made a
        `-` (git refuses `..`, a `.lock` ending, ... in a branch name; the step id keeps it unique)."""
        return f"{BRANCH_PREFIX}{self.run_id}/{re.sub(r'[^A-Za-z0-9_-]', '-', task_id)}-{step_id}"

    # ----------------------------------------------------------------- lanes

    def open(self, task_id: str, step_id: str, start: str) -> tuple[Path, str]:
        """The worktree and branch of this attempt, created at commit `start` unless they exist
        (a resumed run finds them where the crash left them)."""
        path, branch = self.path_of(step_id), self.branch_of(task_id, step_id)
        if (path / ".git").exists():
            return path, branch
        if path.exists():  # a worktree half made when the engine died: made again
            shutil.rmtree(path)
        self._git("worktree", "prune")
        path.parent.mkdir(parents=True, exist_ok=True)
        exists = self._git("rev-parse", "--verify", "-q", f"refs/heads/{branch}").returncode == 0
        args = ("worktree", "add", "-q", str(path), branch) if exists else \
            ("worktree", "add", "-q", "-b", branch, str(path), start)
        done = self._git(*args)
        if done.returncode != 0:
            raise GitError(f"could not create the worktree for task {task_id}: {done.stderr.strip()}", path=path)
        return path, branch

    def prepare(self, path: Path) -> str | None:
        """Run `[flow] worktree_setup` in a new worktree; the failure in one line, or None."""
        if not self.setup:
            return None
        done_flag = self.home / "_setup" / path.name  # outside the worktree: the agent never sees it
        if done_flag.exists():
            return None
        try:
            done = subprocess.run(self.setup, shell=True, cwd=path, capture_output=True, text=True,
                                  timeout=self.setup_timeout_s, start_new_session=True)
        except subprocess.TimeoutExpired:
            return f"worktree_setup `{self.setup}` timed out after {self.setup_timeout_s:g}s"
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return f"worktree_setup `{self.setup}` exited with {done.returncode}" + (": " + " / ".join(tail) if tail else "")
        done_flag.parent.mkdir(parents=True, exist_ok=True)
        done_flag.write_text("ok\n", encoding="utf-8")
        return None

    def tip(self, ref: str) -> str:
        done = self._git("rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
        if done.returncode != 0:
            raise GitError(f"no commit {ref!r}: {done.stderr.strip()}")
        return done.stdout.strip()

    def changed_since(self, base: str, branch: str) -> str:
        """The attempt's change (stat and patch, outside `.specflux/`), cut at DIFF_LIMIT."""
        done = self._git("diff", "--stat", "--patch", base, branch, "--", ".", ":(exclude).specflux")
        text = done.stdout if done.returncode == 0 else f"(git diff failed: {done.stderr.strip()})"
        if len(text) > DIFF_LIMIT:
            text = text[:DIFF_LIMIT] + f"\n[... cut at {DIFF_LIMIT} characters ...]"
        return text

    # ----------------------------------------------------------------- merging back

    def merge(self, branch: str, target: str, message: str) -> MergeResult:
        """Merge `branch` into the user's branch `target` (a `--no-ff` merge commit)."""
        user = self._operation()
        if user:
            raise UserBusy(f"{user} is in progress in {self.root}: finish or abort it, then `flow resume`")
        head = _run(("symbolic-ref", "-q", "--short", "HEAD"), self.root).stdout.strip()
        if head != target:  # the run's completions are committed where you are: they must land on `target`
            raise UserBusy(f"the run merges into branch {target}, and {self.root} has "
                           f"{'branch ' + head if head else 'a detached HEAD'} checked out: check out {target}, "
                           "then `flow resume`")
        before = self.tip(f"refs/heads/{target}")
        landed = self._landed(branch, before)
        if landed is not None:  # merged before a kill cut the run short of recording it: not made again
            return MergeResult(True, commit=landed, reason="already merged")
        scratch = self.home / "_merge"
        if scratch.exists():
            self._remove_worktree(scratch)
        done = self._git("worktree", "add", "-q", "--detach", str(scratch), before)
        if done.returncode != 0:
            raise GitError(f"could not create the merge worktree: {done.stderr.strip()}", path=scratch)
        crash_point("merge:scratch-made")
        try:
            # (no `git maintenance` inside a run: its history commit at the end lets git maintain)
            merged = _run((*NO_MAINTENANCE, "merge", "--no-ff", "--no-edit", "-m", message, branch), scratch)
            if merged.returncode != 0:
                conflicts = tuple(_run(("diff", "--name-only", "--diff-filter=U"), scratch).stdout.split("\n"))
                conflicts = tuple(c for c in conflicts if c)
                _run(("merge", "--abort"), scratch)
                reason = (f"conflicts in {', '.join(conflicts)}" if conflicts
                          else merged.stderr.strip().splitlines()[-1] if merged.stderr.strip() else "git merge failed")
                return MergeResult(False, conflicts=conflicts, reason=reason)
            commit = _run(("rev-parse", "HEAD"), scratch).stdout.strip()
            crash_point("merge:committed")
        finally:
            self._remove_worktree(scratch)
        refused = self._advance(target, before, commit)
        if refused:
            return MergeResult(False, reason=refused)
        return MergeResult(True, commit=commit)

    def _landed(self, branch: str, target_tip: str) -> str | None:
        """The commit that brought `branch` into the target branch (at `target_tip`), when all of
        it is there already: the merge commit whose second parent is the branch's tip, or the
        target's tip when the branch has nothing of its own. None when something is to merge."""
        tip = self.tip(branch)
        if self._git("merge-base", "--is-ancestor", tip, target_tip).returncode != 0:
            return None
        merges = self._git("rev-list", "--merges", "--ancestry-path", "--reverse", "--parents",
                           f"{tip}..{target_tip}").stdout.splitlines()
        return next((line.split()[0] for line in merges if tip in line.split()[2:]), target_tip)

    def _advance(self, target: str, before: str, commit: str) -> str | None:
        """Fast-forward `target`, checked out in the user's worktree, from `before` to `commit`
        (`--ff-only` refuses to overwrite their uncommitted changes); why not, in one line, or None."""
        if self.tip(f"refs/heads/{target}") != before:
            return f"branch {target} moved during the merge; it is tried again"
        done = self._git(*NO_MAINTENANCE, "merge", "--ff-only", "-q", commit)
        if done.returncode != 0:
            detail = " ".join(done.stderr.split())
            return f"the merged result could not be checked out in {self.root} ({detail[:300]})"
        crash_point("merge:fast-forwarded")
        return None

    # ----------------------------------------------------------------- the end

    def retire(self, path: Path) -> None:
        """Remove one attempt's worktree (its branch stays: the next attempt builds on it)."""
        if path.exists():
            self._remove_worktree(path)
        (self.home / "_setup" / path.name).unlink(missing_ok=True)

    def clean(self, keep: set[Path] = frozenset(), keep_branches: set[str] = frozenset()) -> list[str]:
        """Remove this run's worktrees and branches, but `keep` and `keep_branches` (what a
        resumed run still needs); what was removed."""
        removed: list[str] = []
        if self.home.is_dir():
            for path in sorted(self.home.iterdir()):
                if path.name == "_setup" or path in keep:
                    continue
                self.retire(path)
                removed.append(str(path))
                crash_point("clean:removed-one")
        self._git("worktree", "prune")
        kept = set(keep_branches) | {self._branch_at(p) for p in keep}
        listing = self._git("for-each-ref", "--format=%(refname:short)", f"refs/heads/{BRANCH_PREFIX}{self.run_id}/")
        for branch in listing.stdout.split():
            if branch not in kept:
                self._git("branch", "-D", "-q", branch)
                removed.append(branch)
        if not keep and self.home.is_dir():
            shutil.rmtree(self.home, ignore_errors=True)
            try:
                self.home.parent.rmdir()  # .specflux/worktrees/, when no other run has lanes
            except OSError:
                pass
        return removed

    def _branch_at(self, path: Path) -> str:
        return _run(("rev-parse", "--abbrev-ref", "HEAD"), path).stdout.strip() if path.is_dir() else ""

    def _remove_worktree(self, path: Path) -> None:
        done = self._git("worktree", "remove", "--force", "--force", str(path))
        if done.returncode != 0 and path.exists():
            shutil.rmtree(path, ignore_errors=True)

    def _operation(self) -> str | None:
        from specflux.vcs.git import Git

        return Git(self.root).operation_in_progress()

    def _git(self, *args: str) -> subprocess.CompletedProcess:
        return _run(args, self.root)


class UserBusy(UsageError):
    """The user's worktree has a merge, rebase, ... in progress: the run waits for them."""


def current_branch(root: Path) -> str:
    """The branch checked out at `root`; a parallel run merges its lanes into it."""
    from specflux.vcs.refs import head_at

    found = head_at(root)  # the git dir's files, where plain: no git process
    if found is not None and found[0] is not None:
        return found[0]
    done = _run(("symbolic-ref", "-q", "--short", "HEAD"), root)
    if done.returncode != 0:
        raise Refused("HEAD is detached: a parallel run merges its lanes into a branch; check one out first "
                      "(`git switch BRANCH`)")
    return done.stdout.strip()


def uncommitted(root: Path, paths: list[str]) -> list[str]:
    """Which of `paths` have changes git has not committed (a lane would not see them)."""
    done = _run(("status", "--porcelain", "-z", "--untracked-files=all", "--", *paths), root)
    return [entry[3:] for entry in done.stdout.split("\0") if entry]
