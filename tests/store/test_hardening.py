"""The core under attack: hostile files and file systems, end to end through the CLI.

Every case compares the workspace's bytes before and after: a command that fails leaves every
file as it was, prints one line naming the place and what to do, and exits non-zero.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from helpers import ok, run

TASKS = ".specflux/task-states"


def task_file(root: Path, task_id: str) -> Path:
    return root / TASKS / f"task-{task_id}-state.md"


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under .specflux/ (but the list cache) with its bytes."""
    out = {}
    for p in sorted((root / ".specflux").rglob("*")):
        if p.is_file() and "cache" not in p.parts and "locks" not in p.parts:
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


@pytest.fixture
def ws(git_repo: Path, capsys) -> Path:
    """A git repository with tasks 1 (two criteria) and 2 (depends on 1), committed."""
    ok(capsys, git_repo, "init", str(git_repo))
    ok(capsys, git_repo, "new", "Schema", "--ac", "users table", "--ac", "migrations run")
    ok(capsys, git_repo, "new", "API", "--dep", "1", "--ac", "endpoints")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tasks")
    return git_repo


def refused(capsys, root: Path, *args: str, code: int = 1) -> str:
    """Run a command that must fail without touching a file; returns its stderr."""
    before = snapshot(root)
    got, out, err = run(capsys, root, *args)
    assert got == code, f"specflux {' '.join(args)} -> {got}: {out}{err}"
    assert "Traceback" not in err and err.strip(), err
    assert snapshot(root) == before, f"specflux {' '.join(args)} changed files"
    return err


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


# --------------------------------------------------------------------- nothing a person wrote is lost


def test_complete_keeps_every_subsection_a_person_wrote(ws, capsys):
    path = task_file(ws, "1")
    edit(path, "## 4. Chain Output\n\n(To be completed)", "## 4. Chain Output\n\n(To be completed)")
    ok(capsys, ws, "complete", "1", "--summary", "First summary", "--downstream", "Use users.id", "--no-commit")
    text = path.read_text()
    text += "\n### Files Created\n- db/schema.sql\n\n### Integration Notes\nRun `make migrate` first.\n"
    path.write_text(text)
    ok(capsys, ws, "complete", "1", "--summary", "Second summary", "--no-commit")
    after = path.read_text()
    assert "Second summary" in after and "First summary" not in after
    assert "### For Downstream Tasks\nUse users.id" in after, "a complete without --downstream keeps it"
    assert "### Files Created\n- db/schema.sql\n" in after
    assert "### Integration Notes\nRun `make migrate` first.\n" in after
    shown = ok(capsys, ws, "show", "1", "--json")
    assert '"summary": "Second summary"' in shown and '"downstream": "Use users.id"' in shown


def test_first_complete_keeps_hand_written_chain_output_subsections(ws, capsys):
    path = task_file(ws, "1")
    edit(path, "## 4. Chain Output\n\n(To be completed)",
         "## 4. Chain Output\n\nNotes first.\n\n### API Contract\nGET /users\n")
    ok(capsys, ws, "complete", "1", "--summary", "Done", "--no-commit")
    after = path.read_text()
    assert "Notes first.\n\n### Summary\nDone\n\n### For Downstream Tasks\nNone\n\n### API Contract\nGET /users\n" in after


@pytest.mark.parametrize("opener, closer", [("```python", "```"), ("<!-- note", "-->")])
def test_an_unclosed_block_before_the_log_refuses_the_session_with_its_line(ws, capsys, opener, closer):
    path = task_file(ws, "1")
    edit(path, "### Acceptance Criteria", f"{opener}\nhalf written\n\n### Acceptance Criteria")
    line = path.read_text().splitlines().index(opener) + 1
    err = refused(capsys, ws, "session", "1", "--did", "work")
    assert f"task-1-state.md:{line}:" in err and "never closed" in err
    lint_err = refused(capsys, ws, "lint")
    assert f"task-1-state.md:{line}: this" in lint_err
    edit(path, "half written\n", f"half written\n{closer}\n")
    ok(capsys, ws, "session", "1", "--did", "work", "--no-commit")
    assert ok(capsys, ws, "show", "1", "--json").count('"number": 1') == 1


