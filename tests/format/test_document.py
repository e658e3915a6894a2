"""TaskDocument: the seed's examples read as the seed means them, tolerant reading of hand-edited
files, and edits that change only the characters they must."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specflux.format.document import TaskDocument
from specflux.format.edits import apply_edits
from specflux.format.list_quick import quick_list_fields
from specflux.base.errors import ParseError
from specflux.format.model import SessionInput
from specflux.format.outline import split_lines
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace

FIXTURES = Path(__file__).parent.parent / "fixtures"
STAMP = "2024-11-27 09:00"


def seed(letter: str, newline: str = "\n") -> str:
    text = (FIXTURES / f"seed-example-{letter}.md").read_bytes().decode("utf-8")
    return text.replace("\n", newline)


def state(text: str):
    return TaskDocument(text, "task.md").to_state()


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def line_of(text: str, needle: str) -> int:
    """1-based line number of the line holding `needle`."""
    return len(split_lines(text[: text.index(needle) + 1]))


def changed_lines(before: str, after: str) -> list[int]:
    a, b = split_lines(before), split_lines(after)
    assert len(a) == len(b), "an edit that should change one line changed the number of lines"
    return [i for i, (x, y) in enumerate(zip(a, b)) if x != y]


def assert_no_bare_lf(text: str) -> None:
    assert "\n" not in text.replace("\r\n", ""), "a bare LF in a CRLF file"


@pytest.fixture
def manager(tmp_path):
    ws, _ = Workspace.init(tmp_path)
    return TaskStateManager(ws, git=False)


def put(manager: TaskStateManager, task_id: str, text: str) -> Path:
    path = manager.ws.task_path(task_id)
    path.write_bytes(text.encode("utf-8"))
    return path


# --------------------------------------------------------------------- the seed's examples


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_example_a_simple_task(newline):
    s = state(seed("a", newline))
    assert (s.id, s.title, s.status) == ("201", "Add dark mode toggle", "in_progress")
    assert s.metadata == {"task_id": 201, "epic_id": 15, "status": "in_progress", "total_sessions": 0}
    assert type(s.metadata["task_id"]) is int
    assert (s.epic, s.repository) == ("UI Polish (#15)", "frontend")
    assert s.requirements == (
        "Add a dark mode toggle to the settings page. Use existing theme context.\n"
        "Follow the ui-patterns skill for styling."
    )
    assert [(c.index, c.text, c.checked, c.depth) for c in s.criteria] == [
        (1, "Toggle switch in Settings > General", False, 0),
        (2, "Persists preference to localStorage", False, 0),
        (3, "Applies theme immediately without reload", False, 0),
    ]
    assert [c.line for c in s.criteria] == [23, 24, 25]
    assert s.dependencies == [] and s.chain_inputs == [] and s.sessions == []
    assert s.archived_summary is None
    assert s.chain_output is None  # "(To be completed)" is a placeholder


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_example_b_task_with_dependencies(newline):
    s = state(seed("b", newline))
    assert (s.id, s.title, s.status) == ("102", "Auth API endpoints", "in_progress")
    assert s.metadata["dependencies"] == [100, 101]
    assert s.dependencies == ["100", "101"]
    assert (s.epic, s.repository) == ("User Authentication (#10)", "backend")
    assert [c.checked for c in s.criteria] == [True, False, False, False, False]
    assert s.criteria[0].text == "POST /auth/login returns JWT on valid credentials"
    assert s.criteria[4].text == "Integration tests pass"

    assert [(c.task_id, c.title) for c in s.chain_inputs] == [("100", "Database Schema"), ("101", "JWT Service")]
    assert s.chain_inputs[0].body == "Users table: id (UUID), email (unique), password_hash, created_at"
    assert s.chain_inputs[1].body == (
        "JWTService API:\n"
        "- `generateToken(userId: string): string`\n"
        "- `verifyToken(token: string): TokenPayload | null`\n"
        "- `refreshToken(oldToken: string): string`\n"
        "\n"
        "Config: JWT_SECRET, JWT_EXPIRY=15m"
    )

    assert [(x.number, x.timestamp) for x in s.sessions] == [(1, "2024-11-26 14:00"), (2, "2024-11-26 15:30")]
    assert s.sessions[0].did == [
        "Created auth.routes.ts with login endpoint",
        "Integrated JWTService from Task #101",
        "Login works with valid credentials",
    ]
    assert (s.sessions[0].issues, s.sessions[0].next) == ("None", "Implement logout and refresh endpoints")
    assert s.sessions[1].did == ["Added logout endpoint with token blacklist", "Started refresh endpoint"]
    assert s.sessions[1].issues == "Need to handle concurrent refresh requests"
    assert s.sessions[1].next == "Fix race condition, add validation, write tests"
    assert s.chain_output is None


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_example_c_completed_task(newline):
    s = state(seed("c", newline))
    assert (s.id, s.title, s.status) == ("101", "JWT Service", "complete")
    assert s.metadata["task_id"] == 101 and type(s.metadata["task_id"]) is int
    assert all(c.checked for c in s.criteria) and len(s.criteria) == 4
    assert s.chain_inputs == [] and s.dependencies == []

    assert [x.number for x in s.sessions] == [1, 2, 3, 4, 5]
    assert [x.timestamp for x in s.sessions] == [f"2024-11-26 {h}:00" for h in (10, 11, 12, 13, 14)]
    assert s.sessions[0].did == ["Set up project structure, added jsonwebtoken dependency"]
    assert (s.sessions[0].issues, s.sessions[0].next) == ("TypeScript types not found", "Fix types, implement generateToken")
    assert s.sessions[4].did == ["Wrote unit tests, achieved 94% coverage"]
    assert s.sessions[4].next == "Task complete"

    out = s.chain_output
    assert out is not None
    assert out.summary == "JWT authentication service with token generation, verification, and secure refresh."
    assert "### API Contract" in out.body and "class JWTService {" in out.body
    assert out.body.startswith("### Summary\n") and out.body.endswith("Token format: Bearer in Authorization header")
    assert "\r" not in out.body


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_example_d_minimal_bug_fix(newline):
    s = state(seed("d", newline))
    assert (s.id, s.title, s.status) == ("305", "Fix login button disabled state", "in_progress")
    assert s.metadata["epic_id"] is None and "epic_id" in s.metadata
    assert (s.epic, s.repository) == (None, "frontend")
    assert [c.text for c in s.criteria] == ["Button enables when email and password are valid", "Button disables during submission"]
    assert s.requirements.endswith("File: `src/components/LoginForm.tsx` line ~45")
    assert s.sessions == []
    assert s.chain_output is None  # "(Small fix - minimal output needed)" is a placeholder too


@pytest.mark.parametrize("letter", "abcd")
@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_line_endings_do_not_change_what_is_read(letter, newline):
    lf = state(seed(letter)).model_dump()
    other = state(seed(letter, newline)).model_dump()
    assert other == lf


@pytest.mark.parametrize("letter", "abcd")
def test_missing_final_newline_changes_nothing_that_is_read(letter):
    text = seed(letter)
    assert state(text.rstrip("\n")).model_dump() == state(text).model_dump()


def test_task_id_keeps_its_json_type():
    text = replace_once(seed("a"), '"task_id": 201', '"task_id": "T-201"')
    s = state(text)
    assert s.metadata["task_id"] == "T-201" and s.id == "T-201"
    assert state(seed("a")).metadata["task_id"] == 201


# --------------------------------------------------------------------- tolerant reading


def test_progress_log_heading_without_number_or_in_upper_case():
    for heading in ("## Progress Log", "## 3. PROGRESS LOG", "## 3) progress log:", "##  Progress   log  ##"):
        s = state(replace_once(seed("b"), "## 3. Progress Log", heading))
        assert [x.number for x in s.sessions] == [1, 2], heading


def test_every_section_heading_is_found_without_numbers():
    text = seed("c")
    for n in range(5):
        text = text.replace(f"## {n}. ", "## ")
    assert "## 3. Progress Log" not in text
    assert state(text).model_dump() == state(seed("c")).model_dump()


def test_checkbox_variants_are_criteria():
    body = "\n".join(
        [
            "- [X] upper case",
            "* [ ] star bullet",
            "+ [x] plus bullet",
            "1. [ ] ordered",
            "2) [X] ordered with parenthesis",
            "- [ ]\ttab after the box",
        ]
    )
    s = state(seed("a").replace("- [ ] Toggle switch in Settings > General\n", body + "\n"))
    assert [(c.text, c.checked) for c in s.criteria] == [
        ("upper case", True),
        ("star bullet", False),
        ("plus bullet", True),
        ("ordered", False),
        ("ordered with parenthesis", True),
        ("tab after the box", False),
        ("Persists preference to localStorage", False),
        ("Applies theme immediately without reload", False),
    ]


def test_things_that_look_like_boxes_are_not_criteria():
    body = "- [-] dash state\n- [P] spec-kit marker\n- []\n-[ ] no space\n    plain text [ ]\n- [ ] real one\n"
    s = state(seed("a").replace("- [ ] Toggle switch in Settings > General\n", body))
    assert [c.text for c in s.criteria] == ["real one", "Persists preference to localStorage", "Applies theme immediately without reload"]


def test_nested_sub_items_have_depth():
    body = "- [ ] parent\n  - [x] child\n    - [ ] grandchild\n  - [ ] second child\n- [ ] next parent\n\t- [X] tab child\n"
    s = state(seed("d").replace("- [ ] Button enables when email and password are valid\n", body))
    assert [(c.index, c.text, c.checked, c.depth) for c in s.criteria] == [
        (1, "parent", False, 0),
        (2, "child", True, 1),
        (3, "grandchild", False, 2),
        (4, "second child", False, 1),
        (5, "next parent", False, 0),
        (6, "tab child", True, 1),
        (7, "Button disables during submission", False, 0),
    ]


@pytest.mark.parametrize("fence", ["```", "~~~", "````markdown", "~~~~~"])
def test_headings_inside_fences_are_text(fence):
    closer = fence.rstrip("markdown")
    fake = (
        f"{fence}\n## 3. Progress Log\n\n### Session 9 - 2020-01-01 00:00\n**Did:** fake\n\n"
        f"### Acceptance Criteria\n- [ ] fake criterion\n{closer}\n\n"
    )
    text = replace_once(seed("b"), "### Requirements\n", "### Requirements\n" + fake)
    s = state(text)
    assert [x.number for x in s.sessions] == [1, 2]
    assert len(s.criteria) == 5 and "fake criterion" not in [c.text for c in s.criteria]
    assert "## 3. Progress Log" in s.requirements  # the fence is part of the requirements text


def test_fenced_progress_log_before_the_real_one_is_not_the_section():
    fake = "```markdown\n## 3. Progress Log\n\n(No sessions yet)\n```\n\n"
    text = replace_once(seed("b"), "## 2. Chain Inputs\n", fake + "## 2. Chain Inputs\n")
    doc = TaskDocument(text)
    assert doc.sections["progress"].start == text.index("## 3. Progress Log", text.index("```\n\n## 2."))
    assert doc.session_count == 2


def test_checkbox_inside_an_html_comment_is_not_a_criterion():
    body = (
        "<!-- - [ ] one-line comment -->\n"
        "<!--\n- [x] hidden in a block comment\n## 3. Progress Log\n-->\n"
        "- [ ] visible\n"
    )
    text = seed("a").replace("- [ ] Toggle switch in Settings > General\n", body)
    s = state(text)
    assert [c.text for c in s.criteria] == ["visible", "Persists preference to localStorage", "Applies theme immediately without reload"]
    assert TaskDocument(text).sections["progress"].start == text.index("## 3. Progress Log\n\n(No")


def test_unknown_sections_are_kept_and_ignored():
    notes = "## 5. Notes\n\nSee the design doc.\n- [ ] not a criterion\n\n### Session 99 - never\n"
    text = seed("b") + "\n" + notes
    s = state(text)
    assert [x.number for x in s.sessions] == [1, 2]
    assert len(s.criteria) == 5
    assert str(TaskDocument(text)) == text


def test_unicode_line_separators_inside_a_line_are_not_line_breaks():
    for odd in ("\u2028", "\x0c", "\x85", "\u2029"):
        text = replace_once(seed("b"), "Created auth.routes.ts with", f"Created auth.routes.ts{odd}with")
        text = replace_once(text, "- [ ] Integration tests pass", f"- [ ] Integration{odd}tests pass")
        s = state(text)
        assert s.sessions[0].did[0] == f"Created auth.routes.ts{odd}with login endpoint"
        assert len(s.sessions[0].did) == 3
        assert s.criteria[4].text == f"Integration{odd}tests pass"


# --------------------------------------------------------------------- checking criteria


@pytest.mark.parametrize("letter", "abd")
@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_checking_changes_one_box_character(letter, newline):
    text = seed(letter, newline)
    doc = TaskDocument(text)
    for c in doc.criteria():
        if c.checked:
            continue
        after = doc.check(c.index, True)
        [i] = changed_lines(text, after)
        assert i + 1 == c.line
        old_line, new_line = split_lines(text)[i], split_lines(after)[i]
        diff = [k for k, (x, y) in enumerate(zip(old_line, new_line)) if x != y]
        assert len(old_line) == len(new_line) and len(diff) == 1
        assert (old_line[diff[0]], new_line[diff[0]]) == (" ", "x")
        assert old_line[diff[0] - 1 : diff[0] + 2] == "[ ]"
        assert [x.checked for x in TaskDocument(after).criteria()] == [x.checked or x.index == c.index for x in doc.criteria()]
        assert TaskDocument(after).check(c.index, False) == text
        if newline == "\r\n":
            assert_no_bare_lf(after)


def test_checking_a_checked_box_changes_nothing():
    text = seed("a").replace("- [ ] Persists", "- [X] Persists")
    doc = TaskDocument(text)
    assert doc.criteria()[1].checked
    assert doc.check(2, True) == text
    unchecked = doc.check(2, False)
    assert "- [ ] Persists" in unchecked and changed_lines(text, unchecked) == [23]
    assert TaskDocument(unchecked).check(1, False) == unchecked


@pytest.mark.parametrize("index", [0, 4, -1, 99])
def test_criterion_out_of_range_is_a_located_error(index):
    text = seed("a")
    with pytest.raises(ParseError) as info:
        TaskDocument(text, "task-201-state.md").check(index, True)
    assert info.value.line == line_of(text, "### Acceptance Criteria") == 22
    assert info.value.path == "task-201-state.md"
    assert str(info.value).startswith("task-201-state.md:22: ")
    assert "3" in info.value.message  # says how many there are


def test_checks_through_the_manager_write_one_line(manager):
    text = seed("b", "\r\n")
    path = put(manager, "102", text)
    manager.set_checked("102", [3], True)
    after = path.read_bytes().decode("utf-8")
    assert changed_lines(text, after) == [25]
    assert_no_bare_lf(after)
    manager.set_checked("102", [3], False)
    assert path.read_bytes() == text.encode("utf-8")


# generated task files ------------------------------------------------------------------------

ITEM_TEXT = st.builds(
    lambda first, middle, last: first + "".join(middle) + last,
    st.sampled_from(list("aZ9é中`<(")),
    st.lists(st.sampled_from(list("ab xyz#[]<>-*`~") + ["\u2028", "\x0c", "\x85", "[ ]", "<!--"]), max_size=10),
    st.sampled_from(list("bY7)")),
)


@st.composite
def criteria_block(draw):
    """Lines of an Acceptance Criteria list and the criteria a reader should find in them."""
    unit = draw(st.sampled_from(["  ", "   ", "    ", "\t"]))
    lines, expected, depth = [], [], -1
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["item", "item", "item", "fence", "comment", "noise"]))
        if kind == "item":
            depth = draw(st.integers(0, depth + 1))
            bullet = draw(st.sampled_from(["-", "*", "+", "1.", "10)"]))
            box = draw(st.sampled_from([" ", " ", "x", "X"]))
            text = draw(ITEM_TEXT)
            trailing = draw(st.sampled_from(["", " ", "  \t"]))
            lines.append(f"{unit * depth}{bullet} [{box}] {text}{trailing}")
            expected.append((text, box != " ", depth))
        elif kind == "fence":
            marker = draw(st.sampled_from(["```", "~~~", "````", "~~~~~"]))
            lines += [marker + draw(st.sampled_from(["", "markdown"])), f"- [{draw(st.sampled_from(' xX'))}] fenced", "## 3. Progress Log", marker]
        elif kind == "comment":
            lines += draw(st.sampled_from([["<!--", "- [ ] commented", "-->"], ["<!-- - [x] inline -->"], ["  <!-- a", "* [ ] b -->"]]))
        else:
            lines.append(draw(st.sampled_from(["", "- plain bullet", "- [-] dash", "  continued text", "Some prose [ ] here"])))
    return lines, expected


@st.composite
def task_file(draw):
    lines, expected = draw(criteria_block())
    heading = draw(st.sampled_from(["### Acceptance Criteria", "### ACCEPTANCE CRITERIA", "### Acceptance criteria:"]))
    doc = [
        "# Task #7: Generated",
        "",
        "## 0. Metadata",
        "```json",
        '{"task_id": 7, "status": "pending", "total_sessions": 0}',
        "```",
        "",
        "## 1. Context",
        "",
        heading,
        *lines,
        "",
        "## 3. Progress Log",
        "",
        "- [ ] a box in the progress log is not a criterion",
        "",
        "## 4. Chain Output",
        "",
        "(To be completed)",
    ]
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = newline.join(doc) + draw(st.sampled_from([newline, ""]))
    return text, expected


@settings(max_examples=200, deadline=None)
@given(task_file())
def test_generated_criteria_read_check_and_uncheck(case):
    text, expected = case
    doc = TaskDocument(text)
    found = doc.criteria()
    assert [(c.text, c.checked, c.depth) for c in found] == expected
    for c in found:
        if c.checked:
            assert doc.check(c.index, True) == text
            continue
        checked = doc.check(c.index, True)
        diff = [k for k, (x, y) in enumerate(zip(text, checked)) if x != y]
        assert len(checked) == len(text) and len(diff) == 1 and checked[diff[0]] == "x"
        assert TaskDocument(checked).check(c.index, False) == text


def list_view(doc: TaskDocument) -> tuple:
    """What `list` shows of a file, read through the properties `show` and `lint` read."""
    items = doc.criteria_lines
    return doc.status, doc.dependencies, sum(1 for item in items if item[2]), len(items), doc.session_count


def assert_list_fields_are_the_properties(text: str) -> None:
    """...and that `list`'s one-pass reading of plain files (format/list_quick.py) reads the same,
    or leaves the file to TaskDocument (always, where TaskDocument finds an error)."""
    quick = quick_list_fields(text)
    try:
        expected = list_view(TaskDocument(text, "x.md"))
    except ParseError as e:
        with pytest.raises(ParseError) as raised:
            TaskDocument(text, "x.md").list_fields()
        assert str(raised.value) == str(e)
        assert quick is None
        return
    assert TaskDocument(text, "x.md").list_fields() == expected
    try:
        title = TaskDocument(text, "x.md").title[1]
    except ParseError:
        assert quick is None
        return
    assert quick is None or quick == (title, *expected)


EXTRA_LINES = st.sampled_from([
    "### Session 4 - 2024-11-27 09:00", "### Archived Summary (Sessions 1-3)", "### Archived Summary (Sessions 5-3)",
    "### Notes", "## 3. Progress Log", "## Acceptance Criteria", "#### Acceptance Criteria", "- [x] extra", "```", "~~~",
    "<!--", "-->", "## 1. Context", '{"task_id": 7, "status": "done"}',
])


@settings(max_examples=300, deadline=None)
@given(task_file(), st.lists(st.tuples(st.integers(0, 40), EXTRA_LINES), max_size=4))
def test_list_fields_are_what_the_properties_read(case, extra):
    lines = case[0].split("\n")
    for at, line in extra:
        lines.insert(min(at, len(lines)), line)
    assert_list_fields_are_the_properties("\n".join(lines))


PLAIN_LINES = st.sampled_from([
    "### Session 4 - 2024-11-27 09:00", "### session #5", "### Session 6: later", "### Sessions", "### Notes",
    "### Archived Summary (Sessions 1-3)", "### Archived Summary (Sessions 5-3)", "### Archived summary (session 2 - 9)",
    "## 3. Progress Log", "## Progress", "## Acceptance Criteria", "### Acceptance Criteria", "#### Acceptance Criteria",
    "## 1. Context", "## 2. Chain Inputs", "## 0. Metadata", "# Task #8: a second title", "# Another title ##",
    "### Criteria ###", "###", "####### seven", "#hashtag", "- [x] extra", "- [ ] extra", "  - [X] nested",
    "1. [x] numbered", "text with ``` inside", "`inline`", "", "    ### indented four: code, not a heading",
    '{"task_id": 7, "status": "done"}', "## 4. Chain Output", "### From Task #3: upstream",
])


@settings(max_examples=400, deadline=None)
@given(task_file(), st.lists(st.tuples(st.integers(7, 40), PLAIN_LINES), max_size=6))  # (after the metadata)
def test_list_reads_plain_files_in_one_pass_as_taskdocument_does(case, extra):
    """Plain files (LF, one fence, no comment): the one-pass reading answers for most of them, and
    answers what TaskDocument reads."""
    lines = case[0].replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for at, line in extra:
        lines.insert(min(at, len(lines)), line)
    text = "\n".join(lines)
    assert_list_fields_are_the_properties(text)
    plain = len(re.findall(r"(?:^|\n)(?: {1,3}[#`~<]|[`~<])", text)) == 2 and "````" not in text
    moves_sections = any(line.startswith(("# ", "## ")) or "Acceptance Criteria" in line for _, line in extra)
    if plain and not moves_sections:
        assert quick_list_fields(text) is not None


@pytest.mark.parametrize("letter", "abcd")
@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_list_fields_of_the_seeds(letter, newline):
    assert_list_fields_are_the_properties(seed(letter, newline))


@pytest.mark.parametrize("block", [
    "### Archived Summary (Sessions 1-3)\n\n### Archived Summary (Sessions 4-9)",
    "### Archived Summary (Sessions 5-3)",
    "```\n### Session 9 - 2024-11-27 09:00\n```",
    "<!--\n### Session 9 - 2024-11-27 09:00\n-->",
    "## 3. Progress Log\n\n### Session 9 - 2024-11-27 09:00",
    "## Acceptance Criteria\n- [x] elsewhere",
])
def test_list_fields_of_odd_progress_logs(block):
    text = seed("b")
    at = text.index("## 4. Chain Output") if "## 4. Chain Output" in text else len(text)
    assert_list_fields_are_the_properties(text[:at] + block + "\n\n" + text[at:])
    assert_list_fields_are_the_properties(text.replace("### Acceptance Criteria", "### Criteria") + "\n" + block + "\n")


def test_list_fields_of_the_corpus(corpus_files):
    for path in corpus_files:
        assert_list_fields_are_the_properties(path.read_bytes().decode("utf-8"))


# --------------------------------------------------------------------- appending sessions


def entry(*did: str) -> SessionInput:
    return SessionInput(did=list(did) or ["did one"], issues="", next="", timestamp=STAMP)


@pytest.mark.parametrize("letter", "ad")
@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_first_session_replaces_only_the_placeholder_line(manager, letter, newline):
    text = seed(letter, newline)
    task_id = {"a": "201", "d": "305"}[letter]
    path = put(manager, task_id, text)
    manager.append_session(task_id, entry("did one", "did two"), commit=False)
    after = path.read_bytes().decode("utf-8")

    expected_rest = replace_once(text, '"total_sessions": 0', '"total_sessions": 1')
    placeholder = "(No sessions yet)"
    i = expected_rest.index(placeholder)
    head, tail = expected_rest[:i], expected_rest[i + len(placeholder) :]
    assert after.startswith(head) and after.endswith(tail)
    block = after[len(head) : len(after) - len(tail)]
    assert block.startswith(f"### Session 1 - {STAMP}")
    assert placeholder not in after
    assert "- did one" in block and "- did two" in block
    if newline == "\r\n":
        assert_no_bare_lf(after)
    s = state(after)
    assert [(x.number, x.did) for x in s.sessions] == [(1, ["did one", "did two"])]
    assert s.metadata["total_sessions"] == 1


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_later_session_keeps_every_earlier_byte(manager, newline):
    text = seed("b", newline)
    path = put(manager, "102", text)
    manager.append_session("102", entry("third"), commit=False)
    after = path.read_bytes().decode("utf-8")

    expected_rest = replace_once(text, '"total_sessions": 2', '"total_sessions": 3')
    last = "**Next:** Fix race condition, add validation, write tests" + newline
    k = expected_rest.index(last) + len(last)
    head, tail = expected_rest[:k], expected_rest[k:]
    assert after.startswith(head) and after.endswith(tail)
    block = after[len(head) : len(after) - len(tail)]
    assert block.startswith(newline + f"### Session 3 - {STAMP}" + newline)
    assert tail.startswith(newline + "## 4. Chain Output")
    assert block.endswith(newline) and not block.endswith(newline * 2)  # one blank line before ## 4
    if newline == "\r\n":
        assert_no_bare_lf(after)
    assert [x.number for x in state(after).sessions] == [1, 2, 3]


def test_session_on_a_file_without_final_newline(manager):
    text = seed("b").rstrip("\n").replace("## 4. Chain Output\n\n(To be completed)", "").rstrip("\n")
    path = put(manager, "102", text)
    manager.append_session("102", entry("third"), commit=False)
    after = path.read_bytes().decode("utf-8")
    assert after.startswith(replace_once(text, '"total_sessions": 2', '"total_sessions": 3'))
    assert [x.number for x in state(after).sessions] == [1, 2, 3]
    assert "write tests\n\n### Session 3" in after


def test_pending_task_moves_to_in_progress_with_its_first_session(manager):
    manager.create("title", task_id="101", criteria=["a", "b"])
    path = manager.ws.task_path("101")
    before = path.read_text()
    manager.append_session("101", entry("x"), commit=False)
    after = path.read_text()
    assert '"status": "pending"' in before and '"status": "in_progress"' in after
    assert state(after).metadata["total_sessions"] == 1


# --------------------------------------------------------------------- metadata edits

ODD_METADATA = """# Task #T-9: Odd metadata

