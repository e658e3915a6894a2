"""`specflux import` end to end in real git repositories, on real files from ../shared/corpus:
detection, idempotence (the second import changes no byte), lint-clean task files, and
write-back in the commit that completes the task."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import CORPUS, git
from helpers import ok, run

STATES = ".specflux/task-states"


def corpus(name: str) -> Path:
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"corpus not found at {CORPUS} (CI has it beside the checkout)")
    return path


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / STATES).glob("*.md"))}


@pytest.fixture
def repo(git_repo: Path, capsys) -> Path:
    ok(capsys, git_repo, "init", str(git_repo))
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "workspace")
    return git_repo


def test_a_backlog_folder_imports_once_and_lints_clean(repo, capsys):
    tasks = repo / "backlog" / "tasks"
    tasks.mkdir(parents=True)
    for name in ("backlog-md__back-200 - Add-Claude-Code-integration-with-workflow-commands-during-init.md",
                 "backlog-md__back-355.02 - CLI-Add-type-flag-to-task-create-and-edit-commands.md"):
        (tasks / name.split("__", 1)[1]).write_bytes(corpus(f"progress/{name}").read_bytes())
    code, out, err = run(capsys, repo, "import", str(repo / "backlog"))
    assert code == 0 and "2 task(s) created" in out, out + err
    assert "back-200 - Add-Claude-Code" in err and ":12: dependency 'task-24.1'" in err, "located warnings"
    first = snapshot(repo)
    code, out, err = run(capsys, repo, "import", str(repo / "backlog"))
    assert code == 0 and "0 task(s) created, 2 already there" in out
    assert snapshot(repo) == first, "importing again changes nothing"
    assert run(capsys, repo, "lint")[0] == 0
    done = json.loads(ok(capsys, repo, "show", "BACK-355.02", "--json"))
    assert done["status"] == "complete" and all(c["checked"] for c in done["criteria"])
    assert done["metadata"]["source"]["path"].startswith("backlog/tasks/back-355.02")


def test_a_feature_list_imports_and_completing_a_feature_passes_it_in_the_same_commit(repo, capsys):
    source = repo / "feature_list.json"
    source.write_bytes(corpus("progress/xtuner__feature_list.json").read_bytes())
    git(repo, "add", "feature_list.json")
    git(repo, "commit", "-q", "-m", "features")
    code, out, err = run(capsys, repo, "import", str(source))
    assert code == 0, err
    data = json.loads(source.read_text())
    pending = next(i for i, f in enumerate(data) if not f["passes"])
    task_id = f"F{pending + 1}"
    before = source.read_text()
    ok(capsys, repo, "complete", task_id, "--summary", "works")
    after = source.read_text()
    diff = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(diff) == 1 and diff[0][0].replace("false", "true") == diff[0][1], diff
    assert json.loads(after)[pending]["passes"] is True
    assert "feature_list.json" in git(repo, "show", "--name-only", "--format=", "HEAD").split(), "same commit"
    assert git(repo, "status", "--porcelain", "--", "feature_list.json") == ""


def test_an_unknown_format_is_a_usage_error(repo, capsys, tmp_path):
    odd = tmp_path / "notes.txt"
    odd.write_text("nothing\n")
    code, out, err = run(capsys, repo, "import", str(odd))
    assert code == 2 and "--format" in err
    code, out, err = run(capsys, repo, "import", str(tmp_path / "missing.md"))
    assert code == 1 and "no such file" in err


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_spec_kit_tasks_md_imports_and_completing_a_task_ticks_its_line(repo, capsys, newline):
    source = repo / "specs" / "tasks.md"
    source.parent.mkdir()
    text = corpus("spec-kit/finance-analyser__010-email-password-auth__tasks.md").read_text()
    source.write_bytes(text.replace("\n", newline).encode())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "spec")
    code, out, err = run(capsys, repo, "import", str(source))
    assert code == 0 and "29 task(s) created" in out, out + err
    assert run(capsys, repo, "lint")[0] == 0
    first = json.loads(ok(capsys, repo, "show", "T001", "--json"))
    assert first["metadata"]["source"] == {"path": "specs/tasks.md", "line": first["metadata"]["source"]["line"],
                                           "format": "spec-kit"}
    later = json.loads(ok(capsys, repo, "show", "T007", "--json"))
    assert "T006" in later["dependencies"], "(depends on T006)"
    before = source.read_bytes()
    ok(capsys, repo, "complete", "T001", "--summary", "done")
    after = source.read_bytes()
    changed = [(a, b) for a, b in zip(before.split(b"\n"), after.split(b"\n")) if a != b]
    assert len(changed) == 1 and changed[0][0].replace(b"- [ ]", b"- [x]", 1) == changed[0][1], changed
    assert len(after) == len(before) and after.count(b"\r\n") == before.count(b"\r\n")
    assert "specs/tasks.md" in git(repo, "show", "--name-only", "--format=", "HEAD").split()
    code, out, err = run(capsys, repo, "import", str(source))
    assert "0 task(s) created, 29 already there" in out


def test_a_read_only_tasks_md_is_left_as_it_is_and_the_task_still_completes(repo, capsys):
    source = repo / "tasks.md"
    source.write_text("## Phase 1: Setup\n\n- [ ] T001 Create the project\n- [ ] T002 Add the linter\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "spec")
    assert run(capsys, repo, "import", str(source))[0] == 0
    source.chmod(0o444)
    before = source.read_bytes()
    code, out, err = run(capsys, repo, "complete", "T001", "--summary", "done")
    assert code == 0, err
    assert "not ticked in tasks.md" in err and "read-only" in err
    assert source.read_bytes() == before
    assert json.loads(ok(capsys, repo, "show", "T001", "--json"))["status"] == "complete"


def test_a_source_whose_chain_is_thousands_long_is_ordered_without_recursion():
    from specflux.importers.apply import _dependencies_first
    from specflux.importers.drafts import TaskDraft

    n = 3000  # each task depends on the one after it: dependencies first means the reverse order
    drafts = [TaskDraft(str(i), f"task {i}", dependencies=[str(i + 1)] if i < n else []) for i in range(1, n + 1)]
    order = [d.task_id for d in _dependencies_first(drafts)]
    assert order == [str(i) for i in range(n, 0, -1)]
    drafts[-1].dependencies = ["1"]  # a cycle: every task still comes out once
    assert sorted(d.task_id for d in _dependencies_first(drafts)) == sorted(str(i) for i in range(1, n + 1))