def test_an_unclosed_fence_inside_the_last_session_refuses_the_next_one(ws, capsys):
    ok(capsys, ws, "session", "1", "--did", "first", "--no-commit")
    path = task_file(ws, "1")
    edit(path, "- first\n", "- first\n```\nstack trace\n")
    err = refused(capsys, ws, "session", "1", "--did", "second")
    assert "never closed" in err and re.search(r"task-1-state\.md:\d+:", err)


def test_an_unclosed_fence_after_the_log_does_not_stop_a_session(ws, capsys):
    path = task_file(ws, "1")
    path.write_text(path.read_text() + "\n```\nscratch\n")
    ok(capsys, ws, "session", "1", "--did", "lands", "--no-commit")
    assert '"did": [\n        "lands"' in ok(capsys, ws, "show", "1", "--json")


def test_duplicate_sections_duplicate_keys_and_a_bom_are_lint_findings_with_lines(ws, capsys):
    path = task_file(ws, "1")
    text = path.read_text()
    text = text.replace('"status": "pending",', '"status": "pending",\n  "status": "pending",')
    text += "\n## 3. Progress Log\n\n### Session 9 - 2024-01-01 10:00\n**Did:**\n- stray\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    lines = text.splitlines()
    dup_key = [i for i, ln in enumerate(lines) if '"status"' in ln][1] + 1
    dup_log = [i for i, ln in enumerate(lines) if ln == "## 3. Progress Log"][1] + 1
    err = refused(capsys, ws, "lint")
    assert "task-1-state.md:1: the file starts with a UTF-8 byte-order mark" in err
    assert f'task-1-state.md:{dup_key}: metadata key "status" is written twice' in err
    assert f"task-1-state.md:{dup_log}: a second `## 3. Progress Log` section" in err
    shown = ok(capsys, ws, "show", "1", "--json")
    assert '"title": "Schema"' in shown, "a BOM is read, not reported as no title"
    ok(capsys, ws, "check", "1", "1")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf# Task #1: Schema"), "the BOM stays"


def test_a_task_that_depends_on_itself(ws, capsys):
    assert "itself" in refused(capsys, ws, "new", "Loop", "--id", "7", "--dep", "7", code=2)
    assert "itself" in refused(capsys, ws, "set", "1", "--add-dep", "1", code=2)
    path = task_file(ws, "2")
    edit(path, '"dependencies": [1]', '"dependencies": [1, 2]')
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if '"dependencies"' in ln)
    for args in (("show", "2"), ("session", "2", "--did", "x"), ("complete", "2", "--summary", "s"), ("check", "2", "1")):
        err = refused(capsys, ws, *args)
        assert f"task-2-state.md:{line}: task 2 depends on itself" in err, args
    code, out, err = run(capsys, ws, "complete", "1", "--summary", "done", "--no-commit")
    assert code == 0 and "task-2-state.md" in err and "not wired" in err, "never silently unwired"
    code, out, err = run(capsys, ws, "list")
    assert code == 1 and "BROKEN" in out and "1   complete" in out


# --------------------------------------------------------------------- crashes mid-write