## 0. Metadata
```json
{
    "task_id":  "T-9",
  "custom": {"a": [1, 2], "status": "x"},
  "status" :"pending",   "total_sessions": 0,
  "zeta": true
}
```

## 1. Context
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_metadata_edits_change_only_value_characters(newline):
    text = ODD_METADATA.replace("\n", newline)
    after = TaskDocument(text).set_metadata({"status": "review", "total_sessions": 12})
    assert after == text.replace('"status" :"pending"', '"status" :"review"').replace('"total_sessions": 0', '"total_sessions": 12')
    doc = TaskDocument(after)
    assert list(doc.metadata) == ["task_id", "custom", "status", "total_sessions", "zeta"]
    assert doc.metadata["custom"] == {"a": [1, 2], "status": "x"}
    assert TaskDocument(text).set_metadata({"status": "pending", "total_sessions": 0}) == text


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_new_metadata_key_goes_last_on_its_own_line(newline):
    text = seed("a", newline)
    after = TaskDocument(text).set_metadata({"dependencies": [1, "T2"]})
    expected = replace_once(text, f'"total_sessions": 0{newline}', f'"total_sessions": 0,{newline}  "dependencies": [1, "T2"]{newline}')
    assert after == expected
    assert list(json.loads(after[after.index("{") : after.index("}") + 1])) == ["task_id", "epic_id", "status", "total_sessions", "dependencies"]


