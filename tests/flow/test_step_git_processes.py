"""What a workflow step asks of git (issue 26): a whole step with an agent CLI runs a handful of
git processes, counted with GIT_TRACE (not timed, so the machine's load cannot change the
answer): the session's status before and after, its commit, the coder's evidence, the reviewer's
diff. No `git maintenance` runs inside a run; the run's history commit at its end lets git
maintain as any commit does."""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path

from conftest import git
from test_first_hour_runs import agent_args, make_project, sf

# Per agent step (a coder's or a reviewer's), on average over the run: the session's status before
# and after and its commit (update-index, commit; the index it was built in becomes the user's, so
# no reset), the coder's diff (which the reviewer is then shown too; what the coder left
# uncommitted comes from its commit's status), the reviewer's undo check reading the status its
# commit then reads too, and the accepted task's commit, plus the run's own (preflight, history):
# 6.0 at three tasks. Before issue 26, 12.7, and a `git maintenance` after each commit; 8.0 before
# the index swap and the shared statuses.
MOST_PER_STEP = 6.5
# `git status` per agent step: the one before the session and the one its commit reads (plus the
# run's preflight, once)
MOST_STATUS_PER_STEP = 2.2


def git_processes(trace: Path) -> collections.Counter:
    """The git commands specflux started (not the processes git starts for itself: hooks, and
    the maintenance counted separately), by subcommand."""
    found = collections.Counter()
    for line in trace.read_text(errors="replace").splitlines():
        m = re.search(r"trace: (?:exec|built-in): git (?:-c \S+ )*(\S+)", line)
        if m:
            found[m.group(1)] += 1
    return found


def test_a_step_runs_few_git_processes_and_no_maintenance(git_repo: Path, tmp_path: Path):
    repo = make_project(git_repo, tmp_path / "agent.py")
    trace = tmp_path / "git-trace"
    done = sf(repo, "flow", "start", *agent_args(repo), env={"GIT_TRACE": str(trace)})
    assert "run completed" in done.stdout + done.stderr
    counted = git_processes(trace)
    agent_steps = 6  # three tasks, a coder and a reviewer each, all approved at once
    assert git(repo, "log", "--format=%(trailers:key=Specflux-Role,valueonly)").split().count("coder") == 3
    per_step = sum(n for cmd, n in counted.items() if cmd != "maintenance") / agent_steps
    assert per_step <= MOST_PER_STEP, f"{per_step:.1f} git processes a step: {dict(counted)}"
    assert counted["status"] / agent_steps <= MOST_STATUS_PER_STEP, dict(counted)
    assert "reset" not in counted, dict(counted)  # nothing staged: the index is swapped in
    assert counted["maintenance"] <= 1, dict(counted)  # the history commit's, at the run's end
    assert "rev-parse" not in counted or counted["rev-parse"] <= 3, dict(counted)  # the branch from .git's files