def _specflux(root: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(root), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("command", ["complete", "wire"])
def test_kill_9_never_leaves_dependents_silently_unwired(tmp_path, capsys, command):
    """Real `kill -9` at random moments of `complete 1` (or `wire 1`) with 40 dependents: after
    each, either lint is clean, or it names every unwired dependent with its line, and `wire`
    repairs them."""
    import random
    import time

    root = tmp_path / "ws"
    root.mkdir()
    ok(capsys, root, "init", str(root))
    ok(capsys, root, "new", "Upstream", "--ac", "a")
    ok(capsys, root, "check", "1", "1")
    for i in range(2, 42):
        ok(capsys, root, "new", f"Dependent {i}", "--dep", "1")
    if command == "wire":  # task 1 complete, no dependent wired yet: what `wire` has to do
        unwired = snapshot(root)
        ok(capsys, root, "complete", "1", "--summary", "Schema done", "--no-commit")
        for rel, data in unwired.items():
            if "task-1-" not in rel:
                (root / rel).write_bytes(data)
    pristine = snapshot(root)
    args = ("complete", "1", "--summary", "Schema done", "--no-commit") if command == "complete" else ("wire", "1")
    stale_seen = 0
    for attempt in range(10):
        for rel, data in pristine.items():
            (root / rel).write_bytes(data)
        proc = _specflux(root, *args)
        time.sleep(random.uniform(0.15, 0.6))
        proc.kill()
        proc.wait()
        code, out, err = run(capsys, root, "lint")
        stale = [ln for ln in err.splitlines() if "chain output is missing" in ln]
        for ln in stale:
            assert re.match(r"\.specflux/task-states/task-\d+-state\.md:\d+: task 1 is complete", ln), ln
            assert "specflux wire 1" in ln
        if stale:
            stale_seen += 1
            ok(capsys, root, "wire", "1")
        code, out, err = run(capsys, root, "lint")
        assert code == 0, f"attempt {attempt}: after wire, lint is clean: {err}"
        if '"status": "complete"' in ok(capsys, root, "show", "1", "--json"):
            for i in range(2, 42):
                assert "### From Task #1: Upstream" in task_file(root, str(i)).read_text()
    print(f"{command}: {stale_seen} of 10 kills landed mid-write")


# --------------------------------------------------------------------- no traceback, files as they were


def test_a_folder_named_like_a_task_file(ws, capsys):
    (ws / TASKS / "task-9-state.md").mkdir()
    code, out, err = run(capsys, ws, "list")
    assert code == 1 and "Schema" in out and "task-9-state.md: is a folder" in err
    assert "is a folder" in refused(capsys, ws, "show", "9")
    for command in ("ready", "graph"):
        code, out, err = run(capsys, ws, command)
        assert code == 1 and "task-9-state.md" in err and ("Schema" in out or "t_1" in out), command


def test_metadata_nested_100000_deep_and_a_5000_digit_number(ws, capsys):
    for task_id, value in (("5", "[" * 100_000 + "]" * 100_000), ("6", "9" * 5000)):
        path = task_file(ws, task_id)
        path.write_text(task_file(ws, "1").read_text().replace('"task_id": 1', f'"task_id": {task_id}, "x": {value}')
                        .replace("# Task #1", f"# Task #{task_id}"))
    assert "nests too deeply" in refused(capsys, ws, "show", "5")
    assert "task-6-state.md:6: metadata holds a number of 5000 digits" in refused(capsys, ws, "session", "6", "--did", "x")
    code, out, err = run(capsys, ws, "list")
    assert code == 1 and "Schema" in out and "task-5" in err and "task-6" in err
    code, out, err = run(capsys, ws, "lint")
    assert code == 1 and "Traceback" not in err


def test_a_read_only_task_file_and_folder_are_refused_with_what_to_do(ws, capsys):
    path = task_file(ws, "1")
    path.chmod(0o444)
    try:
        for args in (("check", "1", "1"), ("session", "1", "--did", "x"), ("set", "1", "--status", "review"),
                     ("complete", "1", "--summary", "s")):
            assert "task-1-state.md: the file is read-only; make it writable" in refused(capsys, ws, *args)
    finally:
        path.chmod(0o644)
    folder = ws / TASKS
    folder.chmod(0o555)
    try:
        assert "task-states: the folder is read-only" in refused(capsys, ws, "check", "1", "1")
        assert "read-only" in refused(capsys, ws, "new", "More")
    finally:
        folder.chmod(0o755)


def test_an_immutable_task_file(ws, capsys):
    path = task_file(ws, "1")
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here (needs root and a file system with attributes)")
    try:
        err = refused(capsys, ws, "check", "1", "1")
        assert "task-1-state.md: cannot write this file" in err and "immutable" in err
    finally:
        subprocess.run(["chattr", "-i", str(path)])


def test_locks_being_a_file(ws, capsys):
    from specflux.store.workspace import Workspace

    locks = Workspace(ws).state_dir / "locks"
    shutil.rmtree(locks, ignore_errors=True)
    locks.write_text("")
    err = refused(capsys, ws, "check", "1", "1")
    assert f"{locks}: cannot take the lock" in err and "move it away" in err


def test_init_and_demo_on_a_path_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "afile"
    target.write_text("mine")
    for args in (("init", str(target)), ("demo", str(target)), ("init", str(target / "sub"))):
        code = __import__("specflux.cli.main", fromlist=["main"]).main(list(args))
        out, err = capsys.readouterr()
        assert code == 2 and f"{target} is a file, not a folder" in err and "Traceback" not in err
    assert target.read_text() == "mine"


FULL_DISK = r"""
import os, subprocess, sys, hashlib, pathlib
mnt, src, python = sys.argv[1:4]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt], check=True)
ws = pathlib.Path(mnt) / "ws"
subprocess.run(["cp", "-a", src, str(ws)], check=True)
def digest():
    return {p.name: hashlib.sha1(p.read_bytes()).hexdigest() for p in ws.rglob("*") if p.is_file()}
filler = pathlib.Path(mnt) / "filler"
try:
    with open(filler, "wb") as f:
        while True:
            f.write(b"x" * 4096); f.flush()
except OSError:
    pass
before = digest()
done = subprocess.run([python, "-m", "specflux.cli", "--root", str(ws), "session", "1", "--did", "x" * 3000,
                       "--no-commit"], capture_output=True, text=True)
print(done.returncode)
print(done.stderr.strip())
print("same" if digest() == before else "changed")
"""


def test_a_full_disk(tmp_path, capsys):
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed: cannot mount a small file system to fill")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode:
        pytest.skip(f"user namespaces are not available here: {probe.stderr.decode().strip()}")
    src = tmp_path / "src"
    src.mkdir()
    ok(capsys, src, "init", str(src))
    ok(capsys, src, "new", "Fill me", "--ac", "a")
    (tmp_path / "mnt").mkdir()
    script = tmp_path / "full.py"
    script.write_text(FULL_DISK)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(["unshare", "-rm", sys.executable, str(script), str(tmp_path / "mnt"), str(src), sys.executable],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    code, message, verdict = done.stdout.strip().split("\n")
    assert code == "1" and "disk is full" in message and "Traceback" not in message, done.stdout
    assert verdict == "same"


# --------------------------------------------------------------------- one bad task never hides the rest


def test_a_cycle_is_drawn_and_marked_and_the_rest_still_shown(ws, capsys):
    ok(capsys, ws, "new", "Free")
    edit(task_file(ws, "1"), '"status": "pending",', '"status": "pending",\n  "dependencies": [2],')
    code, out, err = run(capsys, ws, "graph")
    assert code == 1 and "dependency cycle: 1 -> 2 -> 1" in err
    assert "t_3" in out and "t_1 --> t_2" in out and "t_2 --> t_1" in out
    assert "%% dependency cycle: 1 -> 2 -> 1" in out and re.search(r"linkStyle \d+,\d+ stroke:#C62828", out)
    code, out, err = run(capsys, ws, "ready")
    assert code == 1 and "Free" in out and "cycle" in err
    code, out, err = run(capsys, ws, "wire")
    assert code == 1 and "cycle" in err


# --------------------------------------------------------------------- everyday editing


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    """(removed, added) lines of a diff, paired up in order."""
    import difflib

    diff = [ln for ln in difflib.ndiff(before.splitlines(), after.splitlines()) if ln[:1] in "-+"]
    removed = [ln[2:] for ln in diff if ln[0] == "-"]
    added = [ln[2:] for ln in diff if ln[0] == "+"]
    return list(zip(removed, added)) + [("", ln) for ln in added[len(removed):]]


def test_set_rewrites_only_its_own_lines(ws, capsys):
    path = task_file(ws, "2")
    before = path.read_text()
    assert ok(capsys, ws, "set", "2", "--status", "blocked") == "task 2: status pending -> blocked\n"
    assert changed_lines(before, path.read_text()) == [('  "status": "pending",', '  "status": "blocked",')]
    before = path.read_text()
    ok(capsys, ws, "set", "2", "--title", "Auth API")
    assert changed_lines(before, path.read_text()) == [("# Task #2: API", "# Task #2: Auth API")]
    before = path.read_text()
    ok(capsys, ws, "set", "2", "--priority", "2")
    assert changed_lines(before, path.read_text()) == [('  "total_sessions": 0', '  "total_sessions": 0,'),
                                                       ("", '  "priority": 2')]
    ok(capsys, ws, "new", "Third")
    before = path.read_text()
    ok(capsys, ws, "set", "2", "--add-dep", "3")
    assert changed_lines(before, path.read_text()) == [('  "dependencies": [1],', '  "dependencies": [1, 3],')]
    before = path.read_text()
    ok(capsys, ws, "set", "2", "--remove-dep", "1")
    assert changed_lines(before, path.read_text()) == [('  "dependencies": [1, 3],', '  "dependencies": [3],')]


def test_set_refuses_unknown_and_cyclic_dependencies_naming_the_cycle(ws, capsys):
    ok(capsys, ws, "new", "Third", "--dep", "2")
    assert "no task 99" in refused(capsys, ws, "set", "1", "--add-dep", "99")  # the data says no: exit 1
    err = refused(capsys, ws, "set", "1", "--add-dep", "3")
    assert "closes the cycle 1 -> 3 -> 2 -> 1" in err
    code, out, err = run(capsys, ws, "set", "1", "--status", "done")
    assert code == 2 and "pending" in err and "blocked" in err


def test_delete_needs_force_while_others_depend_on_it(ws, capsys):
    err = refused(capsys, ws, "delete", "1")  # the data says no: exit 1
    assert "task 2 depends on task 1" in err and "specflux set 2 --remove-dep 1" in err
    path2 = task_file(ws, "2")
    before = path2.read_text()
    out = ok(capsys, ws, "delete", "1", "--force")
    assert "deleted .specflux/task-states/task-1-state.md" in out
    assert not task_file(ws, "1").exists()
    assert changed_lines(before, path2.read_text()) == [('  "dependencies": [1],', '  "dependencies": [],')]
    ok(capsys, ws, "delete", "2")
    assert "no tasks" in ok(capsys, ws, "list")


def test_check_says_what_it_ticked(ws, capsys):
    assert ok(capsys, ws, "check", "1", "2") == "task 1: checked 2. migrations run\n"
    assert ok(capsys, ws, "check", "1", "1", "2") == "task 1: checked 1. users table\ntask 1: already checked 2. migrations run\n"
    assert ok(capsys, ws, "uncheck", "1", "1") == "task 1: unchecked 1. users table\n"
    err = refused(capsys, ws, "check", "1", "1", "7")
    assert "no acceptance criterion 7 (the task has 2)" in err


def test_list_status_must_be_a_status(ws, capsys):
    code, out, err = run(capsys, ws, "list", "--status", "done")
    assert code == 2 and "pending" in err and "in_progress" in err and "broken" in err


def test_terminal_escapes_and_bidi_overrides_in_a_title_are_shown_escaped(ws, capsys):
    ok(capsys, ws, "set", "1", "--title", "Evil \x1b]0;pwned\x07 title \u202eabc")
    for args in (("list",), ("show", "1"), ("ready",), ("check", "1", "1")):
        out = ok(capsys, ws, *args)
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out, args
    out = ok(capsys, ws, "list")
    assert "Evil \\x1b]0;pwned\\x07 title \\u202eabc" in out
    data = ok(capsys, ws, "show", "1", "--json")
    assert "\u202e" not in data and "\\u202e" in data
    import json

    assert json.loads(data)["title"] == "Evil \x1b]0;pwned\x07 title \u202eabc", "JSON keeps the value"


def test_task_states_or_recordings_being_a_file(ws, capsys):
    states = ws / TASKS
    shutil.move(states, ws / "states-aside")
    states.write_text("")
    try:
        for args in (("list",), ("ready",), ("new", "More"), ("lint",)):
            err = refused(capsys, ws, *args)
            assert ".specflux/task-states: is a file where specflux keeps a folder; move it away" in err, args
    finally:
        states.unlink()
        shutil.move(ws / "states-aside", states)
    (ws / ".specflux" / "recordings").write_text("")
    err = refused(capsys, ws, "run", "1")
    assert "recordings: is a file where specflux keeps its recordings folder; move it away" in err


def test_wiring_into_a_dependent_hidden_by_an_unclosed_fence_is_reported_not_claimed(ws, capsys):
    path = task_file(ws, "2")
    edit(path, "### Acceptance Criteria", "```\nnever closed\n\n### Acceptance Criteria")
    line = path.read_text().splitlines().index("never closed")  # the fence is the line before
    before = path.read_bytes()
    code, out, err = run(capsys, ws, "complete", "1", "--summary", "Schema done", "--no-commit")
    assert code == 0 and "wired into task 2" not in out
    assert f"task-2-state.md:{line}: the code fence opened here is never closed" in err and "was not wired" in err
    assert path.read_bytes() == before
    code, out, err = run(capsys, ws, "wire", "1")
    assert code == 1 and "task 2 was not wired" in err and path.read_bytes() == before