# --------------------------------------------------------------------- creating a missing section


def without_progress(text: str) -> str:
    return replace_once(text, "## 3. Progress Log\n\n(No sessions yet)\n\n", "")


@pytest.mark.parametrize(
    "text, heading, before",
    [
        (without_progress(seed("a")), "## 3. Progress Log", "## 4. Chain Output"),  # between 1 and 4
        (
            seed("b").replace(seed("b")[seed("b").index("## 3.") : seed("b").index("## 4.")], ""),
            "## 3. Progress Log",
            "## 4. Chain Output",
        ),  # between 2 and 4
        (without_progress(seed("a")).replace("## 0. ", "## ").replace("## 1. ", "## ").replace("## 4. ", "## "), "## Progress Log", "## Chain Output"),
    ],
    ids=["after-context", "after-chain-inputs", "unnumbered"],
)
def test_missing_progress_log_is_created_in_its_place(manager, text, heading, before):
    assert "Progress Log" not in text
    path = put(manager, "9", text)
    manager.append_session("9", entry("x"), commit=False)
    after = path.read_bytes().decode("utf-8")
    rest = text.replace('"total_sessions": 2', '"total_sessions": 1').replace('"total_sessions": 0', '"total_sessions": 1')
    at = rest.index(before)
    assert after.startswith(rest[:at]) and after.endswith(rest[at:])
    inserted = after[at : len(after) - (len(rest) - at)]
    assert inserted.startswith(heading + "\n\n### Session 1 - ")
    assert inserted.endswith("\n\n")
    assert [x.number for x in state(after).sessions] == [1]


