"""spec-kit `tasks.md` import: every real file of ../shared/corpus/spec-kit parses, with exact
counts and the quirks each file is there for; small texts for the rules no real file shows
(duplicates, unknown dependencies, cycles, task headings, commented-out sample tasks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPUS

from specflux.importers.drafts import to_task_id
from specflux.importers.speckit import parse
from specflux.importers.speckit_drafts import TITLE_MAX

SPEC_KIT = CORPUS / "spec-kit"

# file -> (tasks, done, warnings), counted by hand from the files (SOURCES.md's counts include
# checklist lines that are not tasks: aikit 137 not 138, speck 008 142 not 172, claude-status-line
# 121 not 130, issue-resolver 60 not 61)
EXPECTED = {
    "aikit__002-rust-spec-kit-complete__tasks.md": (137, 133, 0),
    "audio-trimmer__001-track-settings__tasks.md": (27, 13, 0),
    "claude-status-line__001-rust-rewrite__tasks.md": (121, 114, 0),
    "codex-fork__001-here-is-a__tasks.md": (32, 0, 0),
    "d2b__001-adr046-d2b3-completion__tasks.md": (588, 57, 0),
    "dope-agent__003-mcp-execution-plane__tasks.md": (38, 38, 0),
    "eligian__019-phase-4-validation__tasks.md": (67, 33, 0),
    "finance-analyser__010-email-password-auth__tasks.md": (29, 0, 0),
    "issue-resolver__001-ai-issue-resolver__tasks.md": (60, 60, 0),
    "metal-squad__002-session-run-navigation__tasks.md": (37, 0, 0),
    "metal-squad__006-web-mode__tasks.md": (38, 0, 1),
    "omnisrouter__001-omnisrouter__tasks.md": (75, 75, 0),
    "spec-kit__TEMPLATE__tasks-template.md": (28, 0, 6),
    "speck__004-public-website__tasks.md": (126, 96, 0),
    "speck__008-stacked-pr-support__tasks.md": (142, 142, 0),
    "tau__1613__tasks.md": (5, 5, 0),
    "tau__3757__tasks.md": (11, 11, 7),  # T13-T19 of its evidence section: said, not imported
}


def spec_kit_files() -> list[Path]:
    if not SPEC_KIT.is_dir():
        pytest.skip(f"corpus not found at {SPEC_KIT} (CI has it beside the checkout)")
    return sorted(SPEC_KIT.glob("*.md"))


def real(name: str):
    path = SPEC_KIT / name
    if not path.is_file():
        pytest.skip(f"corpus file not found: {path} (CI has it beside the checkout)")
    text = path.read_bytes().decode("utf-8")
    return parse(text, f"specs/{name}"), text


def by_id(result):
    return {d.task_id: d for d in result.drafts}


def messages(result) -> list[str]:
    return [str(w) for w in result.warnings]


def cycle(drafts) -> list[str] | None:
    """A dependency cycle among the drafts, or None."""
    deps = {d.task_id: d.dependencies for d in drafts}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in deps.get(node, []):
            if state.get(dep) == 1:
                return path + [dep]
            if dep not in state and (found := visit(dep, path + [dep])):
                return found
        state[node] = 2
        return None

    for node in deps:
        if node not in state and (found := visit(node, [node])):
            return found
    return None


# ------------------------------------------------------------------------- the whole corpus


def test_every_spec_kit_file_parses_with_the_counts_counted_by_hand():
    files = spec_kit_files()
    assert {p.name for p in files} == set(EXPECTED), "a corpus file without expectations (or one gone)"
    for path in files:
        result = parse(path.read_bytes().decode("utf-8"), path.name)
        done = sum(d.status == "complete" for d in result.drafts)
        assert (len(result.drafts), done, len(result.warnings)) == EXPECTED[path.name], (path.name, messages(result))
        assert result.format == "spec-kit"


def test_every_draft_is_well_formed_and_no_file_has_a_dependency_cycle():
    for path in spec_kit_files():
        text = path.read_bytes().decode("utf-8")
        lines = text.split("\n")
        result = parse(text, path.name)
        ids = [d.task_id for d in result.drafts]
        assert len(ids) == len(set(ids)), path.name
        assert cycle(result.drafts) is None, (path.name, cycle(result.drafts))
        for d in result.drafts:
            assert to_task_id(d.task_id) == d.task_id, (path.name, d.task_id)
            assert d.criteria and all(c.strip() and "\n" not in c for c in d.criteria), (path.name, d.task_id)
            assert len(d.checked) == len(d.criteria)
            assert d.title and "\n" not in d.title and len(d.title) <= TITLE_MAX, (path.name, d.task_id, d.title)
            assert set(d.dependencies) <= set(ids) and d.task_id not in d.dependencies, (path.name, d.task_id)
            assert d.metadata["source"] == {"path": path.name, "line": d.line}
            assert isinstance(d.metadata["parallel"], bool)
            assert d.status in ("complete", "pending")
            if len(d.criteria) == 1:
                assert d.checked == [d.status == "complete"], (path.name, d.task_id)
            if "no task ids" not in " ".join(messages(result)):  # else the ids are made up
                assert d.task_id in lines[d.line - 1], (path.name, d.task_id, d.line)


def test_every_imported_task_file_lints_clean(tmp_path):
    from specflux.importers.apply import apply
    from specflux.store.lint import lint_workspace
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    for path in spec_kit_files():
        ws, _ = Workspace.init(tmp_path / path.stem)
        result = parse(path.read_bytes().decode("utf-8"), f"specs/{path.name}")
        created = apply(TaskStateManager(ws, git=False), result).created
        assert len(created) == len(result.drafts)
        assert [p for p in lint_workspace(ws) if p.severity == "error"] == [], path.name


def test_a_crlf_copy_gives_the_same_drafts_on_the_same_lines():
    result, text = real("eligian__019-phase-4-validation__tasks.md")
    crlf = parse(text.replace("\n", "\r\n"), "specs/eligian__019-phase-4-validation__tasks.md")
    assert crlf.drafts == result.drafts and crlf.warnings == result.warnings
    assert by_id(crlf)["T012.5"].line == 63


def test_the_106_kb_file_parses():
    result, _ = real("d2b__001-adr046-d2b3-completion__tasks.md")
    drafts = by_id(result)
    assert drafts["T574"].line == 73 and drafts["T574"].dependencies == ["T007"], "out of id order, in file order"
    assert drafts["T574"].title == "**Author and record the W0/W1 delivered-without-seal waiver** (FR-034)"
    assert drafts["T009"].metadata["phase"] == "Wave W2: Primitive resource composition and Zone routing"
    assert drafts["T009"].metadata["files"] == ["packages/d2b-contracts/src/v3/host.rs"]
    assert drafts["T559"].dependencies == ["T557"], "(count known only after T557)"


# ------------------------------------------------------------------------- file by file


def test_template_imports_its_tasks_but_not_the_comment_the_notes_or_the_placeholders():
    result, text = real("spec-kit__TEMPLATE__tasks-template.md")
    drafts = by_id(result)
    assert list(drafts) == [f"T{n:03}" for n in range(1, 29)]
    assert all(not 29 <= d.line <= 46 for d in result.drafts), "nothing from the HTML comment"
    assert messages(result) == [f"specs/spec-kit__TEMPLATE__tasks-template.md:{n}: TXXX is a placeholder, "
                                "not a task id; this line is not imported" for n in range(154, 160)]
    assert drafts["T014"].dependencies == ["T012", "T013"], "(depends on T012, T013)"
    assert drafts["T003"].metadata["parallel"] is True and drafts["T003"].dependencies == ["T002"]
    assert drafts["T007"].dependencies == ["T005", "T006"], "after the [P] pair"
    t010 = drafts["T010"]
    assert t010.title == "Contract test for [endpoint] in tests/contract/test_[name].py"
    assert t010.metadata == {"source": {"path": "specs/spec-kit__TEMPLATE__tasks-template.md", "line": 87},
                             "phase": "Phase 3: User Story 1 - [Title]", "user_story": "US1", "parallel": True,
                             "files": ["tests/contract/test_[name].py"], "priority": 1}
    assert t010.dependencies == ["T009"], "the first task of a phase waits on the previous phase"


def test_aikit_uppercase_done_marks_and_phases_without_stories():
    result, _ = real("aikit__002-rust-spec-kit-complete__tasks.md")
    drafts = by_id(result)
    assert [i for i, d in drafts.items() if d.status == "pending"] == ["T126", "T133", "T136", "T137"]
    assert drafts["T001"].checked == [True] and drafts["T126"].checked == [False]
    assert drafts["T108"].metadata["phase"] == "Phase 9: File Merging & Deep JSON Merge"
    assert drafts["T108"].metadata["user_story"] == "US1", "the task's own [US1], not the phase's"
    assert drafts["T031"].dependencies == [f"T{n:03}" for n in range(15, 31)], "all of Phase 2's [P] run"


def test_speck_004_letter_suffix_ids():
    result, _ = real("speck__004-public-website__tasks.md")
    drafts = by_id(result)
    assert [i for i in drafts if i.startswith("T023")] == ["T023", "T023a", "T023b", "T023c"]
    for suffixed in ("T023a", "T023b", "T023c"):
        assert drafts[suffixed].metadata["parallel"] and drafts[suffixed].dependencies == ["T023"]
    assert drafts["T023a"].status == "complete" and drafts["T023a"].line == 72
    assert drafts["T024"].dependencies == ["T023a", "T023b", "T023c"]


def test_eligian_decimal_ids_nested_steps_and_validation_lines():
    result, _ = real("eligian__019-phase-4-validation__tasks.md")
    drafts = by_id(result)
    assert drafts["T005.1"].metadata["parallel"] is True and drafts["T005.1"].metadata["user_story"] == "US1"
    assert drafts["T006"].dependencies == ["T003", "T004", "T005", "T005.1", "T005.2"]
    gate = drafts["T012.5"]
    assert gate.dependencies == [f"T{n:03}" for n in range(6, 13)], "the RED gate waits on its tests"
    expected = "All tests should FAIL (RED) because implementation doesn't exist yet"
    assert gate.criteria == [expected], "its `Expected:` line"
    assert "- **STOP**: Do not proceed to implementation (T013+) until all tests FAIL" in gate.requirements
    assert drafts["T013"].dependencies == ["T012.5"]


def test_finance_analyser_inline_dependencies_and_chains_in_fences():
    result, _ = real("finance-analyser__010-email-password-auth__tasks.md")
    drafts = by_id(result)
    assert drafts["T007"].dependencies == ["T006"], "(depends on T006) and T006 → T007 → T008"
    assert drafts["T004"].dependencies == ["T003"] and drafts["T013"].dependencies == ["T012"]
    assert drafts["T012"].dependencies == ["T009", "T010", "T011"]
    assert drafts["T002"].title == "Update `.env.example`"
    assert drafts["T002"].metadata["files"] == [".env.example", "plan.md"]
    assert drafts["T001"].metadata.get("files") is None, "`npm install ...` is a command, not a path"


def test_codex_fork_dependency_section_and_legacy_phase_numbers():
    result, _ = real("codex-fork__001-here-is-a__tasks.md")
    drafts = by_id(result)
    assert len(drafts) == 32, "the [x] validation checklist is not tasks"
    assert drafts["T001"].metadata["phase"] == "Phase 3.1: Setup"
    assert drafts["T019"].dependencies == ["T014", "T018"], "T014 blocks T019; T018 blocks T019-T022"
    assert drafts["T016"].dependencies[-1] == "T015", "T015 (parsing) blocks T016"
    assert drafts["T010"].dependencies == [f"T{n:03}" for n in range(4, 10)], "Tests (T004-T009) before T010-T018"
    assert drafts["T023"].dependencies == ["T019", "T020", "T021", "T022"]
    assert drafts["T004"].dependencies == ["T003"], "no statement: file order"


def test_metal_squad_006_ordered_list_without_ids():
    result, _ = real("metal-squad__006-web-mode__tasks.md")
    drafts = by_id(result)
    assert list(drafts) == [f"T{n}" for n in range(1, 39)]
    assert messages(result) == ["specs/metal-squad__006-web-mode__tasks.md:5: no task ids (such as T001) in this "
                                "file: its 38 checkbox items are imported as T1..T38 in the order they appear"]
    assert drafts["T1"].metadata["phase"] == "Fase 1 — Setup e configuracao"
    assert drafts["T2"].dependencies == ["T1"] and drafts["T6"].dependencies == ["T5"]
    assert drafts["T26"].title == "Criar componentes em `src/web/static/components/`"
    assert "- `HelpOverlay.js`" in drafts["T26"].requirements, "nested bullets stay with their task"
    assert drafts["T27"].line == 60


def test_metal_squad_002_dense_inline_dependencies():
    drafts = by_id(real("metal-squad__002-session-run-navigation__tasks.md")[0])
    assert drafts["T012"].dependencies == ["T005", "T009", "T010"]
    assert drafts["T006"].dependencies == ["T003"], "T005 and T006 (hooks) can run in parallel once T003 is done"


def test_tau_1613_bare_paragraph_tasks_done_by_the_files_status_line():
    result, _ = real("tau__1613__tasks.md")
    drafts = by_id(result)
    assert list(drafts) == ["T1", "T2", "T3", "T4", "T5"] and messages(result) == []
    assert all(d.status == "complete" and d.checked == [True] for d in drafts.values()), "Status: Implemented"
    assert drafts["T1"].metadata["labels"] == ["tests-first"]
    assert drafts["T1"].title == "add split harness and capture RED result before refactor"
    assert drafts["T5"].title.endswith("fmt, split harness, roadmap sync check)"), "its wrapped line"
    assert drafts["T2"].metadata["files"] == ["tools/memory_tools.rs"]


def test_tau_3757_wrapped_lines_and_phase_tags():
    drafts = by_id(real("tau__3757__tasks.md")[0])
    assert drafts["T7"].title.startswith("render a dedicated `view=history` audit summary")
    assert drafts["T7"].requirements.endswith("latest action, and\naudit-log anchor."), "its lines as written"
    assert [drafts[f"T{n}"].metadata["labels"] for n in (1, 2, 5)] == [["SPEC"], ["RED"], ["VERIFY"]]
    assert "phase" not in drafts["T1"].metadata
    result = real("tau__3757__tasks.md")[0]
    assert messages(result)[0] == ("specs/tau__3757__tasks.md:85: T13 looks like a task but is not a checkbox "
                                   "item as this file's tasks are; not imported"), "`- T13: ...` in its evidence"


def test_omnisrouter_forward_dependency_keeps_the_queue_acyclic():
    result, _ = real("omnisrouter__001-omnisrouter__tasks.md")
    drafts = by_id(result)
    assert drafts["T063"].dependencies == ["T066", "T025"], "(depends on T066 shipped model + T025 loader)"
    assert drafts["T066"].dependencies == ["T065"] and drafts["T065"].dependencies == ["T064"]
    assert drafts["T067"].dependencies == ["T063"], "T063 is open again once T066, which it waits on, is behind it"
    assert drafts["T020"].dependencies == ["T005", "T001", "T010"]
    assert drafts["T029"].dependencies == ["T011", "T012"], "inline plus an arrow chain"
    assert messages(result) == []


def test_audio_trimmer_paths_with_spaces_and_statements_in_a_parallel_section():
    drafts = by_id(real("audio-trimmer__001-track-settings__tasks.md")[0])
    assert drafts["T001"].metadata["files"] == ["Audio Trimmer/App/Sources/App/Features/TrackSettings/"]
    assert drafts["T012"].dependencies == ["T003", "T004", "T005"], "(after T003–T005)"
    assert drafts["T024"].metadata["phase"] == "Final Phase: Polish & Cross-Cutting"


# ------------------------------------------------------------------------- rules, on small texts


def test_a_repeated_id_with_other_text_and_unknown_dependencies_are_located_and_the_rest_imported():
    text = ("# Tasks\n\n## Phase 1: Setup\n\n"
            "- [ ] T001 Create the project\n"
            "- [x] T002 Add linting (depends on T001, T099)\n"
            "- [ ] T001 Create the project again\n"
            "- [ ] T003 Write docs\n")
    result = parse(text, "tasks.md")
    assert [d.task_id for d in result.drafts] == ["T001", "T002", "T003"], "a repeated id is no second task"
    assert messages(result) == [
        "tasks.md:6: T002 depends on T099, which is not a task in this file; dependency dropped",
        "tasks.md:7: T001 is listed again with other text (first on line 5); not imported: T001 is line 5's task",
    ]
    drafts = by_id(result)
    assert drafts["T002"].dependencies == ["T001"] and drafts["T002"].status == "complete"
    assert drafts["T003"].dependencies == ["T002"] and drafts["T003"].line == 8


def test_commented_sample_tasks_code_fences_and_front_matter_are_not_tasks():
    text = ("---\ndescription: \"- [ ] T900 not a task\"\n---\n# Tasks\n"
            "<!--\n- [ ] T001 Sample task\n- [ ] T002 Sample task\n-->\n"
            "```\n- [ ] T003 In a fence\n```\n"
            "- [ ] T004 Real <!-- a note --> task\n"
            "- [P] tasks = different files, no dependencies\n")
    result = parse(text, "tasks.md")
    assert [(d.task_id, d.line, d.title) for d in result.drafts] == [("T004", 12, "Real task")]
    assert messages(result) == []


def test_dependency_section_arrow_chains_ranges_and_blocks():
    text = ("## Phase 1\n\n" + "".join(f"- [ ] T00{n} Task {n}\n" for n in range(1, 8)) +
            "\n## Dependencies\n\n"
            "- T001 → T002 → (T003, T004)\n"
            "- T003-T004 before T005\n"
            "- T005 blocks T006; T007 depends on T002\n")
    drafts = by_id(parse(text, "tasks.md"))
    assert drafts["T002"].dependencies == ["T001"]
    assert drafts["T003"].dependencies == ["T002"] and drafts["T004"].dependencies == ["T002"]
    assert drafts["T005"].dependencies == ["T003", "T004"]
    assert drafts["T006"].dependencies == ["T005"] and drafts["T007"].dependencies == ["T002"]


def test_a_dependencies_line_under_a_checkbox_task():
    text = ("- [ ] T-001 Set up\n"
            "- [ ] T-002 [P] Lint\n"
            "- [X] T-003 Build the app\n"
            "  - **Dependencies**: T-001\n"
            "  - Files: `app/main.py`\n")
    drafts = by_id(parse(text, "tasks.md"))
    assert drafts["T-002"].dependencies == ["T-001"] and drafts["T-003"].dependencies == ["T-001"]
    assert drafts["T-003"].status == "complete" and drafts["T-003"].metadata["files"] == ["app/main.py"]


def test_a_dependency_cycle_is_broken_with_a_warning():
    text = ("- [ ] T001 First (depends on T002)\n"
            "- [ ] T002 Second (depends on T001)\n"
            "- [ ] T003 Third\n")
    result = parse(text, "tasks.md")
    assert cycle(result.drafts) is None
    drafts = by_id(result)
    assert drafts["T001"].dependencies == ["T002"] and drafts["T002"].dependencies == []
    assert messages(result) == ["tasks.md:2: T002 depends on T001, but T001 already waits on T002: "
                                "dependency dropped to avoid a cycle"]
    assert drafts["T003"].dependencies == ["T001"], "T002 is behind T001 already"


def test_task_headings_with_fields_and_steps():
    text = ("# Plan\n\n## Phase 1: Core\n\n"
            "### T-001 Build the parser ✅\n\nReads the file.\n\n"
            "### T-002: Wire the CLI\n\n**Dependencies**: T-001\n**Status**: Done\n\n"
            "- [x] command exists\n- [ ] help text\n\n"
            "### T-003 Document it\n\nValidation: the README shows `specflux import`\n")
    drafts = by_id(parse(text, "tasks.md"))
    assert list(drafts) == ["T-001", "T-002", "T-003"]
    one, two, three = drafts.values()
    assert one.title == "Build the parser" and one.status == "complete"
    assert one.requirements == "Build the parser\n\nReads the file."
    assert two.dependencies == ["T-001"] and two.status == "complete"
    assert two.criteria == ["command exists", "help text"] and two.checked == [True, False]
    assert three.criteria == ["the README shows `specflux import`"] and three.status == "pending"
    assert three.dependencies == ["T-002"] and one.metadata["phase"] == "Phase 1: Core"


def test_phase_level_dependencies_field_joins_the_phase_entry():
    text = ("## Phase 1\n\n- [ ] T001 A\n- [ ] T002 B\n\n"
            "## Phase 2\n\n**Dependencies**: T001\n\n- [ ] T003 C\n- [ ] T004 D\n")
    drafts = by_id(parse(text, "tasks.md"))
    assert drafts["T003"].dependencies == ["T002"], "T001 is behind T002 already"
    text = text.replace("- [ ] T001 A\n- [ ] T002 B", "- [ ] T001 [P] A\n- [ ] T002 [P] B")
    drafts = by_id(parse(text, "tasks.md"))
    assert drafts["T003"].dependencies == ["T001", "T002"]


def test_lazy_continuation_nested_checkboxes_and_odd_boxes():
    text = ("- [ ] T001 [P] [US2] [P2] Start a long task that\n"
            "wraps without indentation in `src/app.py`\n"
            "  - [x] first step\n"
            "  - [ ] second step\n"
            "- [~] T002 Half done\n"
            "- [ ] looks like a task\n")
    result = parse(text, "tasks.md")
    one, two = result.drafts
    assert one.title == "Start a long task that wraps without indentation in `src/app.py`"
    assert one.criteria == ["first step", "second step"] and one.checked == [True, False]
    assert one.metadata == {"source": {"path": "tasks.md", "line": 1}, "user_story": "US2", "parallel": True,
                            "files": ["src/app.py"], "priority": 2}
    assert two.status == "pending" and two.line == 5
    assert messages(result) == ["tasks.md:5: T002: unknown checkbox [~]; imported as not done",
                                "tasks.md:6: this checkbox looks like a task but has no task id (such as T001); "
                                "not imported"]


def test_long_text_gives_a_short_title_and_the_whole_text_elsewhere():
    long = "Implement the thing " + "with many details " * 12
    draft = parse(f"- [ ] T001 {long}\n", "tasks.md").drafts[0]
    assert len(draft.title) <= TITLE_MAX and draft.title.endswith("…")
    assert draft.criteria == [" ".join(long.split())] and draft.requirements == long.strip()


def test_a_comment_opener_in_a_task_cannot_hide_the_rest_of_its_task_file(tmp_path):
    from specflux.importers.apply import apply
    from specflux.store.lint import lint_workspace
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    text = "- [ ] T001 Remove the stray <!-- marker\n- [ ] T002 Escape `<!--` in titles\n"
    result = parse(text, "tasks.md")
    assert [d.task_id for d in result.drafts] == ["T001", "T002"], "an unclosed `<!--` mid-line is text"
    assert all("<!--" not in d.title + d.criteria[0] for d in result.drafts)
    ws, _ = Workspace.init(tmp_path / "ws")
    apply(TaskStateManager(ws, git=False), result)
    assert [p for p in lint_workspace(ws) if p.severity == "error"] == []
