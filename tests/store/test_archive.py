"""Archiving (issue #3): sessions leave the state file for the archive verbatim, in order, once.

Every test works on real files in a real git repository. The central check is the invariant: every
session ever written exists, byte for byte, in exactly one of the task-state file and its archive.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import git

from specflux.cli.main import main
from specflux.format.model import SessionInput
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace

BASE_TIME = datetime(2024, 11, 26, 9, 0)
SUMMARY_RE = re.compile(r"^### Archived Summary \(Sessions (\d+)-(\d+)\)[ \t]*\r?$", re.M)

# Session bodies that try to confuse a markdown reader: headings inside fences and comments,
# quotes, nested fences, a fake session heading, and a fake "## 4. Chain Output".
TRICKY = [
    "```python\n## heading inside a fence {tag}\ndef f():\n    return '### Session 999 - not a session'\n```",
    "> quoted line {tag}\n> ## a quoted heading\n>\n> - a quoted bullet",
    "~~~\n# a top heading in a tilde fence {tag}\n## 4. Chain Output\n~~~",
    "````markdown\n```\n### Session 998 - nested fake {tag}\n```\n````",
    "<!-- a comment {tag}\n## 3. Progress Log\n-->",
    "**Note:** a bold label line {tag}",
]
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


# ---------------------------------------------------------------- helpers


def setup_workspace(root: Path, **archive) -> Workspace:
    ws, _ = Workspace.init(root)
    settings = "".join(f"{key} = {value}\n" for key, value in archive.items())
    (ws.dir / "config.toml").write_text("[archive]\n" + settings, encoding="utf-8")
    return Workspace(ws.root)


def stamp(i: int) -> str:
    return (BASE_TIME + timedelta(hours=i)).strftime("%Y-%m-%d %H:%M")


def filler(rng: random.Random, size: int) -> str:
    """About `size` characters of words, wrapped at ~70 columns."""
    out, line, total = [], [], 0
    while total < size:
        word = rng.choice(WORDS)
        line.append(word)
        total += len(word) + 1
        if sum(len(w) + 1 for w in line) > 70:
            out.append(" ".join(line))
            line = []
    if line:
        out.append(" ".join(line))
    return "\n".join(out)


def session_input(n: int, rng: random.Random, size: int) -> SessionInput:
    """A session with distinctive texts whose bodies hold fences, quotes and fake headings."""
    tag = f"S{n:03d}"
    parts = [rng.choice(TRICKY).format(tag=tag) for _ in range(rng.randint(1, 3))]
    issues = f"issue {tag}\n\n" + "\n\n".join(parts) + "\n\n" + filler(rng, size // 2)
    nxt = f"next {tag}\n\n" + filler(rng, size // 2) + f"\n\n> end quote {tag}"
    did = [f"D{n:03d} first bullet", f"D{n:03d} second bullet {rng.choice(WORDS)}"]
    return SessionInput(did=did, issues=issues, next=nxt, timestamp=stamp(n))


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8") if path.is_file() else ""


def newest_entry(text: str, n: int) -> str:
    """The whole entry of session `n`, the newest one, from its heading to its last line."""
    start = text.rindex(f"\n### Session {n} - ") + 1
    end = text.rindex("\n## 4. Chain Output")  # the real one is the last: fakes sit in sessions
    return text[start:end].rstrip("\r\n")


def append(manager: TaskStateManager, task_id: str, n: int, rng: random.Random, size: int, entries: dict[int, str]):
    outcome = manager.append_session(task_id, session_input(n, rng, size))
    assert outcome.session == n
    entries[n] = newest_entry(read(manager.path(task_id)), n)
    assert entries[n].startswith(f"### Session {n} - {stamp(n)}")
    assert f"next S{n:03d}" in entries[n]
    return outcome


def assert_invariant(ws: Workspace, task_id: str, entries: dict[int, str]) -> tuple[list[int], list[int]]:
    """Every session exactly once across the two files; archived ones a prefix, in order."""
    state = read(ws.task_path(task_id))
    archive = read(ws.archive_path(task_id))
    for n, entry in entries.items():
        in_state, in_archive = state.count(entry), archive.count(entry)
        assert in_state + in_archive == 1, f"session {n}: {in_state}x in the state file, {in_archive}x in the archive"
    archived = [n for n in sorted(entries) if entries[n] in archive]
    kept = [n for n in sorted(entries) if entries[n] in state]
    assert archived == list(range(1, len(archived) + 1)), "the oldest sessions are the archived ones"
    positions = [archive.index(entries[n]) for n in archived]
    assert positions == sorted(positions), "archived sessions are in order"
    positions = [state.index(entries[n]) for n in kept]
    assert positions == sorted(positions)
    summaries = SUMMARY_RE.findall(state)
    if archived:
        assert summaries == [("1", str(archived[-1]))]
        assert state.count("### Archived Summary") == 1
    else:
        assert summaries == []
        assert not ws.archive_path(task_id).exists()
    return archived, kept


def summary_fields(state: str) -> dict[str, str]:
    m = SUMMARY_RE.search(state)
    assert m, "no archived summary"
    block = state[m.start() : state.index("\n### Session", m.start())]
    fields = dict(re.findall(r"^\*\*(\w+):\*\* ?(.*?)\r?$", block, re.M))
    fields["link"] = re.search(r"^\[Full details: ([^\]]+)\]", block, re.M).group(1)
    return fields


def session_commits(repo: Path, task_id: str) -> dict[int, str]:
    """Full sha of the commit that recorded each session, read back from git."""
    out = git(repo, "log", "--reverse", "--format=%H%x1f%(trailers:key=Specflux-Task,valueonly)%x1f%(trailers:key=Specflux-Session,valueonly)%x1f%s%x1e")
    found = {}
    for record in out.split("\x1e"):
        if not record.strip():
            continue
        sha, task, session, subject = (x.strip() for x in record.strip("\n").split("\x1f"))
        if task == task_id and session and ": session " in subject:
            found.setdefault(int(session), sha)
    return found


def run(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--root", str(root), *args])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- the invariant


@pytest.mark.parametrize(
    "count, archive_kb, sizes, seed",
    [
        (6, 8, (1500, 2600), 1),
        (21, 12, (200, 2500), 2),
        (40, 16, (100, 3000), 3),
        (100, 20, (50, 3500), 4),
    ],
)
def test_every_session_exactly_once(git_repo, capsys, count, archive_kb, sizes, seed):
    ws = setup_workspace(git_repo, archive_kb=archive_kb, keep_sessions=5)
    manager = TaskStateManager(ws)
    manager.create("Invariant", task_id="7", criteria=["works"])
    rng = random.Random(seed)
    limit = archive_kb * 1024
    entries: dict[int, str] = {}
    archive_before = ""
    archive_runs = 0
    for n in range(1, count + 1):
        outcome = append(manager, "7", n, rng, rng.randint(*sizes), entries)
        archived, kept = assert_invariant(ws, "7", entries)
        assert kept[-1] == n, "the newest session always stays in the state file"
        state = read(ws.task_path("7"))
        assert len(state.encode("utf-8")) <= limit, f"session {n}: the state file is past its limit"
        archive_now = read(ws.archive_path("7"))
        assert archive_now.startswith(archive_before), "the archive is appended to, never rewritten"
        if archive_now != archive_before:
            archive_runs += 1
            assert outcome.archived, "the write that archived says so"
        archive_before = archive_now
        if archived:
            # total_sessions still counts every session ever written
            assert f'"total_sessions": {n}' in state
    assert archive_runs >= 1
    if count >= 21:
        assert archive_runs >= 2, "several archive runs extend one summary"
    # the summary names the commit of every archived session: listed in order, or counted
    archived, _ = assert_invariant(ws, "7", entries)
    commits = session_commits(git_repo, "7")
    text = summary_fields(read(ws.task_path("7")))["Commits"]
    listed = re.findall(r"\b[0-9a-f]{7,}\b", text)
    more = re.search(r"… \((\d+) more\)$", text)
    assert len(listed) + (int(more.group(1)) if more else 0) == len(archived), text
    assert (more is not None) == (len(archived) > 40), "a long list ends in a count"
    if count == 100:
        assert more is not None
    assert all(commits[n].startswith(short) for n, short in zip(archived, listed)), text
    # the whole result is a valid task file: lint finds no errors in it
    code, out, err = run(capsys, git_repo, "lint")
    assert code == 0, err


def force_archive(manager: TaskStateManager, task_id: str) -> list[str]:
    from specflux.store.archive import archive_task

    return archive_task(manager, task_id, force=True).archived


def test_repeated_archive_extends_one_summary(git_repo):
    """Archive twice: Sessions 1-10, then 1-17; the archive file appended; commits listed."""
    ws = setup_workspace(git_repo, archive_kb=1000, keep_sessions=5)
    manager = TaskStateManager(ws)
    manager.create("Extend me", task_id="12")
    rng = random.Random(12)
    entries: dict[int, str] = {}
    for n in range(1, 16):
        assert append(manager, "12", n, rng, 400, entries).archived == []
    assert not ws.archive_path("12").exists(), "under the limit nothing moves by itself"

    assert force_archive(manager, "12") == ["sessions 1-10 -> .specflux/archives/task-12-archive.md"]
    archived, kept = assert_invariant(ws, "12", entries)
    assert archived == list(range(1, 11)) and kept == list(range(11, 16))
    first_archive = read(ws.archive_path("12"))
    fields = summary_fields(read(ws.task_path("12")))
    assert fields["Duration"] == f"{stamp(1)} - {stamp(10)}"
    assert all(f"D{n:03d} first bullet" in fields["Accomplishments"] for n in range(1, 11))
    assert "D011" not in fields["Accomplishments"]
    assert fields["link"] == ".specflux/archives/task-12-archive.md"
    assert (git_repo / fields["link"]).is_file()

    commits = session_commits(git_repo, "12")
    listed = [c.strip() for c in fields["Commits"].split(",")]
    assert len(listed) == 10
    for n, short in zip(range(1, 11), listed):
        assert len(short) >= 7 and commits[n].startswith(short), f"session {n}: {short} is not {commits[n]}"

    for n in range(16, 23):
        append(manager, "12", n, rng, 400, entries)
    assert force_archive(manager, "12") == ["sessions 11-17 -> .specflux/archives/task-12-archive.md"]
    archived, kept = assert_invariant(ws, "12", entries)
    assert archived == list(range(1, 18)) and kept == list(range(18, 23))
    state = read(ws.task_path("12"))
    assert SUMMARY_RE.findall(state) == [("1", "17")]
    second_archive = read(ws.archive_path("12"))
    assert second_archive.startswith(first_archive) and len(second_archive) > len(first_archive)
    fields = summary_fields(state)
    assert fields["Duration"] == f"{stamp(1)} - {stamp(17)}"
    assert all(f"D{n:03d} first bullet" in fields["Accomplishments"] for n in range(1, 18))
    assert "D018" not in fields["Accomplishments"]
    commits = session_commits(git_repo, "12")
    listed = [c.strip() for c in fields["Commits"].split(",")]
    assert len(listed) == 17, listed
    for n, short in zip(range(1, 18), listed):
        assert commits[n].startswith(short), f"session {n}: {short} is not {commits[n]}"

    # the next session is numbered after everything, and the metadata still counts all of them
    append(manager, "12", 23, rng, 400, entries)
    assert '"total_sessions": 23' in read(ws.task_path("12"))
    assert_invariant(ws, "12", entries)


def test_cli_archive_lists_the_commits_of_the_archived_sessions(git_repo, capsys):
    ws = setup_workspace(git_repo, archive_kb=1000, keep_sessions=2)
    manager = TaskStateManager(ws)
    manager.create("Via the CLI", task_id="13")
    for n in range(1, 6):
        code, _, err = run(capsys, git_repo, "session", "13", "--did", f"D{n:03d} step")
        assert code == 0, err
    code, out, err = run(capsys, git_repo, "archive", "13", "--force")
    assert code == 0, err
    assert "1-3" in out
    commits = session_commits(git_repo, "13")
    listed = [c.strip() for c in summary_fields(read(ws.task_path("13")))["Commits"].split(",")]
    assert len(listed) == 3, listed
    for n, short in zip(range(1, 4), listed):
        assert commits[n].startswith(short)


def test_show_json_reads_the_archived_summary_back(git_repo, capsys):
    ws = setup_workspace(git_repo, archive_kb=1000, keep_sessions=2)
    manager = TaskStateManager(ws)
    manager.create("Read back", task_id="14")
    rng = random.Random(14)
    entries: dict[int, str] = {}
    for n in range(1, 6):
        append(manager, "14", n, rng, 200, entries)
    force_archive(manager, "14")
    commits = session_commits(git_repo, "14")
    code, out, err = run(capsys, git_repo, "show", "14", "--json")
    assert code == 0, err
    import json

    summary = json.loads(out)["archived_summary"]
    assert (summary["first"], summary["last"]) == (1, 3)
    assert summary["duration"] == f"{stamp(1)} - {stamp(3)}"
    assert summary["archive"] == ".specflux/archives/task-14-archive.md"
    assert len(summary["commits"]) == 3, summary["commits"]
    assert all(commits[n].startswith(c) for n, c in zip((1, 2, 3), summary["commits"]))


def test_archive_force_and_plain_archive(git_repo, capsys):
    ws = setup_workspace(git_repo, archive_kb=1000, keep_sessions=5)
    manager = TaskStateManager(ws)
    manager.create("Force", task_id="3")
    rng = random.Random(3)
    entries: dict[int, str] = {}
    for n in range(1, 9):
        append(manager, "3", n, rng, 300, entries)
    before = read(ws.task_path("3"))

    code, out, err = run(capsys, git_repo, "archive", "3")
    assert code == 0, err
    assert "nothing to archive" in out
    assert read(ws.task_path("3")) == before and not ws.archive_path("3").exists()

    code, out, err = run(capsys, git_repo, "archive", "3", "--force")
    assert code == 0, err
    archived, kept = assert_invariant(ws, "3", entries)
    assert archived == [1, 2, 3] and kept == [4, 5, 6, 7, 8], "--force keeps the last keep_sessions"
    after_state, after_archive = read(ws.task_path("3")), read(ws.archive_path("3"))

    # nothing left to move: a second --force changes no byte
    code, out, err = run(capsys, git_repo, "archive", "3", "--force")
    assert code == 0, err
    assert "nothing to archive" in out
    assert read(ws.task_path("3")) == after_state
    assert read(ws.archive_path("3")) == after_archive


def test_archive_without_git_lists_no_commits(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    root = tmp_path / "plain"
    root.mkdir()
    ws = setup_workspace(root, archive_kb=6, keep_sessions=2)
    manager = TaskStateManager(ws)
    manager.create("No git", task_id="1")
    rng = random.Random(5)
    entries: dict[int, str] = {}
    for n in range(1, 8):
        append(manager, "1", n, rng, 1200, entries)
    archived, _ = assert_invariant(ws, "1", entries)
    assert archived
    assert summary_fields(read(ws.task_path("1")))["Commits"] == "none"


def test_crlf_file_archives_verbatim(git_repo):
    ws = setup_workspace(git_repo, archive_kb=1000, keep_sessions=2)
    manager = TaskStateManager(ws)
    manager.create("Windows", task_id="W1")
    path = ws.task_path("W1")
    path.write_bytes(read(path).replace("\n", "\r\n").encode("utf-8"))
    rng = random.Random(9)
    entries: dict[int, str] = {}
    for n in range(1, 6):
        append(manager, "W1", n, rng, 300, entries)
        assert "\r\n" in entries[n]
    assert archived_moved(manager, "W1") == "sessions 1-3 -> .specflux/archives/task-W1-archive.md"
    assert_invariant(ws, "W1", entries)
    state = read(path)
    assert re.search(r"(?<!\r)\n", state) is None, "the state file keeps CRLF endings only"
    archive = read(ws.archive_path("W1"))
    assert re.search(r"(?<!\r)\n", archive) is None, "the archive follows the file's CRLF endings"


def archived_moved(manager: TaskStateManager, task_id: str) -> str:
    from specflux.store.archive import archive_task

    outcome = archive_task(manager, task_id, force=True)
    assert len(outcome.archived) == 1
    return outcome.archived[0]


def test_hand_written_progress_notes_survive_archiving(git_repo):
    """Text a person put in the progress log outside any session is never dropped."""
    ws = setup_workspace(git_repo, archive_kb=1000, keep_sessions=2)
    manager = TaskStateManager(ws)
    manager.create("Notes", task_id="5")
    rng = random.Random(1)
    entries: dict[int, str] = {}
    for n in range(1, 4):
        append(manager, "5", n, rng, 200, entries)
    path = ws.task_path("5")
    text = read(path)
    note = "A note from a person, written above the sessions.\n\n"
    text = text.replace("## 3. Progress Log\n\n", "## 3. Progress Log\n\n" + note, 1)
    path.write_text(text, encoding="utf-8")
    archived_moved(manager, "5")
    assert note in read(path)
    # a note inside a session travels with that session, verbatim
    for n in range(4, 7):
        append(manager, "5", n, rng, 200, entries)
    text = read(path)
    noted = entries[4] + "\n\nPS: a hand-written remark on session 4."
    path.write_text(text.replace(entries[4], noted), encoding="utf-8")
    entries[4] = noted
    archived_moved(manager, "5")
    assert_invariant(ws, "5", entries)
    assert note in read(path)
    assert SUMMARY_RE.findall(read(path)) == [("1", "4")]


# ---------------------------------------------------------------- too big to fit


def test_giant_latest_session_stays_in_full_with_a_warning(git_repo, capsys):
    ws = setup_workspace(git_repo, archive_kb=8, keep_sessions=5)
    manager = TaskStateManager(ws)
    manager.create("Giant", task_id="9")
    for n in range(1, 7):
        code, _, err = run(capsys, git_repo, "session", "9", "--did", f"D{n:03d} small", "--issues", f"small issue {n}")
        assert code == 0, err
    giant = "\n".join(f"giant line {i} " + "g" * 80 for i in range(150))  # ~14 KB: past the limit alone
    code, out, err = run(capsys, git_repo, "session", "9", "--did", "D007 the giant", "--issues", giant)
    assert code == 0, err
    state = read(ws.task_path("9"))
    assert giant in state, "the giant session is kept in full"
    assert len(state.encode()) > 8 * 1024
    assert "KB" in err and "9" in err, "a warning names the file and its size"
    assert SUMMARY_RE.findall(state) == [("1", "6")], "everything older moved out"
    archive = read(ws.archive_path("9"))
    assert all(f"D{n:03d} small" in archive for n in range(1, 7))
    assert giant not in archive


def test_giant_session_after_few_sessions_still_moves_the_older_ones(git_repo, capsys):
    """With fewer than keep_sessions sessions, a file past the limit still sheds what it can."""
    ws = setup_workspace(git_repo, archive_kb=8, keep_sessions=5)
    manager = TaskStateManager(ws)
    manager.create("Giant early", task_id="10")
    for n in range(1, 4):
        code, _, err = run(capsys, git_repo, "session", "10", "--did", f"D{n:03d} small", "--issues", "x" * 300)
        assert code == 0, err
    giant = "\n".join(f"giant line {i} " + "g" * 80 for i in range(150))
    code, out, err = run(capsys, git_repo, "session", "10", "--did", "D004 the giant", "--issues", giant)
    assert code == 0, err
    state = read(ws.task_path("10"))
    assert giant in state
    assert SUMMARY_RE.findall(state) == [("1", "3")]
    assert err.strip(), "a warning that the file is still past the limit"


def test_single_giant_session_alone(git_repo, capsys):
    ws = setup_workspace(git_repo, archive_kb=4, keep_sessions=5)
    TaskStateManager(ws).create("Alone", task_id="11")
    giant = "\n".join(f"line {i} " + "z" * 60 for i in range(100))
    code, out, err = run(capsys, git_repo, "session", "11", "--did", "D001 giant", "--issues", giant)
    assert code == 0, err
    assert giant in read(ws.task_path("11"))
    assert not ws.archive_path("11").exists()
    assert "KB" in err and len(err.strip().splitlines()) == 1, "exactly one warning"


def test_archiving_session_commit_holds_the_archive(git_repo, capsys):
    ws = setup_workspace(git_repo, archive_kb=4, keep_sessions=2)
    TaskStateManager(ws).create("Commit both", task_id="4")
    moved = None
    for n in range(1, 12):
        code, out, err = run(capsys, git_repo, "session", "4", "--did", f"D{n:03d} step", "--issues", "i" * 500)
        assert code == 0, err
        if "archived" in out:
            moved = n
            break
    assert moved is not None, "the file passed 4 KB and archived"
    names = git(git_repo, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(names) == [".specflux/archives/task-4-archive.md", ".specflux/task-states/task-4-state.md"]
    assert git(git_repo, "status", "--porcelain", "--", ".specflux/task-states", ".specflux/archives") == ""


# ---------------------------------------------------------------- other writes that grow a file


def test_complete_that_pushes_past_the_limit_archives(git_repo):
    ws = setup_workspace(git_repo, archive_kb=8, keep_sessions=2)
    manager = TaskStateManager(ws)
    manager.create("Grow on complete", task_id="20")
    rng = random.Random(20)
    entries: dict[int, str] = {}
    n = 0
    while len(read(ws.task_path("20")).encode()) < 6 * 1024:
        n += 1
        append(manager, "20", n, rng, 500, entries)
    assert not ws.archive_path("20").exists()
    manager.complete("20", "summary " + "s" * 3000, "downstream " + "d" * 1000)
    assert len(read(ws.task_path("20")).encode()) <= 8 * 1024
    assert_invariant(ws, "20", entries)


def test_wiring_that_pushes_a_downstream_past_the_limit_archives(git_repo):
    ws = setup_workspace(git_repo, archive_kb=8, keep_sessions=2)
    manager = TaskStateManager(ws)
    manager.create("Upstream", task_id="30")
    manager.create("Downstream", task_id="31", dependencies=["30"])
    rng = random.Random(31)
    entries: dict[int, str] = {}
    n = 0
    while len(read(ws.task_path("31")).encode()) < 6 * 1024:
        n += 1
        append(manager, "31", n, rng, 500, entries)
    assert not ws.archive_path("31").exists()
    manager.complete("30", "summary " + "s" * 3000, "downstream " + "d" * 1000)
    state = read(ws.task_path("31"))
    assert "### From Task #30: Upstream" in state
    assert len(state.encode()) <= 8 * 1024
    assert_invariant(ws, "31", entries)
    names = git(git_repo, "show", "--name-only", "--format=", "HEAD").split()
    assert ".specflux/archives/task-31-archive.md" in names


# ---------------------------------------------------------------- list and lint warnings


def grow(manager: TaskStateManager, task_id: str, sessions: int, size: int) -> None:
    rng = random.Random(sessions * 1000 + size)
    for n in range(1, sessions + 1):
        manager.append_session(task_id, session_input(n, rng, size), commit=False)


def test_list_and_lint_warn_past_50_kb_and_20_sessions(git_repo, capsys):
    ws = setup_workspace(git_repo, warn_kb=50, archive_kb=75, keep_sessions=5, suggest_split_sessions=20)
    manager = TaskStateManager(ws, git=False)
    for task_id, title in (("1", "Big and long"), ("2", "Big only"), ("3", "Long only"), ("4", "Fine")):
        manager.create(title, task_id=task_id)
    grow(manager, "1", 21, 2500)  # > 50 KB and > 20 sessions
    grow(manager, "2", 5, 11000)  # > 50 KB, 5 sessions
    grow(manager, "3", 21, 100)   # small, 21 sessions
    grow(manager, "4", 20, 2000)  # < 50 KB, exactly 20 sessions: no warning
    sizes = {t: ws.task_path(t).stat().st_size for t in "1234"}
    assert sizes["1"] > 51200 and sizes["2"] > 51200 and sizes["3"] < 51200 and 40000 < sizes["4"] < 51200
    assert sizes["1"] < 75 * 1024 and sizes["2"] < 75 * 1024, "no archiving below 75 KB"
    assert not any(ws.archive_path(t).exists() for t in "1234")

    code, out, err = run(capsys, git_repo, "list", "--json")
    assert code == 0, err
    import json

    rows = {r["id"]: r for r in json.loads(out)}

    def kinds(warnings):
        return sorted(("size" if "50 KB" in w else "split" if "split" in w else w) for w in warnings)

    assert kinds(rows["1"]["warnings"]) == ["size", "split"]
    assert kinds(rows["2"]["warnings"]) == ["size"]
    assert kinds(rows["3"]["warnings"]) == ["split"]
    assert rows["4"]["warnings"] == []

    code, out, err = run(capsys, git_repo, "list")
    assert code == 0, err
    lines = out.splitlines()
    for task_id, expected in (("1", ["size", "split"]), ("2", ["size"]), ("3", ["split"]), ("4", [])):
        notes = [ln for ln in lines if ln.startswith(f"! {task_id}:")]
        assert kinds(notes) == expected, (task_id, notes)

    code, out, err = run(capsys, git_repo, "lint")
    assert code == 0, err + out
    for task_id, expected in (("1", ["size", "split"]), ("2", ["size"]), ("3", ["split"]), ("4", [])):
        notes = [ln for ln in out.splitlines() if f"task-{task_id}-state.md" in ln and "warning" in ln]
        assert kinds(notes) == expected, (task_id, notes)


# ---------------------------------------------------------------- a hand-written file


def test_seed_example_archives_verbatim_and_leaves_the_rest(git_repo, capsys):
    """The seed's Example C (inline **Did:** fields, written by hand) archived with --force."""
    seed = Path(__file__).parent.parent / "fixtures" / "seed-example-c.md"
    ws = setup_workspace(git_repo, keep_sessions=2)
    original = seed.read_text(encoding="utf-8")
    ws.states_dir.mkdir(parents=True, exist_ok=True)
    ws.task_path("101").write_text(original, encoding="utf-8")
    heads = [m.start() for m in re.finditer(r"^### Session \d+ ", original, re.M)]
    log_end = original.index("\n## 4. Chain Output")
    entries = {
        n: original[start : (heads + [log_end])[n]].rstrip("\n") for n, start in enumerate(heads, start=1)
    }
    assert len(entries) == 5

    code, out, err = run(capsys, git_repo, "archive", "--force")
    assert code == 0, err
    assert "task 101" in out and "1-3" in out
    archived, kept = assert_invariant(ws, "101", entries)
    assert (archived, kept) == ([1, 2, 3], [4, 5])
    state = read(ws.task_path("101"))
    progress = original.index("## 3. Progress Log")
    assert state.startswith(original[: progress + len("## 3. Progress Log\n")]), "nothing above the log changes"
    assert state.endswith(original[heads[3] :]), "the kept sessions and the chain output are untouched"
    fields = summary_fields(state)
    assert fields["Duration"] == "2024-11-26 10:00 - 2024-11-26 12:00"
    assert fields["Accomplishments"].startswith("Set up project structure, added jsonwebtoken dependency; Fixed types")
    code, out, err = run(capsys, git_repo, "lint", str(ws.task_path("101")))
    assert code == 0, err
