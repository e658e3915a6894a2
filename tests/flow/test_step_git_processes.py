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
# commit then reads too, plus the run's own (preflight, history): 5.2 at three tasks. The accepted
# task's completion goes into its reviewer's commit (flow/early_acceptance.py): 6.0 before, 12.7
# before issue 26 and a `git maintenance` after each commit; 8.0 before the index swap and the
# shared statuses.
MOST_PER_STEP = 5.5
# `git status` per agent step: the one its commit reads, and one before the session only where the
# last session's commit's status cannot serve (the run's first, or tests ran since), plus the
# run's preflight once
MOST_STATUS_PER_STEP = 1.5


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


REVIEWER_WRITES = '''\
import os, pathlib
if os.environ["SPECFLUX_ROLE"] == "reviewer":  # a review changes no file: these are put back
    pathlib.Path("stray.txt").write_text("the reviewer's new file\\n")
    work = pathlib.Path(f"work-{os.environ['SPECFLUX_TASK_ID']}.txt")
    work.write_text(work.read_text() + "the reviewer's edit\\n")
'''


def test_what_a_reviewer_changed_is_put_back_and_its_commit_holds_only_the_review(git_repo: Path, tmp_path: Path):
    """The reviewer's undo check and its commit share one status where nothing was put back; where
    something was, the commit reads the status again and carries none of it."""
    from test_first_hour_runs import AGENT

    repo = make_project(git_repo, tmp_path / "agent.py")
    (tmp_path / "agent.py").write_text(REVIEWER_WRITES + AGENT)
    done = sf(repo, "flow", "start", "1", *agent_args(repo))
    said = done.stdout + done.stderr
    assert "run completed" in said
    assert "stray.txt: changed during the review; put back as it was (a review changes no file)" in said
    assert "work-1.txt: changed during the review; put back as it was" in said
    assert not (repo / "stray.txt").exists()
    assert (repo / "work-1.txt").read_text() == "task 1 done\n"
    assert git(repo, "status", "--porcelain") == ""
    reviews = git(repo, "log", "--format=%H", "--grep=Specflux-Role: reviewer").split()
    assert len(reviews) == 1
    shown = git(repo, "show", "--name-only", "--format=", reviews[0]).split()
    assert shown and all(path.startswith(".specflux/") for path in shown), shown


def test_a_session_after_another_starts_from_that_ones_commit(git_repo: Path, tmp_path: Path):
    repo = make_project(git_repo, tmp_path / "agent.py")
    (repo / "notes.txt").write_text("the user's own notes, never committed by the run\n")
    trace = tmp_path / "git-trace"
    done = sf(repo, "flow", "start", *agent_args(repo), env={"GIT_TRACE": str(trace)})
    assert "run completed" in done.stdout + done.stderr
    # a session that follows another's commit with nothing between that could write (this project
    # has no [validate]: no tests ran) starts from the status that commit read (Git.capture(known)):
    # the run's preflight, the first coder's baseline, and the status each of the six commits reads
    statuses = git_processes(trace)["status"]
    coders = git(repo, "log", "--reverse", "--format=%(trailers:key=Specflux-Role,valueonly)").split()
    assert coders.count("coder") == 3 and coders.count("reviewer") == 3
    assert statuses == 1 + 1 + 6, statuses
    assert "notes.txt" not in git(repo, "log", "--name-only", "--format=")  # the user's file never committed
    assert git(repo, "status", "--porcelain") == "?? notes.txt\n"


def test_a_reviewer_after_tests_that_wrote_a_file_asks_git_again(git_repo: Path, tmp_path: Path):
    """The coder's tests ran between its commit and the review and left a file: the reviewer's
    baseline is read again (not the coder commit's status), so the file is the tests', not a
    change the review made, which would be put back (deleted) and never committed."""
    repo = make_project(git_repo, tmp_path / "agent.py")
    with open(repo / ".specflux" / "config.toml", "a") as f:
        f.write('\n[validate]\ncommand = "echo ok > validated.txt"\n')
    git(repo, "commit", "-qam", "validate")
    trace = tmp_path / "git-trace"
    done = sf(repo, "flow", "start", *agent_args(repo), env={"GIT_TRACE": str(trace)})
    assert "run completed" in done.stdout + done.stderr
    assert (repo / "validated.txt").read_text() == "ok\n"
    assert "validated.txt" not in git(repo, "log", "--name-only", "--format=")
    assert git_processes(trace)["status"] == 1 + 1 + 3 + 6, "a reviewer's baseline after each coder's tests"


def test_a_parallel_runs_merges_run_no_maintenance(git_repo: Path, tmp_path: Path):
    """Each lane's merge (made in a scratch worktree, then the user's branch fast-forwarded to it)
    asks git not to maintain: as in a one-lane run, only the history commit at the run's end may."""
    repo = make_project(git_repo, tmp_path / "agent.py")
    trace = tmp_path / "git-trace"
    done = sf(repo, "flow", "start", "--parallel", "2", *agent_args(repo), env={"GIT_TRACE": str(trace)})
    assert "run completed" in done.stdout + done.stderr, done.stdout + done.stderr
    counted = git_processes(trace)
    assert counted["merge"] >= 2, dict(counted)  # (the lanes were merged)
    assert counted["maintenance"] <= 1, dict(counted)
