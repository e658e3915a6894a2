"""spec-kit task lines as people write them, beyond the template's `- [ ] T001 [P] [US1] ...`:
a colon, dash, full stop or em dash after the id, bold ids, markers in front or at the end, ids
in lower case, quoted lines in sub-bullets, ids written twice. The lines are real ones (public
spec-kit repositories), cut to what each rule needs."""

from __future__ import annotations

import re

import pytest

from specflux.importers.speckit import parse
from specflux.importers.writeback import tick_tasks_md

MARKER = re.compile(r"\[\s*(?:P|US\s*-?\d+|Story(?:\s*\d+)?|P\?)\s*\]", re.I)

# harmonylite-cdc's specs/.../tasks.md: a colon after every id, `[P]` after the colon
COLON = """\
## Phase 3.1: Setup & Preparation

- [x] T001: Update go.mod with new dependencies (modernc.org/sqlite, nats.io/nats.go JetStream, ginkgo v2, gomega, prometheus client)
- [x] T002: [P] Create new directory structure (walparser/, checkpoint/, dedup/, tests/unit/, tests/integration/, tests/e2e/)
- [x] T003: Update Makefile with version injection for WAL parser components and new build targets
- [x] T004: [P] Create configuration structs in cfg/ for WAL parsing settings, checkpoint thresholds, deduplication retention (extend existing TOML config)

## Phase 3.2: Tests First (TDD) ⚠️ MUST COMPLETE BEFORE 3.3

- [x] T005: [P] WAL Parser contract test in tests/unit/walparser/parser_test.go
- [x] T006: [P] Checkpoint contract test in tests/unit/checkpoint/checkpoint_test.go
"""


def by_id(result):
    return {d.task_id: d for d in result.drafts}


def messages(result) -> list[str]:
    return [str(w) for w in result.warnings]


def test_a_colon_after_the_id_keeps_the_markers_out_of_the_title_and_the_task_parallel():
    result = parse(COLON, "tasks.md")
    drafts = by_id(result)
    assert [d.task_id for d in result.drafts] == ["T001", "T002", "T003", "T004", "T005", "T006"]
    assert [d.task_id for d in result.drafts if d.metadata["parallel"]] == ["T002", "T004", "T005", "T006"]
    assert drafts["T002"].title == ("Create new directory structure (walparser/, checkpoint/, dedup/, tests/unit/, "
                                    "tests/integration/, tests/e2e/)")
    assert not [d.title for d in result.drafts if MARKER.search(d.title)]
    # T005 and T006 start their phase side by side, both after the previous phase's last task
    assert drafts["T004"].dependencies == ["T003"]
    assert drafts["T005"].dependencies == drafts["T006"].dependencies == ["T004"]
    assert result.warnings == []


@pytest.mark.parametrize("line", [
    "- [X] T002 [P] [US1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] T002: [P] [US1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] T002 - [P] [US1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] T002. [P] [US1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] T002 — [P] [US1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] T002 – [P] [US1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] T002 [P] [US1]: Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] T002: [P] - [US1] - Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] **T002** [P] [US1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] **T002:** [P] [US1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] **T002 [P] [US1]** Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] [P] [US1] T002 Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] T002 [P] [Story 1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
    "- [X] T002 Create `backend/pricing_v2/dataclasses.py` and define the data classes [P] [US1]",
    "- [X] t002 [P] [US1] Create `backend/pricing_v2/dataclasses.py` and define the data classes",
])
def test_every_spelling_of_the_head_reads_the_same(line):
    result = parse(f"## Phase 2: Data Structures\n{line}\n", "tasks.md")
    (draft,) = result.drafts
    assert draft.task_id == "T002"
    assert draft.title == "Create `backend/pricing_v2/dataclasses.py` and define the data classes"
    assert draft.metadata["parallel"] is True and draft.metadata["user_story"] == "US1"
    assert draft.status == "complete" and result.warnings == []


def test_the_templates_placeholders_are_dropped_and_other_tags_kept_as_labels():
    text = ("- [ ] T010 [P] [Story] Implement [endpoint] in src/api/users.py\n"
            "- [ ] T011 [Setup] [P?] Configure linting and formatting tools\n")
    one, two = parse(text, "tasks.md").drafts
    assert one.title == "Implement [endpoint] in src/api/users.py" and "labels" not in one.metadata
    assert two.title == "Configure linting and formatting tools" and two.metadata["labels"] == ["Setup"]


