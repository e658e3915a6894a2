"""The task-state merge driver: `merge_task` on crafted cases, part by part, then `git merge` of
real divergent branches with the driver registered by `specflux init`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GIT_ENV, git
from helpers import ok
from specflux.cli.main import main
from specflux.format.document import TaskDocument
from specflux.format.line_merge import conflict_lines, merge_lines
from specflux.format.merge import merge_task
from specflux.vcs.merge_driver import ATTRIBUTE, register_driver

BASE = """# Task #7: Login form

## 0. Metadata
```json
{
  "task_id": 7,
  "status": "in_progress",
  "dependencies": [1],
  "total_sessions": 1
}
```

## 1. Context
**Epic:** Auth (#1)

### Requirements
Build the login form.
Validate on submit.

### Acceptance Criteria
- [ ] form renders
- [ ] errors are shown
- [x] submit posts the form

## 2. Chain Inputs

### From Task #1: Schema
> users table

## 3. Progress Log

### Session 1 - 2025-01-01 10:00
**Did:**
- scaffolded the form

**Issues:** None

**Next:** validation

## 4. Chain Output

(To be completed)
"""


def session(number: int, did: str, stamp: str = "2025-01-02 10:00") -> str:
    return f"### Session {number} - {stamp}\n**Did:**\n- {did}\n\n**Issues:** None\n\n**Next:** more\n\n"


def add_session(text: str, block: str) -> str:
    """The text with a session appended to the log and total_sessions counted again."""
    text = text.replace("## 4. Chain Output", block + "## 4. Chain Output")
    doc = TaskDocument(text)
    return doc.set_metadata({"total_sessions": doc.session_count})


def tick(text: str, *indices: int, checked: bool = True) -> str:
    return TaskDocument(text).check_many(list(indices), checked)[0]


def meta(text: str, **updates) -> str:
    return TaskDocument(text).set_metadata(updates)


def merged(base: str, ours: str, theirs: str) -> tuple[str, bool, TaskDocument]:
    text, clean = merge_task(base, ours, theirs)
    return text, clean, TaskDocument(text)


def ticks(doc: TaskDocument) -> list[bool]:
    return [checked for _, _, checked, _, _ in doc.criteria_lines]


# ---------------------------------------------------------------- nothing to merge


def test_one_side_unchanged_gives_the_other_byte_for_byte():
    edited = add_session(tick(meta(BASE, priority=2), 1), session(2, "x"))
    assert merge_task(BASE, BASE, edited) == (edited, True)
    assert merge_task(BASE, edited, BASE) == (edited, True)
    assert merge_task(BASE, edited, edited) == (edited, True)


# ---------------------------------------------------------------- metadata


def test_metadata_key_by_key():
    ours = meta(BASE, priority=1)
    theirs = meta(BASE, complexity="high", dependencies=[1, 3])
    text, clean, doc = merged(BASE, ours, theirs)
    assert clean
    assert doc.metadata == {"task_id": 7, "status": "in_progress", "dependencies": [1, 3], "total_sessions": 1,
                            "priority": 1, "complexity": "high"}
    assert '"priority": 1,\n  "complexity": "high"\n}' in text  # ours' layout, new keys last


def test_metadata_same_change_on_both_sides_and_a_key_removed_on_one():
    both = meta(BASE, priority=3)
    removed = both.replace('  "dependencies": [1],\n', "")
    text, clean, doc = merged(BASE, both, removed)
    assert clean and doc.metadata.get("priority") == 3 and "dependencies" not in doc.metadata


def test_dependencies_merge_as_sets():
    ours = meta(BASE, dependencies=[1, 2])
    theirs = meta(BASE, dependencies=[3])
    _, clean, doc = merged(BASE, ours, theirs)
    assert clean and doc.metadata["dependencies"] == [2, 3]  # 1 removed by theirs, 2 and 3 added


def test_different_values_are_a_conflict_inside_the_json_block_only():
    text, clean, doc = merged(BASE, meta(BASE, priority=1), meta(BASE, priority=2, complexity="low"))
    assert not clean
    assert '"total_sessions": 1,\n<<<<<<< ours\n  "priority": 1,\n=======\n  "priority": 2,\n>>>>>>> theirs\n' \
           '  "complexity": "low"\n}\n```' in text  # theirs' other new key merged
    fence = text.index("```json"), text.index("```\n", text.index("```json") + 3)
    assert all(fence[0] < text.index(m) < fence[1] for m in ("<<<<<<<", "=======\n", ">>>>>>>"))
    with pytest.raises(Exception):
        doc.metadata  # noqa: B018 - a person resolves it; lint reports it until then


@pytest.mark.parametrize("ours, theirs, expected", [
    ("complete", "review", "complete"),
    ("review", "in_progress", "review"),
    ("in_progress", "failed", "in_progress"),
    ("blocked", "failed", "failed"),
    ("pending", "blocked", "blocked"),
])
def test_status_changed_on_both_sides_takes_the_further_state(ours, theirs, expected):
    base = meta(BASE, status="pending") if "pending" not in (ours, theirs) else meta(BASE, status="in_progress")
    _, clean, doc = merged(base, meta(base, status=ours), meta(base, status=theirs))
    assert clean and doc.status == expected


def test_total_sessions_is_counted_from_the_merged_log_even_when_both_sides_wrote_it():
    ours = add_session(BASE, session(2, "ours"))
    theirs = add_session(add_session(BASE, session(2, "theirs a")), session(3, "theirs b"))
    _, clean, doc = merged(BASE, ours, theirs)
    assert clean and doc.metadata["total_sessions"] == 4 == doc.session_count


# ---------------------------------------------------------------- criteria


def test_criteria_ticked_on_either_side_are_ticked():
    _, clean, doc = merged(BASE, tick(BASE, 1), tick(BASE, 2))
    assert clean and ticks(doc) == [True, True, True]


def test_a_criterion_unticked_on_one_side_stays_unticked_when_the_other_left_it():
    _, clean, doc = merged(BASE, tick(BASE, 3, checked=False), tick(BASE, 1))
    assert clean and ticks(doc) == [True, False, False]


def test_a_tick_and_a_reworded_criterion_on_the_other_side_both_stay():
    reworded = BASE.replace("- [ ] errors are shown", "- [ ] errors are shown next to each field")
    text, clean, doc = merged(BASE, reworded, tick(BASE, 2))
    assert clean and "- [x] errors are shown next to each field\n" in text and ticks(doc) == [False, True, True]
    text, clean, doc = merged(BASE, tick(BASE, 2), reworded)
    assert clean and "- [x] errors are shown next to each field\n" in text


def test_a_criterion_added_on_one_side_and_a_tick_on_the_other():
    added = BASE.replace("- [x] submit posts the form\n", "- [x] submit posts the form\n- [ ] keyboard only\n")
    _, clean, doc = merged(BASE, added, tick(BASE, 1))
    assert clean and [c.text for c in doc.criteria()][-1] == "keyboard only" and ticks(doc) == [True, False, True, False]


def test_criteria_added_at_the_same_place_differently_are_a_conflict_in_that_list():
    a = BASE.replace("- [x] submit posts the form\n", "- [x] submit posts the form\n- [ ] a\n")
    b = BASE.replace("- [x] submit posts the form\n", "- [x] submit posts the form\n- [ ] b\n")
    text, clean = merge_task(BASE, a, b)
    assert not clean and "<<<<<<< ours\n- [ ] a\n=======\n- [ ] b\n>>>>>>> theirs\n" in text


# ---------------------------------------------------------------- progress log


def test_sessions_from_both_sides_theirs_renumbered_after_ours():
    ours = add_session(BASE, session(2, "ours did this"))
    theirs = add_session(BASE, session(2, "theirs did that", "2025-01-03 09:00"))
    text, clean, doc = merged(BASE, ours, theirs)
    assert clean
    assert [(s.number, s.did) for s in doc.sessions()] == [(1, ["scaffolded the form"]), (2, ["ours did this"]),
                                                           (3, ["theirs did that"])]
    assert "### Session 3 - 2025-01-03 09:00\n" in text and doc.metadata["total_sessions"] == 3


def test_the_same_session_added_on_both_sides_is_kept_once():
    both = add_session(BASE, session(2, "same"))
    _, clean, doc = merged(BASE, both, both.replace("## 1. Context", "## 1. Context\n"))
    assert clean and [s.number for s in doc.sessions()] == [1, 2]


def test_sessions_added_where_there_were_none():
    empty = BASE.replace(session(1, "scaffolded the form", "2025-01-01 10:00").replace("**Next:** more", "**Next:** validation"),
                         "(No sessions yet)\n\n").replace('"total_sessions": 1', '"total_sessions": 0')
    assert "(No sessions yet)" in empty
    ours = TaskDocument(empty).append_to_section("progress", session(1, "a").rstrip("\n"))
    from specflux.format.edits import apply_edits

    ours = apply_edits(empty, [ours])
    theirs = apply_edits(empty, [TaskDocument(empty).append_to_section("progress", session(1, "b").rstrip("\n"))])
    text, clean, doc = merged(empty, ours, theirs)
    assert clean and "(No sessions yet)" not in text
    assert [(s.number, s.did) for s in doc.sessions()] == [(1, ["a"]), (2, ["b"])]


def test_an_edit_inside_an_old_session_and_a_new_session():
    edited = BASE.replace("- scaffolded the form", "- scaffolded the form (React)")
    _, clean, doc = merged(BASE, edited, add_session(BASE, session(2, "theirs")))
    assert clean and doc.sessions()[0].did == ["scaffolded the form (React)"] and len(doc.sessions()) == 2


def test_one_session_edited_differently_on_both_sides_conflicts_inside_it():
    a = BASE.replace("**Next:** validation", "**Next:** validation, then styling")
    b = add_session(BASE.replace("**Next:** validation", "**Next:** tests"), session(2, "theirs"))
    text, clean = merge_task(BASE, a, b)
    assert not clean and "<<<<<<< ours\n**Next:** validation, then styling\n=======\n**Next:** tests\n>>>>>>> theirs\n" \
                         "\n### Session 2 - " in text


def test_a_section_deleted_on_one_side_and_changed_on_the_other_is_a_conflict():
    deleted = BASE.replace("## 2. Chain Inputs\n\n### From Task #1: Schema\n> users table\n\n", "")
    text, clean = merge_task(BASE, deleted, BASE.replace("> users table", "> users table v2"))
    assert not clean and "<<<<<<< ours\n=======\n## 2. Chain Inputs\n" in text and "> users table v2\n" in text
    text, clean = merge_task(BASE, deleted, tick(BASE, 1))  # unchanged on the other side: deleted
    assert clean and "Chain Inputs" not in text and "- [x] form renders" in text


ARCHIVED = ("### Archived Summary (Sessions 1-1)\n**Duration:** 1 session\n**Accomplishments:** the form\n"
            "**Commits:** abc1234\n[Full details: archive](../archives/task-7-archive.md)\n\n")


def test_archived_on_one_side_and_a_session_added_on_the_other():
    archived = BASE.replace(session(1, "scaffolded the form", "2025-01-01 10:00").replace("**Next:** more", "**Next:** validation"),
                            ARCHIVED)
    assert "### Session 1" not in archived
    theirs = add_session(BASE, session(2, "theirs"))
    text, clean, doc = merged(BASE, archived, theirs)
    assert clean and "### Session 1 " not in text and doc.archived_region[:2] == (1, 1)
    assert [s.number for s in doc.sessions()] == [2] and doc.metadata["total_sessions"] == 2


def test_an_archived_summary_changed_differently_on_both_sides_is_a_conflict():
    base = add_session(BASE, ARCHIVED)
    a = base.replace("**Accomplishments:** the form", "**Accomplishments:** the form, styled")
    b = base.replace("**Accomplishments:** the form", "**Accomplishments:** the whole form")
    text, clean = merge_task(base, a, b)
    assert not clean and "=======\n**Accomplishments:** the whole form\n>>>>>>> theirs" in text


# ---------------------------------------------------------------- everything else


def test_chain_inputs_wired_on_both_sides_are_both_kept():
    a = BASE.replace("> users table\n", "> users table\n\n### From Task #2: Tokens\n> signToken()\n")
    b = BASE.replace("> users table\n", "> users table\n\n### From Task #3: Mailer\n> sendMail()\n")
    _, clean, doc = merged(BASE, a, b)
    assert clean and [c.task_id for c in doc.chain_inputs()] == ["1", "2", "3"]


def test_requirements_changed_differently_conflict_in_that_subsection_only():
    a = tick(BASE.replace("Build the login form.", "Build the login form in React."), 1)
    b = add_session(BASE.replace("Build the login form.", "Build the login form in Vue."), session(2, "theirs"))
    text, clean = merge_task(BASE, a, b)
    assert not clean
    assert "### Requirements\n<<<<<<< ours\nBuild the login form in React.\n=======\nBuild the login form in Vue.\n" \
           ">>>>>>> theirs\nValidate on submit.\n" in text
    assert len(conflict_lines(text)) == 1
    assert "- [x] form renders" in text and "### Session 2 - " in text  # the rest merged


def test_chain_output_written_on_one_side_and_context_text_on_the_other():
    done = BASE.replace("(To be completed)\n", "### Summary\nLogin form done.\n\n### For Downstream Tasks\nNone\n")
    noted = BASE.replace("**Epic:** Auth (#1)\n", "**Epic:** Auth (#1)\n**Repository:** web\n")
    text, clean, doc = merged(BASE, meta(done, status="complete"), noted)
    assert clean and doc.chain_output().summary == "Login form done." and "**Repository:** web\n" in text


def test_a_section_added_on_each_side():
    a = BASE + "\n## Notes\nfrom a\n"
    b = BASE.replace("## 4. Chain Output", "## Decisions\nfrom b\n\n## 4. Chain Output")
    text, clean = merge_task(BASE, a, b)
    assert clean and text.index("## Decisions") < text.index("## 4. Chain Output") < text.index("## Notes")


# ---------------------------------------------------------------- line endings, fallbacks


def test_crlf_files_merge_in_crlf():
    crlf = BASE.replace("\n", "\r\n")
    ours = add_session(tick(crlf, 1), session(2, "ours").replace("\n", "\r\n"))
    theirs = add_session(tick(crlf, 2), session(2, "theirs").replace("\n", "\r\n"))
    text, clean = merge_task(crlf, ours, theirs)
    assert clean and text.count("\n") == text.count("\r\n") > 40
    doc = TaskDocument(text)
    assert [s.number for s in doc.sessions()] == [1, 2, 3] and ticks(doc) == [True, True, True]


def test_a_side_saved_with_lf_merges_into_ours_crlf():
    crlf = BASE.replace("\n", "\r\n")
    text, clean = merge_task(crlf, tick(crlf, 1), tick(BASE, 2))
    assert clean and text == tick(tick(crlf, 1), 2)


def test_a_broken_side_is_merged_by_lines_and_loses_nothing():
    broken = BASE.replace('"status": "in_progress",', '"status": in_progress,')  # not JSON
    text, clean = merge_task(BASE, broken, tick(BASE, 1))
    assert clean and '"status": in_progress,' in text and "- [x] form renders" in text
    text, clean = merge_task("a\nb\nc\n", "a\nB\nc\n", "a\nbee\nc\n")
    assert (text, clean) == ("a\n<<<<<<< ours\nB\n=======\nbee\n>>>>>>> theirs\nc\n", False)


def test_merge_lines_takes_changes_apart_and_the_same_change_once():
    assert merge_lines("1\n2\n3\n4\n5\n", "one\n2\n3\n4\n5\n", "1\n2\n3\n4\nfive\n") == ("one\n2\n3\n4\nfive\n", True)
    assert merge_lines("1\n2\n", "1\n2\n3\n", "1\n2\n3\n") == ("1\n2\n3\n", True)
    assert merge_lines("", "x", "y") == ("<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n", False)


# ---------------------------------------------------------------- the command


def test_merge_driver_command_writes_ours_and_exits_by_cleanliness(tmp_path, capsys):
    files = {name: tmp_path / name for name in ("O", "A", "B")}
    for name, text in zip("OAB", (BASE, tick(BASE, 1), tick(BASE, 2))):
        files[name].write_bytes(text.encode())
    assert main(["merge-driver", *map(str, files.values()), "x.md"]) == 0
    assert files["A"].read_text() == tick(tick(BASE, 1), 2)
    for name, text in zip("OAB", ("a\n", "b\n", "c\n")):
        files[name].write_text(text)
    assert main(["merge-driver", *map(str, files.values()), "notes/x.md"]) == 1
    assert files["A"].read_text() == "<<<<<<< ours\nb\n=======\nc\n>>>>>>> theirs\n"
    assert "notes/x.md:1: merge conflict" in capsys.readouterr().err


def test_register_driver_keeps_gitattributes_and_is_idempotent(tmp_path):
    (tmp_path / ".gitattributes").write_text("*.png binary")  # no final newline
    register_driver(tmp_path)
    register_driver(tmp_path)
    assert (tmp_path / ".gitattributes").read_text() == f"*.png binary\n{ATTRIBUTE}\n"


# ---------------------------------------------------------------- real divergent branches


DRIVER = f"{sys.executable} -m specflux.cli merge-driver %O %A %B %P"
STATE = ".specflux/task-states/task-7-state.md"


def git_merge(repo: Path, branch: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "merge", "--no-edit", branch], cwd=repo, env={**os.environ, **GIT_ENV},
                          capture_output=True, text=True)


@pytest.fixture
def repo(git_repo, capsys) -> Path:
    """A repository where `specflux init` registered the driver, with task 7 (session 1) committed
    on main; the driver command is this interpreter's, so the test does not depend on PATH."""
    assert main(["init", str(git_repo)]) == 0
    assert ATTRIBUTE in (git_repo / ".gitattributes").read_text().splitlines()
    assert git(git_repo, "config", "--local", "merge.specflux.name").strip() == "specflux task-state merge"
    assert git(git_repo, "config", "--local", "merge.specflux.driver").strip().endswith("merge-driver %O %A %B %P")
    git(git_repo, "config", "--local", "merge.specflux.driver", DRIVER)
    ok(capsys, git_repo, "new", "Login form", "--id", "7", "--req", "Build the login form.",
       "--ac", "form renders", "--ac", "errors are shown", "--ac", "submit posts the form")
    git(git_repo, "add", ".gitattributes", ".specflux")
    git(git_repo, "commit", "-q", "-m", "task 7")
    ok(capsys, git_repo, "session", "7", "--did", "scaffolded the form")
    return git_repo


def two_branches(repo: Path, capsys, a, b) -> None:
    git(repo, "checkout", "-q", "-b", "a")
    a()
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "-b", "b")
    b()
    git(repo, "checkout", "-q", "a")


