"""Write-back: completing an imported task ticks it in its source, one line, nothing else."""

from __future__ import annotations

import json
import os

import pytest

from specflux.importers.writeback import pass_feature, tick_tasks_md

TASKS_MD = (
    "# Tasks\n\n## Phase 1: Setup\n\n"
    "- [ ] T001 Create project structure\n"
    "- [ ] T002 [P] Configure linting in `ruff.toml`\n"
    "- [x] T003 Already done\n"
)


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    return [(a, b) for a, b in zip(before.splitlines(True), after.splitlines(True)) if a != b]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_ticking_a_task_changes_its_one_line_in_the_files_own_line_endings(newline):
    text = TASKS_MD.replace("\n", newline)
    after = tick_tasks_md(text, 6, "T002")
    assert changed_lines(text, after) == [(f"- [ ] T002 [P] Configure linting in `ruff.toml`{newline}",
                                           f"- [x] T002 [P] Configure linting in `ruff.toml`{newline}")]
    assert len(after) == len(text)


def test_a_line_that_is_no_longer_the_task_is_left_alone():
    assert tick_tasks_md(TASKS_MD, 5, "T002") is None, "line 5 is T001's: the source was edited since"
    assert tick_tasks_md(TASKS_MD, 99, "T001") is None
    assert tick_tasks_md(TASKS_MD, 7, "T003") == TASKS_MD, "already ticked: nothing to do"


FEATURES_ARRAY = """[
  {
    "category": "functional",
    "description": "Login works",
    "steps": ["Step 1: open", "Step 2: log in"],
    "passes": false
  },
  {
    "category": "functional",
    "description": "Logout works",
    "steps": ["Step 1: log out"],
    "passes": false
  }
]
"""


def test_passing_a_feature_changes_its_one_value():
    after = pass_feature(FEATURES_ARRAY, 1)
    assert changed_lines(FEATURES_ARRAY, after) == [('    "passes": false\n', '    "passes": true\n')]
    assert json.loads(after)[1]["passes"] is True and json.loads(after)[0]["passes"] is False


def test_passing_a_feature_by_id_in_an_object_file():
    text = json.dumps({"version": 1, "features": [{"id": "ssh", "passes": False}, {"id": "web", "passes": False}]},
                      indent=2)
    after = pass_feature(text, "web")
    assert [f["passes"] for f in json.loads(after)["features"]] == [False, True]
    assert len(changed_lines(text, after)) == 1


# --------------------------------------------------------------------- kill -9 and again


def test_a_source_ticked_already_is_handed_on_unchanged_for_the_commit():
    """A completion killed between writing the tick and committing it: done again, the tick is
    there already; it is written as it is (no byte changes) so that the commit takes it along."""
    from specflux.importers.writeback import tick_spec_kit as write_back

    written = {}
    source = {"path": "tasks.md", "line": 7, "id": "T003", "format": "spec-kit"}
    assert write_back(source, "T003", lambda p: TASKS_MD, lambda p, t: written.update({p: t})) is None
    assert written == {"tasks.md": TASKS_MD}
    written.clear()
    moved = {**source, "line": 5}  # the line is no longer the task's: nothing at all
    assert write_back(moved, "T003", lambda p: TASKS_MD, lambda p, t: written.update({p: t})) is None
    assert written == {}


def test_temp_files_a_dead_process_left_are_removed_and_a_live_ones_kept(tmp_path):
    import subprocess
    import sys

    from specflux.base.files import ChangeSet
    from specflux.base.leftovers import remove_stale_temps_in

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    target = tmp_path / "tasks.md"
    target.write_text(TASKS_MD)
    stale = tmp_path / f".tasks.md.{pid}.abcd1234.tmp"
    live = tmp_path / f".tasks.md.{os.getpid()}.efgh5678.tmp"
    other = tmp_path / ".notes.tmp"  # not one of atomic_write's: never touched
    for p in (stale, live, other):
        p.write_text("half")
    files = ChangeSet()
    files.write(target, tick_tasks_md(TASKS_MD, 5, "T001"))
    files.apply()
    assert not stale.exists() and live.exists() and other.exists()
    assert target.read_text() == tick_tasks_md(TASKS_MD, 5, "T001")
    stale.write_text("half")
    remove_stale_temps_in(tmp_path)
    assert not stale.exists() and live.exists() and other.exists()


@pytest.mark.parametrize("point", ["writeback:before-write", "atomic:tasks.md", "wrote:tasks.md"])
def test_specflux_complete_killed_mid_write_back_then_run_again(git_repo, capsys, point):
    """`specflux complete` of an imported task, `kill -9` in the middle of its write-back, then
    run again: tasks.md ticked (only that line), committed with the completion, nothing left over."""
    import subprocess
    import sys

    from conftest import git
    from helpers import run, specflux_process

    text = TASKS_MD.replace("\n", "\r\n")
    (git_repo / "tasks.md").write_bytes(text.encode())
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "import", str(git_repo / "tasks.md"))[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "imported")
    args = ("complete", "T002", "--summary", "Linting configured")
    done = specflux_process(git_repo, *args, env={"SPECFLUX_CRASH_AT": point})
    assert done.returncode == -9, done.stderr
    now = (git_repo / "tasks.md").read_bytes()
    assert now in (text.encode(), tick_tasks_md(text, 6, "T002").encode()), "tasks.md half written"
    done = specflux_process(git_repo, *args, env={"SPECFLUX_CRASH_AT": ""})
    assert done.returncode == 0, done.stderr
    ticked = tick_tasks_md(text, 6, "T002").encode()
    assert (git_repo / "tasks.md").read_bytes() == ticked
    head = subprocess.run(["git", "show", "HEAD:tasks.md"], cwd=git_repo, capture_output=True).stdout
    assert head == ticked, "the tick is not in the completion's commit"
    assert "task T002: complete" in git(git_repo, "log", "-1", "--format=%s")
    assert git(git_repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert specflux_process(git_repo, "lint").returncode == 0