def test_a_link_right_after_the_id_is_text_not_a_tag():
    (draft,) = parse("- [ ] T003 [contract](contracts/api.md) test for POST /users\n", "tasks.md").drafts
    assert draft.title == "[contract](contracts/api.md) test for POST /users" and "labels" not in draft.metadata


def test_a_quoted_line_and_the_tasks_own_id_are_not_dependencies_and_each_warning_is_said_once():
    text = ("## Phase 4: Polish\n\n"
            "- [X] T026: Run the full test suite\n"
            "- [ ] T027: Mark the feature complete in tasks.md\n"
            "  - After the suite passes, change \"- [ ] T027:\" to \"- [X] T027:\"\n"
            "  - Then change \"- [ ] T026:\" to \"- [X] T026:\" if it is still open\n"
            "  - Needs T099 and T099 again\n"
            "- [ ] T028: Update the README (depends on T026; T028 is the last task)\n")
    result = parse(text, "tasks.md")
    drafts = by_id(result)
    assert drafts["T027"].dependencies == ["T026"], "file order; no self-dependency, nothing from the quotes"
    assert drafts["T028"].dependencies == ["T026"]
    assert messages(result) == [
        "tasks.md:4: T027 depends on T099, which is not a task in this file; dependency dropped"]


def test_a_dependencies_line_naming_the_task_itself_is_said_once():
    text = "- [ ] T001 Set up\n- [ ] T002 Build\n  - Dependencies: T001, T002, T002\n"
    result = parse(text, "tasks.md")
    assert by_id(result)["T002"].dependencies == ["T001"]
    assert messages(result) == ["tasks.md:2: T002 cannot depend on itself; dependency dropped"]


def test_lower_case_ids_are_tasks_and_write_back_finds_their_line():
    text = ("## Phase 1: Setup\n"
            "- [ ] T004 [P] Create EntityType type alias in src/mixpanel_data/types.py\n"
            "- [ ] t005 [P] Create LexiconMetadata frozen dataclass with to_dict() in src/mixpanel_data/types.py\n"
            "- [ ] T006 Create LexiconProperty frozen dataclass (depends on t005; runs on a t2.micro)\n")
    result = parse(text, "tasks.md")
    drafts = by_id(result)
    assert list(drafts) == ["T004", "T005", "T006"] and drafts["T005"].metadata["parallel"] is True
    assert drafts["T005"].metadata["source"] == {"path": "tasks.md", "line": 3, "id": "t005"}
    assert drafts["T006"].dependencies == ["T005"], "t005 is T005; t2 names no task and is no dependency"
    assert result.warnings == []
    ticked = tick_tasks_md(text, 3, drafts["T005"].metadata["source"]["id"])
    assert ticked.splitlines()[2].startswith("- [x] t005 [P]")


def test_an_id_written_again_with_other_text_is_a_warning_and_importing_again_is_the_same():
    text = ("- [ ] T001 Create the project\n"
            "- [ ] t001 Create the CI workflow\n"
            "- [ ] T001 Write the licence\n")
    result = parse(text, "tasks.md")
    assert [(d.task_id, d.title) for d in result.drafts] == [("T001", "Create the project")]
    assert messages(result) == [
        "tasks.md:2: t001 is listed again with other text (first on line 1); not imported: T001 is line 1's task",
        "tasks.md:3: T001 is listed again with other text (first on line 1); not imported: T001 is line 1's task",
    ]
    assert parse(text, "tasks.md") == result


def test_lines_that_look_like_tasks_are_tasks_or_located_warnings():
    text = ("## Phase 1\n"
            "- [ ] T001 Set up the repository\n"
            "- [ ] T002\n"
            "- [ ] TXXX Placeholder\n"
            "- [ ] Update the changelog\n"
            "- T003: Configure the release workflow\n")
    result = parse(text, "tasks.md")
    assert [(d.task_id, d.title) for d in result.drafts] == [("T001", "Set up the repository"), ("T002", "T002")]
    assert messages(result) == [
        "tasks.md:3: T002 has no description; imported with its id as its title",
        "tasks.md:4: TXXX is a placeholder, not a task id; this line is not imported",
        "tasks.md:5: this checkbox looks like a task but has no task id (such as T001); not imported",
        "tasks.md:6: T003 looks like a task but is not a checkbox item as this file's tasks are; not imported",
    ]