def test_git_merge_of_divergent_branches_is_clean(repo, capsys):
    def a():
        ok(capsys, repo, "session", "7", "--did", "added validation on branch a", "--check", "1")

    def b():
        ok(capsys, repo, "check", "7", "2")
        ok(capsys, repo, "set", "7", "--priority", "2")
        ok(capsys, repo, "session", "7", "--did", "styled the errors on branch b")

    two_branches(repo, capsys, a, b)
    done = git_merge(repo, "b")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = TaskDocument((repo / STATE).read_text())
    assert [(s.number, s.did) for s in doc.sessions()] == [
        (1, ["scaffolded the form"]), (2, ["added validation on branch a"]), (3, ["styled the errors on branch b"])]
    assert ticks(doc) == [True, True, False]
    assert doc.metadata["priority"] == 2 and doc.metadata["total_sessions"] == 3
    assert "Merge branch 'b'" in git(repo, "log", "-1", "--format=%s")
    assert ok(capsys, repo, "lint").startswith("ok:")


def test_git_merge_with_a_true_conflict_marks_only_the_requirements(repo, capsys):
    path = repo / STATE

    def edit_requirements(text: str):
        def edit():
            path.write_text(path.read_text().replace("Build the login form.", text))
            git(repo, "commit", "-q", "-am", text)
        return edit

    def a():
        edit_requirements("Build the login form in React.")()
        ok(capsys, repo, "session", "7", "--did", "on a", "--check", "1")

    def b():
        edit_requirements("Build the login form in Vue.")()
        ok(capsys, repo, "session", "7", "--did", "on b", "--check", "3")

    two_branches(repo, capsys, a, b)
    done = git_merge(repo, "b")
    assert done.returncode == 1 and "CONFLICT" in done.stdout
    assert git(repo, "diff", "--name-only", "--diff-filter=U").split() == [STATE]
    text = path.read_text()
    doc = TaskDocument(text)
    requirements = doc.find_subsection(doc.sections["context"], "requirements")
    body = text[requirements.body : requirements.end]
    assert body.startswith("<<<<<<< ours\nBuild the login form in React.\n=======\nBuild the login form in Vue.\n"
                           ">>>>>>> theirs\n")
    assert text.count("<<<<<<<") == text.count(">>>>>>>") == 1
    assert ticks(doc) == [True, False, True] and [s.number for s in doc.sessions()] == [1, 2, 3]
    assert doc.metadata["total_sessions"] == 3