def test_missing_progress_log_goes_last_when_nothing_follows_it():
    text = without_progress(seed("a")).replace("## 4. Chain Output\n\n(To be completed)\n", "").rstrip("\n")
    doc = TaskDocument(text)
    after = apply_edits(text, [doc.append_to_section("progress", "### Session 1 - x\n**Did:** y")])
    assert after.startswith(text + "\n")
    assert after.endswith("## 3. Progress Log\n\n### Session 1 - x\n**Did:** y\n")
    assert [x.number for x in TaskDocument(after).sessions()] == [1]


# generated metadata blocks ---------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(st.sampled_from(list('ab "\\/{}[],:é') + ["\n", "\u2028", "\t"]), max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "status"]), inner, max_size=3),
    max_leaves=6,
)
KEYS = st.text(st.sampled_from(list('abcdeé "\\:{},')), min_size=1, max_size=6).filter(
    lambda k: k not in ("task_id", "status", "total_sessions", "dependencies")
)


@st.composite
def metadata_file(draw):
    extra = draw(st.dictionaries(KEYS, JSON_VALUES, max_size=4))
    items = list(extra.items())
    items.insert(draw(st.integers(0, len(items))), ("status", draw(st.sampled_from(["pending", "review"]))))
    items.insert(draw(st.integers(0, len(items))), ("task_id", draw(st.sampled_from([7, "T-7"]))))
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), ("total_sessions", draw(st.integers(0, 9))))
    data = dict(items)
    body = json.dumps(
        data,
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.sampled_from([None, 0, 2, 4, "\t"])),
        separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])),
    )
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = f"# Task #7: Meta\n\n## 0. Metadata\n```json\n{body}\n```\n\n## 1. Context\n".replace("\n", newline)
    updates = {"status": draw(st.sampled_from(["in_progress", "pending"])), "total_sessions": draw(st.integers(0, 300))}
    if draw(st.booleans()):
        updates["added_key"] = draw(JSON_VALUES)
    return text, data, updates


@settings(max_examples=200, deadline=None)
@given(metadata_file())
def test_generated_metadata_edits_touch_only_values(case):
    text, data, updates = case
    doc = TaskDocument(text)
    assert doc.metadata == data
    members = doc.members
    assert [m.key for m in members] == list(data)
    for m in members:  # the offsets the edits rely on hold exactly the values
        assert json.loads(text[m.value_start : m.value_end]) == data[m.key]

    after = doc.set_metadata(updates)
    new = TaskDocument(after)
    assert list(new.metadata) == list(data) + [k for k in updates if k not in data]
    assert new.metadata == {**data, **updates}
    fence, new_fence = doc.metadata_fence, new.metadata_fence
    assert after[: new_fence.body] == text[: fence.body]
    assert after[new_fence.close :] == text[fence.close :]

    if all(k in data for k in updates):
        expected, pos = [], 0
        for m in members:
            if m.key in updates and (data[m.key] != updates[m.key] or type(data[m.key]) is not type(updates[m.key])):
                expected += [text[pos : m.value_start], json.dumps(updates[m.key], ensure_ascii=False)]
                pos = m.value_end
        assert after == "".join(expected) + text[pos:]
    assert TaskDocument(after).set_metadata(updates) == after
