"""`specflux context ID`: what an agent session receives (protocol, rules, task file with chain
inputs embedded, links), its token estimate, and that it stays bounded however long a task runs;
and the form written for agent CLIs, which edit the task file themselves."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from specflux.agent.context import COMMAND_PROTOCOL, COMMAND_SYSTEM, SYSTEM, build_context
from specflux.cli.main import main
from specflux.format.model import SessionInput
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace

UPSTREAM_SUMMARY = "UPSTREAM-SUMMARY: tokens are signed with HS256 by jwt.sign(user_id)."
UPSTREAM_DOWNSTREAM = "Import: from auth.jwt import sign, verify"


def cli(capsys, root: Path, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--root", str(root), *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def manager(tmp_path: Path) -> TaskStateManager:
    ws, _ = Workspace.init(tmp_path / "ws")
    return TaskStateManager(ws, git=False)


def complete_by_hand(manager: TaskStateManager, task_id: str) -> None:
    """Complete a task the way a person editing the file would: no wiring happens."""
    path = manager.path(task_id)
    text = path.read_text()
    assert '"status": "pending"' in text and "(To be completed)" in text
    text = text.replace('"status": "pending"', '"status": "complete"').replace(
        "(To be completed)", f"### Summary\n{UPSTREAM_SUMMARY}\n\n### For Downstream Tasks\n{UPSTREAM_DOWNSTREAM}")
    path.write_text(text)


def test_context_holds_protocol_rules_task_file_and_unwired_chain_inputs(manager, capsys):
    root = manager.ws.root
    manager.create("JWT service", task_id="201", requirements="Sign and verify tokens.", criteria=["sign works"])
    manager.create("login endpoint", task_id="202", dependencies=["201"],
                   requirements="POST /login returns a token. See the [PRD](../../docs/prd.md).",
                   criteria=["valid credentials give a token", "bad ones give 401"])
    complete_by_hand(manager, "201")
    downstream_file = manager.path("202")
    on_disk = downstream_file.read_bytes()
    assert UPSTREAM_SUMMARY.encode() not in on_disk  # not wired: the file still waits for #201

    code, out, err = cli(capsys, root, "context", "202")

    assert code == 0, err
    # The protocol and the rules of the seed's section 4.
    for line in ("## Session Protocol", "### Phase 1: Orientation", "Pick ONE unchecked criterion to work on",
                 "If all criteria are checked", "## Rules", "DO NOT suggest changes. IMPLEMENT them.",
                 "DO NOT add features beyond acceptance criteria.", "DO NOT assume file contents - read first.",
                 "DO check off criteria only after testing.", "DO keep solutions simple and direct."):
        assert line in out, line
    assert out.startswith(SYSTEM)
    # The task file, with the upstream's chain output embedded although nothing was wired yet.
    assert "# Task #202: login endpoint" in out
    assert "POST /login returns a token." in out
    assert "- [ ] valid credentials give a token" in out and "- [ ] bad ones give 401" in out
    assert "### From Task #201: JWT service" in out
    assert UPSTREAM_SUMMARY in out and UPSTREAM_DOWNSTREAM in out
    assert "Filled in when #201" not in out
    assert ".specflux/task-states/task-202-state.md" in out
    # Links: the upstream's full output, and the PRD named in the task, as repository paths.
    assert "- `.specflux/task-states/task-201-state.md`:" in out
    assert "- `docs/prd.md`: PRD" in out
    # The estimate goes to stderr, never into what an agent would be given.
    found = re.search(r"~(\d+) tokens", err)
    assert found, err
    assert abs(int(found.group(1)) - len(out) / 3.5) <= 4
    assert "tokens" not in out.splitlines()[-1]
    # Reading the context changes nothing.
    assert downstream_file.read_bytes() == on_disk

    code, out_json, err = cli(capsys, root, "context", "202", "--json")
    assert code == 0, err
    data = json.loads(out_json)
    assert data["system"] == SYSTEM
    assert data["context"] == out[len(SYSTEM) + 2:].rstrip("\n")
    assert data["tokens"] == int(found.group(1))
    assert data["links"] == [".specflux/task-states/task-201-state.md", "docs/prd.md"]


def test_context_of_an_unknown_task_is_a_clear_error(manager, capsys):
    code, out, err = cli(capsys, manager.ws.root, "context", "404")
    assert code == 1
    assert "no task 404" in err and "Traceback" not in err
    assert out == ""


SESSIONS = 100


def session(n: int) -> SessionInput:
    """About 1.5 KB: three did bullets and a long issues paragraph, each with a unique marker."""
    filler = f"marker-{n:03d} " + "the parser keeps every byte of what people wrote, " * 24
    return SessionInput(did=[f"did-{n:03d} step one", f"did-{n:03d} step two", f"did-{n:03d} step three"],
                        issues=filler.strip(), next=f"next-{n:03d}: carry on", timestamp=f"2026-01-01 {n // 60:02d}:{n % 60:02d}")


def test_context_stays_bounded_however_many_sessions_and_links_the_archive(manager, capsys):
    root, ws = manager.ws.root, manager.ws
    assert ws.config.archive.archive_kb == 75  # the default configuration
    manager.create("long-running task", task_id="301", requirements="Keep going.", criteria=["done"])
    block_sizes = []
    for n in range(1, SESSIONS + 1):
        before = len(manager.path("301").read_bytes())
        manager.append_session("301", session(n), commit=False)
        block_sizes.append(len(manager.path("301").read_bytes()) - before)
    one_session = max(len(session(n).issues) for n in range(1, SESSIONS + 1)) + 200
    assert 1400 <= one_session <= 1700  # ~1.5 KB each, as intended

    task_size = len(manager.path("301").read_bytes())
    assert task_size <= 75 * 1024 + one_session
    archive = ws.archive_path("301")
    assert archive.is_file()
    archived_text = archive.read_text()
    assert "marker-001" in archived_text

    code, out, err = cli(capsys, root, "context", "301")

    assert code == 0, err
    assert len(out) <= task_size + len(SYSTEM) + 2048
    assert "- `.specflux/archives/task-301-archive.md`: sessions 1-" in out
    assert "### Archived Summary" in out
    # The latest sessions are embedded in full; the oldest are only in the (linked) archive.
    assert f"marker-{SESSIONS:03d}" in out and f"next-{SESSIONS:03d}" in out
    assert "marker-001" not in out
    ctx = build_context(manager, "301")
    assert ctx.tokens == math.ceil(len(ctx.system) / 3.5) + math.ceil(len(ctx.user) / 3.5)
    assert ".specflux/archives/task-301-archive.md" in ctx.links
    # Every session is somewhere: in the task file, or in the archive.
    state = manager.read("301")
    summary = state.archived_summary
    assert summary is not None and summary.first == 1
    assert [s.number for s in state.sessions] == list(range(summary.last + 1, SESSIONS + 1))
    for n in range(1, summary.last + 1):
        assert f"marker-{n:03d}" in archived_text


# -- the form for agent CLIs ----------------------------------------------------------------------

TOOL_NAMES = ("read_file", "list_files", "write_file", "edit_file", "run_command", "check_criterion", "end_session")


def two_linked_tasks(manager: TaskStateManager) -> None:
    manager.create("JWT service", task_id="201", requirements="Sign and verify tokens.", criteria=["sign works"])
    manager.create("login endpoint", task_id="202", dependencies=["201"],
                   requirements="POST /login returns a token. See the [PRD](../../docs/prd.md).",
                   criteria=["valid credentials give a token", "bad ones give 401"])
    complete_by_hand(manager, "201")


def test_the_command_form_tells_a_cli_to_edit_the_task_file_itself(manager):
    two_linked_tasks(manager)
    manager.append_session("202", SessionInput(did=["started"], timestamp="2026-01-01 10:00"), commit=False)
    tools, command = build_context(manager, "202"), build_context(manager, "202", form="command")

    assert tools.system == SYSTEM and command.system == COMMAND_SYSTEM
    for name in TOOL_NAMES:  # tools it does not have under those names
        assert name not in command.system and name not in command.user, name
    for needed in ("$SPECFLUX_TASK_FILE", "$SPECFLUX_TASK_ID", "`git status`", "Pick ONE unchecked criterion",
                   "`- [ ]` becomes `- [x]`", "specflux check $SPECFLUX_TASK_ID N",
                   "at the end of `## 3. Progress Log`", "### Session N - YYYY-MM-DD HH:MM",
                   "**Did:**", "**Issues:**", "**Next:**", "specflux session $SPECFLUX_TASK_ID --did",
                   "## 4. Chain Output", "### Summary", "### For Downstream Tasks",
                   "specflux complete $SPECFLUX_TASK_ID --summary", "DO NOT commit",
                   "DO NOT edit other tasks' files", "DO check off criteria only after testing."):
        assert needed in command.system, needed
    assert command.system.count("--no-commit") == 2
    # The same task state and links; the path and the session number to write are given.
    assert "The task-state file is `.specflux/task-states/task-202-state.md`; this is session 2." in command.user
    state = tools.user[tools.user.index("<task-state>"):tools.user.index("</task-state>")]
    assert state in command.user and UPSTREAM_SUMMARY in state
    assert command.links == tools.links == [".specflux/task-states/task-201-state.md", "docs/prd.md"]
    assert command.user.endswith(
        "Read these only when you need them:\n"
        "- `.specflux/task-states/task-201-state.md`: task #201's full chain output (section 4)\n"
        "- `docs/prd.md`: PRD")
    assert command.tokens < tools.tokens + 250  # compact


def test_a_session_written_as_the_command_form_shows_is_a_valid_one(manager):
    """An agent that follows the protocol to the letter leaves a file that specflux reads and lints clean."""
    from specflux.store.lint import lint_document

    manager.create("one thing", task_id="7", requirements="Do it.", criteria=["done"])
    ctx = build_context(manager, "7", form="command")
    assert "this is session 1." in ctx.user
    example = COMMAND_PROTOCOL.split("numbered as given below:\n\n", 1)[1].split("\n\n   (or run", 1)[0]
    entry = "\n".join(line[3:] for line in example.split("\n")).replace("Session N - YYYY-MM-DD HH:MM",
                                                                           "Session 1 - 2026-02-03 04:05")
    path = manager.path("7")
    text = path.read_text().replace("- [ ] done", "- [x] done")
    text = text.replace("(No sessions yet)", entry)
    text = text.replace("(To be completed)", "### Summary\nIt is done.\n\n### For Downstream Tasks\nNone")
    path.write_text(text)

    doc = manager.load("7")
    assert [p for p in lint_document(doc, "7", manager.ws.config.archive)
            if p.severity == "error" and "total_sessions" not in p.message] == []
    state = manager.read("7")
    assert [(s.number, s.did) for s in state.sessions] == [(1, ["one bullet per item"])]
    assert not doc.chain_output_is_placeholder and all(item[2] for item in doc.criteria_lines)


def test_an_unknown_form_is_a_programming_error(manager):
    manager.create("one thing", task_id="7", requirements="Do it.", criteria=["done"])
    with pytest.raises(ValueError, match="unknown context form 'cli'"):
        build_context(manager, "7", form="cli")
