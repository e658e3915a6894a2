"""Backlog.md import: real task files from the corpus and a fixture folder in Backlog.md's own shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPUS

from specflux.importers.backlog import parse_file, parse_folder

FIXTURE = Path(__file__).parent.parent / "fixtures" / "import" / "backlog"
PROGRESS = CORPUS / "progress"
BACK_200 = "back-200 - Add-Claude-Code-integration-with-workflow-commands-during-init.md"
BACK_355_02 = "back-355.02 - CLI-Add-type-flag-to-task-create-and-edit-commands.md"
ARIADNE = "task-152 - Split-SymbolReference-into-specific-reference-types.md"


def corpus_file(name: str) -> str:
    """The text of a corpus Backlog.md file (stored as `<repo>__<file name>`)."""
    matches = sorted(PROGRESS.glob(f"*__{name}")) if PROGRESS.is_dir() else []
    if not matches:
        pytest.skip(f"corpus file {name!r} not found under {PROGRESS} (CI has the corpus beside the checkout)")
    return matches[0].read_text(encoding="utf-8")


def fixture_folder() -> dict[str, str]:
    return {p.relative_to(FIXTURE).as_posix(): p.read_text(encoding="utf-8") for p in FIXTURE.rglob("*") if p.is_file()}


def by_id(result):
    return {draft.task_id: draft for draft in result.drafts}


def messages(result) -> list[str]:
    return [str(w) for w in result.warnings]


# --- the corpus -------------------------------------------------------------------------------------

def test_every_backlog_file_of_the_corpus_imports(corpus_files):
    backlog_files = [p for p in corpus_files if p.suffix == ".md" and p.name.split("__", 1)[0] in ("backlog-md", "ariadne")]
    assert len(backlog_files) >= 3
    for path in backlog_files:
        result = parse_file(path.read_text(encoding="utf-8"), path.name)
        assert len(result.drafts) == 1, (path.name, messages(result))
        assert result.drafts[0].criteria


def test_back_200_to_do_with_eight_open_criteria():
    result = parse_file(corpus_file(BACK_200), f"tasks/{BACK_200}")
    (draft,) = result.drafts
    assert draft.task_id == "BACK-200"
    assert draft.title == "Add Claude Code integration with workflow commands during init"
    assert draft.status == "pending"
    assert len(draft.criteria) == 8 and draft.checked == [False] * 8
    assert draft.criteria[0] == "Claude Code template files are stored in src/templates/claude/"
    assert draft.criteria[7].startswith("If .claude/claude.yaml already exists, merge new commands")
    assert draft.requirements.startswith("Enable users to leverage Claude Code's custom commands feature")
    assert draft.requirements.endswith("https://github.com/MrLesk/Backlog.md/pull/235")
    assert draft.metadata["labels"] == ["enhancement", "developer-experience"]
    assert draft.metadata["priority"] == 3
    assert draft.metadata["source"] == {"path": f"tasks/{BACK_200}", "id": "BACK-200"}
    assert "assignee" not in draft.metadata  # `assignee: []`
    assert draft.line == 1
    # alone, its dependencies are unknown: reported where they are written
    assert messages(result) == [
        f"tasks/{BACK_200}:12: dependency 'task-24.1' is not an imported task; left out",
        f"tasks/{BACK_200}:13: dependency 'task-208' is not an imported task; left out",
    ]


def test_back_200_dependencies_resolve_case_insensitively():
    files = {
        f"tasks/{BACK_200}": corpus_file(BACK_200),
        "tasks/task-208 - Other.md": "---\nid: TASK-208\ntitle: Other\nstatus: Done\n---\n",
        "completed/task-24.1 - Done-long-ago.md": "---\nid: task-24.1\ntitle: Done long ago\nstatus: Done\n---\n",
    }
    result = parse_folder(files)
    assert by_id(result)["BACK-200"].dependencies == ["task-24.1", "TASK-208"]
    assert result.warnings == []


def test_back_355_02_done_subtask_all_ticked():
    result = parse_file(corpus_file(BACK_355_02), f"tasks/{BACK_355_02}")
    (draft,) = result.drafts
    assert draft.task_id == "BACK-355.02"
    assert draft.title == "CLI: Add --type flag to task create and edit commands"
    assert draft.status == "complete"
    assert len(draft.criteria) == 6 and draft.checked == [True] * 6
    assert draft.criteria[5] == "CLI help text documents the --type flag"
    assert draft.requirements.startswith("Extend CLI commands to support the type field, allowing users to specify "
                                         "and modify task types from the command line.\n\nFrom the source (")
    assert "\n## Implementation Notes\n" in draft.requirements, "the rest of the file is kept verbatim"
    assert draft.metadata["parent"] == "BACK-355"
    assert draft.metadata["assignee"] == ["@codex-types-cli"]
    assert draft.metadata["labels"] == ["cli"]


def test_a_prefix_change_still_resolves_by_number():
    """Backlog.md renamed its prefix (task- -> BACK-): `dependencies: [task-355.01]` means BACK-355.01."""
    files = {
        f"tasks/{BACK_355_02}": corpus_file(BACK_355_02),
        "tasks/back-355.01 - Config.md": "---\nid: BACK-355.01\ntitle: Config\nstatus: Done\nparent_task_id: BACK-355\n---\n",
        "tasks/back-355 - Types.md": "---\nid: BACK-355\ntitle: Types\nstatus: In Progress\n---\n",
    }
    result = parse_folder(files)
    drafts = by_id(result)
    assert drafts["BACK-355.02"].dependencies == ["BACK-355.01"]
    assert drafts["BACK-355.02"].metadata["parent"] == "BACK-355"
    assert drafts["BACK-355.01"].metadata["parent"] == "BACK-355"
    assert "parent" not in drafts["BACK-355"].metadata
    assert result.warnings == []


def test_hand_edited_ariadne_file_imports_without_raising():
    result = parse_file(corpus_file(ARIADNE), f"tasks/{ARIADNE}")
    (draft,) = result.drafts
    assert draft.task_id == "task-152"
    assert draft.status == "in_progress"
    assert draft.metadata["labels"] == ["architecture", "type-safety", "refactoring"]  # flow-style list
    assert draft.metadata["priority"] == 1
    assert draft.metadata["backlog"]["estimated_effort"] == "6-8 days"  # a custom key is kept
    assert draft.dependencies == []
    # no Acceptance Criteria section: one criterion from the title, not the checklists further down
    assert draft.criteria == ["Split SymbolReference into specific reference types"]
    assert draft.checked == [False]
    assert draft.requirements.startswith("Split the monolithic `SymbolReference` interface")
    assert "compile-time guarantees through discriminated unions.\n\nFrom the source (" in draft.requirements
    assert messages(result) == [
        f"tasks/{ARIADNE}:45: 14 sub-task(s) written as headings (task-152.1 ... task-152.14) not imported; "
        "Backlog.md keeps each sub-task in its own file"
    ]


# --- the fixture folder -----------------------------------------------------------------------------

def test_fixture_folder_ids_statuses_ticks_and_dependencies():
    result = parse_folder(fixture_folder())
    assert [d.task_id for d in result.drafts] == ["task-7", "task-7-2", "task-196", "task-196.1", "task-196.2",
                                                  "task-3"], "a second file with a taken id is imported too"
    drafts = by_id(result)
    assert {i: d.status for i, d in drafts.items()} == {
        "task-7": "pending", "task-7-2": "pending", "task-196": "in_progress", "task-196.1": "pending", "task-196.2": "blocked",
        "task-3": "complete",
    }
    parent = drafts["task-196"]
    assert parent.criteria == ["Export writes one row per task", "Columns follow the order of `task list --plain`"]
    assert parent.checked == [True, False]
    assert parent.requirements == (
        "Add `backlog task export --csv` so tasks can be opened in a spreadsheet.\n\n"
        "From the source (tasks/task-196 - Export-tasks-as-CSV.md, lines 28-32), kept verbatim:\n\n"
        "```markdown\n## Implementation Plan\n\n<!-- SECTION:PLAN:BEGIN -->\n1. Reuse the plain formatter.\n"
        "<!-- SECTION:PLAN:END -->\n```") and parent.kept == 4
    assert parent.metadata["priority"] == 1 and parent.metadata["assignee"] == ["@alice"]

    sub = drafts["task-196.1"]
    assert sub.dependencies == ["task-3", "task-196.2"]  # `TASK-3` matched case-insensitively; task-999 unknown
    assert sub.metadata["parent"] == "task-196"
    assert sub.metadata["priority"] == 5
    assert sub.metadata["labels"] == ["cli", "export"]

    implied = drafts["task-196.2"]
    assert implied.metadata["parent"] == "task-196"  # no parent_task_id: the dotted id says it
    assert implied.criteria == ["Write export docs"] and implied.checked == [False]
    assert implied.metadata["backlog"]["status"] == "QA"

    done = drafts["task-3"]
    assert done.criteria == ["`backlog --help` lists the commands"] and done.checked == [True]

    old = drafts["task-7"]
    assert old.criteria == ["The old format is read", "Plain bullets count too", "Without a checkbox"]
    assert old.checked == [True, False, False]
    assert old.requirements.startswith("Written before Backlog.md had section markers.")
    assert old.metadata["priority"] == 2 and old.metadata["labels"] == ["docs"] and old.metadata["assignee"] == ["@bob"]
    assert old.dependencies == ["task-3"]
    assert "task-8" not in drafts  # drafts/ is not a task folder


def test_fixture_folder_warnings_are_located():
    result = parse_folder(fixture_folder(), base="backlog")
    assert messages(result) == [
        "backlog/tasks/task-7 - Written-again.md:2: id TASK-7 is also the id of backlog/tasks/task-7 - Hand-written-task.md; "
        "this file is imported as task-7-2",
        "backlog/tasks/task-196.2 - Write-export-docs.md:4: status 'QA' (not one of the statuses config.yml declares) "
        "has no equivalent; imported as blocked",
        "backlog/tasks/task-196.1 - Quote-fields-with-commas.md:8: dependency 'task-999' is not an imported task; left out",
    ]
    assert by_id(result)["task-196"].metadata["source"]["path"] == "backlog/tasks/task-196 - Export-tasks-as-CSV.md"


def test_same_files_same_drafts_whatever_the_order():
    files = fixture_folder()
    first = parse_folder(files)
    again = parse_folder(dict(reversed(list(files.items()))))
    assert again.drafts == first.drafts
    assert again.warnings == first.warnings


def test_a_file_in_completed_is_complete_whatever_its_status():
    text = "---\nid: task-3\ntitle: Moved\nstatus: In Progress\n---\n\n## Acceptance Criteria\n<!-- AC:BEGIN -->\n- [ ] #1 x\n<!-- AC:END -->\n"
    (draft,) = parse_folder({"completed/task-3 - Moved.md": text}).drafts
    assert draft.status == "complete"
    assert draft.checked == [False]  # ticks stay as written
    (draft,) = parse_file(text, "backlog/completed/task-3 - Moved.md").drafts
    assert draft.status == "complete"


# --- odd input: reported, never raised -------------------------------------------------------------

def test_invalid_front_matter_is_reported_at_its_line():
    text = "---\nid: task-1\ntitle: [unclosed\nstatus: To Do\n---\nbody\n"
    result = parse_file(text, "tasks/task-1 - x.md")
    assert result.drafts == []
    (warning,) = result.warnings
    assert warning.path == "tasks/task-1 - x.md" and warning.line == 4
    assert "not valid YAML" in warning.message


def test_no_front_matter_takes_the_id_and_title_from_the_file_name():
    result = parse_file("Just a note.\n", "tasks/task-12 - Fix-the-thing.md")
    (draft,) = result.drafts
    assert (draft.task_id, draft.title, draft.status) == ("task-12", "Fix the thing", "pending")
    assert draft.criteria == ["Fix the thing"]


def test_no_id_anywhere_is_reported():
    result = parse_file("---\ntitle: Nameless\n---\n", "tasks/notes.md")
    assert result.drafts == []
    assert messages(result) == ["tasks/notes.md: no usable task id (front matter `id:` or file name); file skipped"]


@pytest.mark.parametrize("text", [
    "", "---\n---\n", "---\n- a list\n---\n", "---\nid: 5\ntitle: 7\npriority: urgent\nlabels: 3\n---\n",
    "---\nid: task-1\nstatus: [To Do]\ndependencies: task-1\n---\n", "\ufeff---\nid: task-1\n---\n<!-- AC:BEGIN -->\n",
    "---\nid: task-1\n---\n```\n<!-- AC:BEGIN -->\n- [ ] #1 fenced\n",
])
def test_odd_files_do_not_raise(text):
    parse_file(text, "tasks/task-1 - x.md")
    parse_folder({"tasks/task-1 - x.md": text, "tasks/task-1 - y.md": text})


def test_unknown_priority_and_self_dependency_are_reported():
    text = "---\nid: task-1\ntitle: T\nstatus: To Do\npriority: urgent\ndependencies:\n  - TASK-1\n---\n"
    result = parse_file(text, "tasks/task-1 - T.md")
    assert "priority" not in result.drafts[0].metadata
    assert messages(result) == [
        "tasks/task-1 - T.md:5: priority 'urgent' not understood; left out",
        "tasks/task-1 - T.md:7: task depends on itself ('TASK-1'); left out",
    ]