def test_git_merge_of_a_crlf_task_file_stays_crlf(repo, capsys):
    path = repo / STATE
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    git(repo, "commit", "-q", "-am", "task 7 in CRLF")

    two_branches(repo, capsys, lambda: ok(capsys, repo, "session", "7", "--did", "crlf a", "--check", "1"),
                 lambda: ok(capsys, repo, "session", "7", "--did", "crlf b", "--check", "2"))
    done = git_merge(repo, "b")
    assert done.returncode == 0, done.stdout + done.stderr
    data = path.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n") > 20
    doc = TaskDocument(data.decode())
    assert [s.did for s in doc.sessions()] == [["scaffolded the form"], ["crlf a"], ["crlf b"]]
    assert ticks(doc) == [True, True, False]
    assert ok(capsys, repo, "lint").startswith("ok:")


def test_init_outside_git_writes_only_the_attribute(tmp_path):
    assert main(["init", str(tmp_path)]) == 0
    assert (tmp_path / ".gitattributes").read_text() == ATTRIBUTE + "\n"
    assert not (tmp_path / ".git").exists()


def test_lint_reports_conflict_markers_left_in_a_task_file(tmp_path):
    from specflux.store.lint import lint_document
    from specflux.store.config import ArchiveConfig
    from specflux.format.document import TaskDocument

    text = ("# Task #1: x\n\n## 0. Metadata\n```json\n{\"task_id\": 1, \"status\": \"pending\", \"total_sessions\": 0}\n```\n\n"
            "## 1. Context\n\n### Requirements\n<<<<<<< ours\nA\n=======\nB\n>>>>>>> theirs\n")
    problems = lint_document(TaskDocument(text, "t.md"), "1", ArchiveConfig())
    assert [(p.line, p.message.split(":")[0]) for p in problems] == [(11, "a merge conflict is left here")]
