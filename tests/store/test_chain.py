"""Chain wiring and the dependency graph (issue #3), on real files through the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import git

from helpers import ok, run
from specflux.store.workspace import Workspace

TITLES = {"1": "Database schema", "2": "Auth API", "3": "Login UI", "4": "End-to-end tests"}
DEPS = {"1": [], "2": ["1"], "3": ["1"], "4": ["2", "3"]}
SUMMARY = {
    "1": "Users table: id (UUID), email (unique), password_hash",
    "2": "POST /auth/login returns a JWT\nPOST /auth/logout revokes it",
    "3": "Login form at /login, posts to /auth/login",
    "4": "Playwright suite covering login and logout",
}
DOWNSTREAM = {"1": "Import `User` from models.user", "2": "Send `Authorization: Bearer <jwt>`", "3": "None", "4": ""}


# ---------------------------------------------------------------- helpers




def path(root: Path, task_id: str) -> Path:
    return root / ".specflux" / "task-states" / f"task-{task_id}-state.md"


def read(root: Path, task_id: str) -> bytes:
    return path(root, task_id).read_bytes()


def text(root: Path, task_id: str) -> str:
    return read(root, task_id).decode("utf-8")


def snapshot(root: Path) -> dict[str, bytes]:
    folder = root / ".specflux"
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.md")}


def ready(capsys, root: Path) -> list[str]:
    return [row["id"] for row in json.loads(ok(capsys, root, "ready", "--json"))]


def section(doc: str, number: int) -> str:
    """The text of `## <number>. ...` up to the next level-2 heading."""
    m = re.search(rf"^## {number}\. .*$", doc, re.M)
    assert m, f"no section {number}"
    nxt = re.search(r"^## ", doc[m.end() :], re.M)
    return doc[m.start() : m.end() + nxt.start()] if nxt else doc[m.start() :]


def from_task(doc: str, upstream: str) -> list[str]:
    return re.findall(rf"^### From Task #{re.escape(upstream)}: (.*)$", doc, re.M)


def quote_of(doc: str, upstream: str) -> str:
    """The `> ` quote under `### From Task #upstream`, unquoted."""
    m = re.search(rf"^### From Task #{re.escape(upstream)}: .*\n((?:>.*\n)+)", doc, re.M)
    assert m, f"no quote from task {upstream}"
    return "\n".join(re.sub(r"^> ?", "", ln) for ln in m.group(1).splitlines())


def insertion_only(before: str, after: str) -> str:
    """`after` is `before` with one block inserted somewhere: return that block (else fail).

    Where the block repeats the text around it, its bounds are only known up to that repetition.
    """
    p = 0
    while p < len(before) and p < len(after) and before[p] == after[p]:
        p += 1
    q = 0
    while q < len(before) - p and before[len(before) - 1 - q] == after[len(after) - 1 - q]:
        q += 1
    assert p + q == len(before), "text other than the inserted block changed"
    return after[p : len(after) - q]


def make_diamond(capsys, root: Path) -> None:
    for task_id in ("1", "2", "3", "4"):
        deps = [a for d in DEPS[task_id] for a in ("--dep", d)]
        assert ok(capsys, root, "new", TITLES[task_id], "--id", task_id, *deps, "--ac", "works").strip() == task_id


def complete(capsys, root: Path, task_id: str, summary: str | None = None, downstream: str | None = None) -> str:
    args = ["complete", task_id, "--summary", summary or SUMMARY[task_id]]
    down = DOWNSTREAM[task_id] if downstream is None else downstream
    if down:
        args += ["--downstream", down]
    return ok(capsys, root, *args)


@pytest.fixture
def repo(git_repo: Path) -> Path:
    Workspace.init(git_repo)
    return git_repo


# ---------------------------------------------------------------- the diamond


def test_diamond_wires_step_by_step(repo, capsys):
    make_diamond(capsys, repo)
    assert ready(capsys, repo) == ["1"]
    assert all(from_task(text(repo, t), "1") == [] for t in "234")

    before_d = read(repo, "4")
    out = complete(capsys, repo, "1")
    assert "wired into task 2" in out and "wired into task 3" in out and "task 4" not in out
    a = text(repo, "1")
    assert '"status": "complete"' in a
    out_section = section(a, 4)
    assert "### Summary\n" + SUMMARY["1"] in out_section
    assert "### For Downstream Tasks\n" + DOWNSTREAM["1"] in out_section
    assert "(To be completed)" not in a
    for t in ("2", "3"):
        doc = text(repo, t)
        assert from_task(doc, "1") == [TITLES["1"]]
        assert "### From Task #1" in section(doc, 2), "the input lives in section 2"
        assert quote_of(doc, "1") == SUMMARY["1"] + "\n\n" + DOWNSTREAM["1"]
        assert "[Full chain output](task-1-state.md#4-chain-output)" in section(doc, 2)
    assert read(repo, "4") == before_d, "D does not depend on A directly"
    assert ready(capsys, repo) == ["2", "3"]

    complete(capsys, repo, "2")
    d = text(repo, "4")
    assert from_task(d, "2") == [TITLES["2"]] and from_task(d, "3") == []
    assert quote_of(d, "2") == SUMMARY["2"] + "\n\n" + DOWNSTREAM["2"]
    assert ready(capsys, repo) == ["3"]

    complete(capsys, repo, "3")
    d = text(repo, "4")
    assert from_task(d, "2") == [TITLES["2"]] and from_task(d, "3") == [TITLES["3"]]
    assert quote_of(d, "3") == SUMMARY["3"], "a 'None' downstream note adds nothing to the quote"
    assert d.index("### From Task #2") < d.index("### From Task #3") < d.index("## 3. Progress Log")
    assert from_task(d, "1") == [], "only direct dependencies are wired"
    assert ready(capsys, repo) == ["4"]

    shown = json.loads(ok(capsys, repo, "show", "4", "--json"))
    assert [(c["task_id"], c["title"]) for c in shown["chain_inputs"]] == [("2", TITLES["2"]), ("3", TITLES["3"])]
    assert SUMMARY["2"] in shown["chain_inputs"][0]["body"]

    complete(capsys, repo, "4")
    assert ready(capsys, repo) == []
    assert "no task is ready" in ok(capsys, repo, "ready")


def test_complete_and_wire_are_idempotent(repo, capsys):
    make_diamond(capsys, repo)
    complete(capsys, repo, "1")
    complete(capsys, repo, "2")
    files = snapshot(repo)
    head = git(repo, "rev-parse", "HEAD")

    complete(capsys, repo, "1")
    complete(capsys, repo, "2")
    assert snapshot(repo) == files, "completing again with the same output changes no byte"
    assert git(repo, "rev-parse", "HEAD") == head, "and makes no commit"

    assert "up to date" in ok(capsys, repo, "wire", "1")
    assert "up to date" in ok(capsys, repo, "wire")
    assert snapshot(repo) == files


def test_created_after_upstream_completes_is_wired_at_once(repo, capsys):
    ok(capsys, repo, "new", TITLES["1"], "--id", "1")
    complete(capsys, repo, "1")
    ok(capsys, repo, "new", "Late", "--id", "9", "--dep", "1")
    doc = text(repo, "9")
    assert from_task(doc, "1") == [TITLES["1"]]
    assert quote_of(doc, "1") == SUMMARY["1"] + "\n\n" + DOWNSTREAM["1"]


# ---------------------------------------------------------------- refreshing


def test_changed_upstream_output_replaces_only_its_subsection(repo, capsys):
    make_diamond(capsys, repo)
    for t in ("1", "2", "3"):
        complete(capsys, repo, t)
    b_before, d_before = text(repo, "2"), text(repo, "4")

    # a person edits A's chain output by hand, then asks for a refresh
    a = text(repo, "1")
    path(repo, "1").write_text(a.replace(SUMMARY["1"], "Users table now has a `role` column"), encoding="utf-8")
    out = ok(capsys, repo, "wire", "1")
    assert "task-2-state.md" in out and "task-3-state.md" in out
    b_after = text(repo, "2")
    assert b_after != b_before
    start = b_before.index("### From Task #1")
    stop = b_before.index("[Full chain output](task-1-state.md")
    assert b_after[:start] == b_before[:start], "every byte before A's subsection is unchanged"
    assert b_after.endswith(b_before[stop:]), "every byte from its link line on is unchanged"
    assert quote_of(b_after, "1") == "Users table now has a `role` column\n\n" + DOWNSTREAM["1"]
    assert read(repo, "4").decode() == d_before, "D does not depend on A"

    # B's output changes: in D only B's subsection changes, C's stays byte for byte
    b = text(repo, "2")
    path(repo, "2").write_text(b.replace("POST /auth/logout revokes it", "POST /auth/logout revokes both tokens"), encoding="utf-8")
    ok(capsys, repo, "wire", "2")
    d_after = text(repo, "4")
    start = d_before.index("### From Task #2")
    stop = d_before.index("[Full chain output](task-2-state.md")
    assert d_after[:start] == d_before[:start]
    assert d_after.endswith(d_before[stop:]), "C's subsection and the rest of D are untouched"
    assert "POST /auth/logout revokes both tokens" in quote_of(d_after, "2")

    # completing A again with a new output refreshes, never stacks
    complete(capsys, repo, "1", summary="Users and roles tables")
    assert from_task(text(repo, "2"), "1") == [TITLES["1"]]
    assert quote_of(text(repo, "2"), "1") == "Users and roles tables\n\n" + DOWNSTREAM["1"]


def test_hand_edits_in_the_downstream_survive_wiring(repo, capsys):
    ok(capsys, repo, "new", TITLES["1"], "--id", "1")
    ok(capsys, repo, "new", TITLES["2"], "--id", "2", "--dep", "1", "--ac", "login works")
    b = text(repo, "2")
    context_note = "Ana: keep the API surface small; no admin endpoints yet.\n"
    section2_note = "Remember to ask the DB team about rate limits.\n"
    unknown = "## Design Sketch\n\n```text\n## not a heading\n```\n\n<!-- a reviewer comment -->\n\n"
    b = b.replace("### Requirements", context_note + "\n### Requirements", 1)
    b = re.sub(r"\(Filled in when #1 completes?\)\n", section2_note, b, count=1)
    b = b.replace("## 3. Progress Log", unknown + "## 3. Progress Log", 1)
    b += "\n## 9. Reviewer Notes\n\nTrailing notes   \n"
    path(repo, "2").write_text(b, encoding="utf-8")

    complete(capsys, repo, "1")
    wired = text(repo, "2")
    block = insertion_only(b, wired)
    assert "From Task #1" in block and "Users table" in block and len(block) < 250
    assert from_task(wired, "1") == [TITLES["1"]]
    assert wired.index(section2_note) < wired.index("### From Task #1") < wired.index("## Design Sketch")

    # notes below the wired subsection, then the upstream output changes
    below = "\nAna: the email column is case-insensitive, see #12.\n"
    link = "[Full chain output](task-1-state.md#4-chain-output)\n"
    edited = wired.replace(link, link + below, 1)
    path(repo, "2").write_text(edited, encoding="utf-8")
    complete(capsys, repo, "1", summary="Users table with a role column")
    after = text(repo, "2")
    for chunk in (context_note, section2_note, unknown, "## 9. Reviewer Notes\n\nTrailing notes   \n", below):
        assert after.count(chunk) == 1, f"lost or duplicated: {chunk!r}"
    assert after.replace("Users table with a role column", SUMMARY["1"]) == edited
    assert after.count("[Full chain output]") == 1


def test_note_between_quote_and_link_is_kept_and_the_link_not_doubled(repo, capsys):
    ok(capsys, repo, "new", TITLES["1"], "--id", "1")
    ok(capsys, repo, "new", TITLES["2"], "--id", "2", "--dep", "1")
    complete(capsys, repo, "1")
    note = "Ana: we agreed to keep ids as UUID strings.\n\n"
    link = "[Full chain output](task-1-state.md#4-chain-output)"
    edited = text(repo, "2").replace(link, note + link, 1)
    path(repo, "2").write_text(edited, encoding="utf-8")
    complete(capsys, repo, "1", summary="Users table, ids are UUID strings")
    after = text(repo, "2")
    assert after.count(note) == 1
    assert after.count("[Full chain output]") == 1, "the link is refreshed where it stands, not added again"
    assert after.replace("Users table, ids are UUID strings", SUMMARY["1"]) == edited
    assert "up to date" in ok(capsys, repo, "wire", "1")


def test_wiring_keeps_crlf_line_endings(repo, capsys):
    ok(capsys, repo, "new", TITLES["1"], "--id", "1")
    ok(capsys, repo, "new", TITLES["2"], "--id", "2", "--dep", "1")
    crlf = read(repo, "2").replace(b"\n", b"\r\n")
    path(repo, "2").write_bytes(crlf)
    complete(capsys, repo, "1")
    after = read(repo, "2")
    assert re.search(rb"(?<!\r)\n", after) is None, "only CRLF endings"
    assert b"### From Task #1: " + TITLES["1"].encode() + b"\r\n> " in after
    complete(capsys, repo, "1", summary="changed\nover two lines")
    again = read(repo, "2")
    assert re.search(rb"(?<!\r)\n", again) is None
    assert b"> changed\r\n> over two lines\r\n" in again
    assert again.replace(b"> changed\r\n> over two lines", b"> " + SUMMARY["1"].encode()) == after


@pytest.mark.parametrize("numbered", [True, False])
def test_section_2_is_created_between_1_and_3(repo, capsys, numbered):
    ok(capsys, repo, "new", TITLES["1"], "--id", "1")
    n = (lambda k: f"{k}. ") if numbered else (lambda k: "")
    hand = (
        "# Task #7: Written by hand\n\n"
        f"## {n(0)}Metadata\n```json\n{{\n  \"task_id\": 7,\n  \"status\": \"pending\",\n  \"dependencies\": [1],\n  \"total_sessions\": 0\n}}\n```\n\n"
        f"## {n(1)}Context\n\n### Requirements\nBuild on task 1.\n\n### Acceptance Criteria\n- [ ] it works\n\n"
        f"## {n(3)}Progress Log\n\n(No sessions yet)\n\n"
        f"## {n(4)}Chain Output\n\n(To be completed)\n"
    )
    path(repo, "7").write_text(hand, encoding="utf-8")
    out = complete(capsys, repo, "1")
    assert "wired into task 7" in out
    after = text(repo, "7")
    block = insertion_only(hand, after)
    heading = f"## {n(2)}Chain Inputs"
    assert "Chain Inputs" in block and "From Task #1" in block and len(block) < 250
    assert re.search(rf"^{heading}$", after, re.M)
    assert after.index(f"## {n(1)}Context") < after.index(heading) < after.index(f"## {n(3)}Progress Log")
    assert after.index("### From Task #1") > after.index(heading)
    assert "\n\n\n" not in after, "no run of blank lines around the new section"
    assert quote_of(after, "1") == SUMMARY["1"] + "\n\n" + DOWNSTREAM["1"]
    # and wiring again finds the section it made
    assert "up to date" in ok(capsys, repo, "wire", "1")


# ---------------------------------------------------------------- the graph


def test_ready_order_is_dependency_then_natural_order(repo, capsys):
    for task_id, title, deps in (("10", "Ten", []), ("2", "Two", []), ("T1", "Slug", ["2"]), ("3", "Three", ["T1", "10"])):
        ok(capsys, repo, "new", title, "--id", task_id, *[a for d in deps for a in ("--dep", d)])
    assert ready(capsys, repo) == ["2", "10"], "2 before 10: natural order, not string order"
    complete(capsys, repo, "2", summary="two done", downstream="")
    assert ready(capsys, repo) == ["10", "T1"]
    complete(capsys, repo, "10", summary="ten done", downstream="")
    assert ready(capsys, repo) == ["T1"]
    complete(capsys, repo, "T1", summary="slug done", downstream="")
    assert ready(capsys, repo) == ["3"]
    rows = json.loads(ok(capsys, repo, "ready", "--json"))
    assert rows[0]["dependencies"] == ["T1", "10"] and rows[0]["title"] == "Three"


def test_cycle_is_an_error_naming_the_tasks(repo, capsys):
    ok(capsys, repo, "new", "Free", "--id", "w")
    ok(capsys, repo, "new", "Ex", "--id", "x", "--dep", "y", "--force")
    ok(capsys, repo, "new", "Why", "--id", "y", "--dep", "z", "--force")
    ok(capsys, repo, "new", "Zed", "--id", "z", "--dep", "x")
    files = snapshot(repo)
    for command in ("ready", "graph"):
        code, out, err = run(capsys, repo, command)
        assert code == 1, f"{command}: {out}{err}"
        assert "cycle" in err
        assert re.search(r"\bx\b", err) and re.search(r"\by\b", err) and re.search(r"\bz\b", err), err
        assert not re.search(r"\bw\b", err), "a task outside the cycle is not blamed"
        assert "Traceback" not in err
    code, out, err = run(capsys, repo, "lint")
    assert code == 1 and "cycle" in err
    assert snapshot(repo) == files


def test_unknown_dependency_is_an_error_naming_both(repo, capsys):
    ok(capsys, repo, "new", "Orphan", "--id", "T5", "--dep", "ghost", "--force")
    ok(capsys, repo, "new", "Fine", "--id", "6")
    for command in ("ready", "graph"):
        code, out, err = run(capsys, repo, command)
        assert code == 1, f"{command}: {out}{err}"
        assert "T5" in err and "ghost" in err, err
        assert "Traceback" not in err
    code, out, err = run(capsys, repo, "wire")
    assert code == 1 and "ghost" in err


def test_graph_is_a_mermaid_flowchart_with_every_edge(repo, capsys):
    make_diamond(capsys, repo)
    complete(capsys, repo, "1")
    out = ok(capsys, repo, "graph")
    lines = out.strip().splitlines()
    assert lines[0].startswith("flowchart")
    edges = sorted(re.findall(r"^\s*(\w+)\s*-->\s*(\w+)\s*$", out, re.M))
    assert edges == sorted([("t_1", "t_2"), ("t_1", "t_3"), ("t_2", "t_4"), ("t_3", "t_4")])
    for task_id, title in TITLES.items():
        node = next(ln for ln in lines if re.match(rf"\s*t_{task_id}\[", ln))
        assert title in node
    assert re.search(r"t_1\[.*complete", out) and re.search(r"t_2\[.*pending", out)


def test_a_chain_of_thousands_of_tasks_is_checked_without_recursion(tmp_path):
    """Each task depends on the next higher id: the search for cycles goes 3,000 deep."""
    from specflux.store.chain import Graph

    graph = Graph.__new__(Graph)
    n = 3000
    graph.deps = {str(i): ([str(i + 1)] if i < n else []) for i in range(1, n + 1)}
    assert graph.cycles() == []
    graph.deps[str(n)] = ["1"]  # and closed into one ring
    (ring,) = graph.cycles()
    assert len(ring) == n and ring[0] == "1"
