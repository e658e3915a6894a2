"""No task is dropped for its id: a second Backlog.md file or Taskmaster task with a taken id is
imported under an id of its own, the warning names both, and importing again changes nothing
(end to end, in a real git repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git
from helpers import ok, run

from specflux.importers.backlog import parse_folder
from specflux.importers.taskmaster import parse

STATES = ".specflux/task-states"


def backlog_task(task_id: str, title: str, deps: tuple[str, ...] = (), status: str = "To Do") -> str:
    """A task file as Backlog.md writes it."""
    return (f"---\nid: {task_id}\ntitle: {title}\nstatus: {status}\nassignee: []\n"
            f"created_date: '2025-06-20 10:12'\nlabels: []\ndependencies: [{', '.join(deps)}]\n---\n\n"
            f"## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\n{title}.\n<!-- SECTION:DESCRIPTION:END -->\n\n"
            "## Acceptance Criteria\n<!-- AC:BEGIN -->\n- [ ] #1 It works\n<!-- AC:END -->\n")


# eight files; after a merge two carry task-56
FOLDER = {
    "tasks/task-50 - Set-up-the-repository.md": backlog_task("task-50", "Set up the repository"),
    "tasks/task-51 - Add-the-config-loader.md": backlog_task("task-51", "Add the config loader", ("task-50",)),
    "tasks/task-52 - Parse-the-task-files.md": backlog_task("task-52", "Parse the task files", ("task-50",)),
    "tasks/task-53 - Write-the-board.md": backlog_task("task-53", "Write the board", ("task-52",)),
    "tasks/task-54 - Add-search.md": backlog_task("task-54", "Add search", ("task-52",)),
    "tasks/task-55 - Export-as-CSV.md": backlog_task("task-55", "Export as CSV", ("task-52",)),
    "tasks/task-56 - Add-dark-mode.md": backlog_task("task-56", "Add dark mode", ("task-53",)),
    "tasks/task-56 - Keyboard-shortcuts.md": backlog_task("task-56", "Keyboard shortcuts", ("task-53",)),
}


def test_two_backlog_files_with_one_id_are_both_imported():
    result = parse_folder(FOLDER, base="backlog")
    assert len(result.drafts) == 8
    titles = {d.task_id: d.title for d in result.drafts}
    assert titles["task-56"] == "Add dark mode" and titles["task-56-2"] == "Keyboard shortcuts"
    assert [str(w) for w in result.warnings] == [
        "backlog/tasks/task-56 - Keyboard-shortcuts.md:2: id task-56 is also the id of "
        "backlog/tasks/task-56 - Add-dark-mode.md; this file is imported as task-56-2"]
    second = next(d for d in result.drafts if d.task_id == "task-56-2")
    assert second.dependencies == ["task-53"] and second.metadata["source"] == {
        "path": "backlog/tasks/task-56 - Keyboard-shortcuts.md", "id": "task-56"}
    assert parse_folder(dict(reversed(FOLDER.items())), base="backlog") == result, "whatever the order"


TAGGED = """\
{
  "master": {
    "tasks": [
      {
        "id": 1,
        "title": "Set up database schema",
        "status": "done",
        "dependencies": [],
        "subtasks": [
          {"id": 1, "title": "Users table", "status": "done", "dependencies": []},
          {"id": 2, "title": "Sessions table", "status": "done", "dependencies": [1]},
          {"id": 2, "title": "Audit table", "status": "pending", "dependencies": ["1.1"]},
          "Indexes for the sessions table"
        ]
      },
      {"id": 2, "title": "Implement REST endpoints", "status": "pending", "dependencies": ["1"]},
      {"id": "2", "title": "Implement the CLI", "status": "pending", "dependencies": [1, 2]},
      {
        "id": null,
        "title": "Deploy",
        "subtasks": [{"id": 1, "title": "Staging"}, {"id": 2, "title": "Production"}]
      }
    ],
    "metadata": {"created": "2025-10-11T09:00:00.000Z", "description": "Tasks for master context"}
  }
}
"""


def test_taskmaster_ids_taken_twice_are_imported_under_new_ids_and_what_is_skipped_is_located():
    result = parse(TAGGED, ".taskmaster/tasks/tasks.json")
    drafts = {d.task_id: d for d in result.drafts}
    assert list(drafts) == ["1", "1.1", "1.2", "1.2-2", "2", "2-2"]
    assert drafts["1.2-2"].title == "Audit table" and drafts["1.2-2"].dependencies == ["1.1"]
    assert drafts["1.2-2"].metadata["source"] == {"path": ".taskmaster/tasks/tasks.json", "id": "1.2"}
    assert drafts["2-2"].title == "Implement the CLI" and drafts["2-2"].dependencies == ["1", "2"]
    assert [str(w) for w in result.warnings] == [
        ".taskmaster/tasks/tasks.json:12: subtask 1.2 appears twice (first on line 11); imported this one as 1.2-2",
        ".taskmaster/tasks/tasks.json:5: a subtask that is not an object; skipped",
        ".taskmaster/tasks/tasks.json:17: task 2 appears twice (first on line 16); imported this one as 2-2",
        ".taskmaster/tasks/tasks.json:19: task id None is not a task id; skipped with its 2 subtask(s)",
    ]
    assert parse(TAGGED, ".taskmaster/tasks/tasks.json") == result


@pytest.fixture
def repo(git_repo: Path, capsys) -> Path:
    ok(capsys, git_repo, "init", str(git_repo))
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "workspace")
    return git_repo


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / STATES).glob("*.md"))}


def test_importing_again_changes_nothing_and_each_warning_is_printed_once(repo, capsys):
    for name, text in FOLDER.items():
        (repo / "backlog" / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / "backlog" / name).write_text(text)
    (repo / ".taskmaster" / "tasks").mkdir(parents=True)
    (repo / ".taskmaster" / "tasks" / "tasks.json").write_text(TAGGED)
    code, out, err = run(capsys, repo, "import", str(repo / "backlog"))
    assert code == 0 and "8 task(s) created" in out, out + err
    assert err.count("this file is imported as task-56-2") == 1
    code, out, err = run(capsys, repo, "import", str(repo / ".taskmaster" / "tasks" / "tasks.json"))
    assert code == 0 and "6 task(s) created" in out, out + err
    assert len(err.splitlines()) == len(set(err.splitlines())) == 4
    first = snapshot(repo)
    assert run(capsys, repo, "import", str(repo / "backlog"))[1].startswith("0 task(s) created, 8 already there")
    assert run(capsys, repo, "import", str(repo / ".taskmaster" / "tasks" / "tasks.json"))[1].startswith(
        "0 task(s) created, 6 already there")
    assert snapshot(repo) == first, "importing again changes nothing"
    shown = json.loads(ok(capsys, repo, "show", "task-56-2", "--json"))
    assert shown["title"] == "Keyboard shortcuts" and shown["dependencies"] == ["task-53"]
    assert run(capsys, repo, "lint")[0] == 0
