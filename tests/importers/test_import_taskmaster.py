"""Taskmaster import: fixtures in task-master-ai's own tasks.json shapes (legacy and tagged)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPUS

from specflux.importers.taskmaster import LocatedJSON, parse, split_criteria

FIXTURES = Path(__file__).parent.parent / "fixtures" / "import"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def by_id(result):
    return {draft.task_id: draft for draft in result.drafts}


def messages(result) -> list[str]:
    return [str(w) for w in result.warnings]


def test_every_taskmaster_file_of_the_corpus_imports():
    found = sorted(CORPUS.rglob("*tasks.json")) if CORPUS.is_dir() else []
    if not found:
        pytest.skip(f"no Taskmaster tasks.json under {CORPUS}; the fixtures stand in")
    for path in found:
        assert parse(path.read_text(encoding="utf-8"), path.name).drafts


def test_legacy_file_with_mixed_id_types():
    result = parse(fixture("taskmaster-legacy.json"), ".taskmaster/tasks/tasks.json")
    assert [d.task_id for d in result.drafts] == ["1", "2", "2.1", "2.2", "3", "3.1"]
    drafts = by_id(result)
    # ids are ints and strings ("2" subtask, "3" task); dependencies mix 1, "2" and dotted "2.2"
    assert drafts["2"].dependencies == ["1"]
    assert drafts["2.2"].dependencies == ["2.1"]  # `1` in a subtask of 2 is its sibling 2.1
    assert drafts["3"].dependencies == ["2", "2.2"]
    assert drafts["3.1"].dependencies == ["2.1"]  # dotted: a subtask of another task
    assert {i: d.status for i, d in drafts.items()} == {
        "1": "complete", "2": "in_progress", "2.1": "complete", "2.2": "pending", "3": "blocked", "3.1": "pending",
    }
    assert drafts["3"].metadata["taskmaster"] == {"status": "deferred"}
    assert {i: d.metadata.get("priority") for i, d in drafts.items()} == {
        "1": 1, "2": 3, "2.1": None, "2.2": None, "3": 5, "3.1": None,
    }
    assert drafts["2.1"].metadata["parent"] == "2" and "parent" not in drafts["2"].metadata
    assert all(d.metadata["tag"] == "master" for d in result.drafts)
    assert drafts["2.2"].metadata["source"] == {"path": ".taskmaster/tasks/tasks.json", "id": "2.2"}
    assert messages(result) == [
        ".taskmaster/tasks/tasks.json:50: task 3: status 'deferred' has no equivalent; imported as blocked",
        ".taskmaster/tasks/tasks.json:50: task 3: dependency 7 is not a task of this tag; left out"]


def test_legacy_criteria_requirements_and_lines():
    drafts = by_id(parse(fixture("taskmaster-legacy.json"), "tasks.json"))
    one = drafts["1"]
    assert one.criteria == ["Run `npm run dev` and check the start page renders.",
                            "Run `npm run build` and check it compiles without errors."]
    assert one.checked == [True, True]  # done: every criterion is met
    assert one.requirements == (
        "Set up the project skeleton with TypeScript and Tailwind CSS.\n\n"
        "Run `npx create-next-app@latest --typescript --tailwind` and create the `components/` and `lib/` folders.")
    assert drafts["2"].criteria == ["Layout renders its children between navbar and footer",
                                    "Footer stays at the bottom on short pages"]
    assert drafts["2.2"].criteria == ["Layout accepts children", "Layout renders Navbar and Footer"]  # acceptanceCriteria
    assert drafts["3"].criteria == ["Build project cards section"]  # no testStrategy: the title
    assert drafts["2.1"].checked == [True]
    assert {i: d.line for i, d in drafts.items()} == {"1": 4, "2": 15, "2.1": 27, "2.2": 36, "3": 50, "3.1": 64}


def test_tagged_file_prefixes_other_tags():
    result = parse(fixture("taskmaster-tagged.json"), "tasks.json")
    assert [d.task_id for d in result.drafts] == [
        "1", "1.1", "1.2", "2", "2.1", "2.2", "3", "4",
        "feature-auth.1", "feature-auth.1.1", "feature-auth.1.2", "feature-auth.2",
    ]
    drafts = by_id(result)
    assert drafts["1.2"].dependencies == ["1.1"]
    assert drafts["2"].dependencies == ["1"]  # "1" as a string
    assert drafts["2.1"].dependencies == ["1.2"]  # dotted, into another task's subtasks
    assert drafts["2.2"].dependencies == ["2.1"]
    # a tag's ids are its own: "1.1" in feature-auth is feature-auth.1.1, not master's 1.1
    assert drafts["feature-auth.1.2"].dependencies == ["feature-auth.1.1"]
    assert drafts["feature-auth.2"].dependencies == ["feature-auth.1"]
    assert drafts["feature-auth.1.1"].metadata["parent"] == "feature-auth.1"
    assert drafts["feature-auth.1"].metadata["tag"] == "feature-auth"
    assert drafts["feature-auth.1"].metadata["source"] == {"path": "tasks.json", "id": "1"}
    assert drafts["feature-auth.1"].criteria == ["A valid login returns 200 and a token.", "A wrong password returns 401."]


def test_tagged_statuses_and_the_unmapped_one():
    result = parse(fixture("taskmaster-tagged.json"), "tasks.json")
    statuses = {d.task_id: d.status for d in result.drafts}
    assert statuses["1"] == "complete"
    assert statuses["2"] == "review"
    assert statuses["2.2"] == "blocked"
    assert statuses["3"] == "blocked"  # cancelled
    assert statuses["4"] == "blocked"  # needs-design: not a Taskmaster status
    assert statuses["feature-auth.1"] == "in_progress"
    drafts = by_id(result)
    assert drafts["3"].metadata["taskmaster"] == {"status": "cancelled"}
    assert drafts["4"].metadata["taskmaster"] == {"status": "needs-design"}
    assert "taskmaster" not in drafts["2"].metadata
    assert [m for m in messages(result) if "status" in m] == [
        "tasks.json:72: task 3: status 'cancelled' has no equivalent; imported as blocked",
        "tasks.json:85: task 4: status 'needs-design' not known to Taskmaster and has no equivalent; imported as blocked"]


def test_same_text_same_drafts():
    for name in ("taskmaster-legacy.json", "taskmaster-tagged.json"):
        first, again = parse(fixture(name), "tasks.json"), parse(fixture(name), "tasks.json")
        assert again.drafts == first.drafts and again.warnings == first.warnings


def test_a_second_task_with_a_taken_id_is_imported_under_a_new_id():
    text = '{"tasks": [\n {"id": 1, "title": "A"},\n {"id": "1", "title": "B"},\n {"id": 2, "title": "C", "dependencies": [1]}\n]}'
    result = parse(text, "tasks.json")
    assert [(d.task_id, d.title) for d in result.drafts] == [("1", "A"), ("1-2", "B"), ("2", "C")]
    assert by_id(result)["2"].dependencies == ["1"], "the first keeps the id"
    assert by_id(result)["1-2"].metadata["source"] == {"path": "tasks.json", "id": "1"}
    assert messages(result) == ["tasks.json:3: task 1 appears twice (first on line 2); imported this one as 1-2"]


def test_string_ids_and_string_subtask_dependencies():
    """Some projects use names as ids (seen in 5dlabs/taskmaster-sync)."""
    text = """{"master": {"tasks": [
  {"id": "core", "title": "Core", "status": "done", "dependencies": [], "subtasks": [
    {"id": "cli", "title": "CLI", "status": "done", "dependencies": [], "details": null, "testStrategy": null},
    {"id": "errors", "title": "Errors", "status": "pending", "dependencies": ["cli"]}
  ]},
  {"id": "models", "title": "Models", "status": "pending", "dependencies": ["core", "core.errors"]}
]}}"""
    result = parse(text, "tasks.json")
    drafts = by_id(result)
    assert list(drafts) == ["core", "core.cli", "core.errors", "models"]
    assert drafts["core.errors"].dependencies == ["core.cli"]
    assert drafts["models"].dependencies == ["core", "core.errors"]
    assert drafts["core.cli"].criteria == ["CLI"] and drafts["core.cli"].requirements == ""
    assert result.warnings == []


def test_not_json_is_reported_at_its_line():
    result = parse('{\n  "tasks": [\n    {"id": 1,}\n  ]\n}', "tasks.json")
    assert result.drafts == []
    assert messages(result) == ["tasks.json:3: not valid JSON: Expecting property name enclosed in double quotes"]


@pytest.mark.parametrize("text", [
    "[]", "{}", "null", '{"tasks": {}}', '{"tasks": [1, null, {"id": true}, {"id": [1]}, {"title": "no id"}]}',
    '{"master": {"tasks": [{"id": 1, "subtasks": {"id": 1}}]}}', '{"bad tag": {"tasks": [{"id": 1}]}}',
    '{"tasks": [{"id": 1, "dependencies": 1, "priority": 9, "status": 3, "testStrategy": ["a", null]}]}',
    '{"tasks": [{"id": 1.5, "dependencies": [1.5, 2.0]}, {"id": 2}]}', "[" * 5000,
])
def test_odd_files_do_not_raise(text):
    parse(text, "tasks.json")


def test_split_criteria():
    assert split_criteria("- one\n* two\n1. three\n\n[x] four") == ["one", "two", "three", "four"]
    assert split_criteria("Check it (e.g. the output). Then run it! Done?") == [
        "Check it (e.g. the output).", "Then run it!", "Done?"]
    assert split_criteria("Version 3.1 works.") == ["Version 3.1 works."]
    assert split_criteria("") == []


def test_located_json_finds_each_objects_id_line():
    text = '{\n  "a": {"details": "say \\"id\\": 5",\n    "sub": [{"id": 9}],\n    "id": 1\n  }\n}'
    doc = LocatedJSON(text)
    assert doc.line_of(doc.data["a"]) == 4  # its own "id", not the escaped one nor the nested one
    assert doc.line_of(doc.data["a"]["sub"][0]) == 3
    assert doc.line_of(doc.data) == 1  # no "id": the line of its brace
