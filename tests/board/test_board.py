"""`specflux board`: the page in a real headless Chromium (every task in its column, the graph, a
task's full state and history, a workflow run, hostile task text shown as text, nothing fetched
from anywhere), the data against the library's own readers, and `--serve` refreshing a live page.

The browser tests skip, saying why, where playwright or a `chromium` binary is missing (`.ci/run`
installs chromium when it runs as root)."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from conftest import git
from patience import patience

from tests.board.browser_kit import browser  # noqa: F401  (a fixture)

from specflux.board.page import embed, gather, histories, layout, render
from specflux.store.chain import Graph
from specflux.cli.main import main
from specflux.store.history import task_history
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_flow_agent.py"
XSS = "<script>alert(1)</script>"
IMG = '<img src=x onerror="window.__pwned = 1"> signed tokens'
ARTIFACTS = Path(os.environ.get("SPECFLUX_ARTIFACTS") or Path(__file__).resolve().parents[1] / "artifacts")


def sf(root: Path, *args: str, expect: int | None = 0) -> tuple[int, str, str]:
    """`specflux --root ROOT ARGS...` in-process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--root", str(root), *args])
    if expect is not None:
        assert code == expect, f"specflux {' '.join(args)} -> {code}: {err.getvalue()}"
    return code, out.getvalue(), err.getvalue()


def new_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for key, value in (("user.name", "Test Author"), ("user.email", "author@example.com"), ("commit.gpgsign", "false")):
        git(path, "config", key, value)
    sf(path, "init", str(path))
    return path


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """Tasks in every status with dependencies, sessions and commits; a completed workflow run
    (the fake agent CLI of test_flow.py); then a broken file, a dependency cycle and a dependency
    on a task that does not exist."""
    repo = new_repo(tmp_path_factory.mktemp("board") / "repo")
    sf(repo, "new", "Database schema", "--ac", "users table", "--ac", "migrations run")  # 1
    sf(repo, "new", "JWT service", "--dep", "1", "--req", "Sign and verify tokens.",
       "--ac", "sign", "--ac", "verify", "--ac", "refresh")  # 2
    sf(repo, "new", XSS, "--dep", "2", "--ac", "shown as text")  # 3
    sf(repo, "new", "Review me", "--ac", "reviewed")  # 4
    sf(repo, "set", "4", "--status", "review")
    sf(repo, "new", "Flaky import", "--ac", "imports")  # 5
    sf(repo, "set", "5", "--status", "failed")
    sf(repo, "new", "Report on imports", "--dep", "5")  # 6
    sf(repo, "set", "6", "--status", "blocked")
    sf(repo, "new", "Run me", "--ac", "it runs")  # 7: the workflow run's task
    sf(repo, "session", "1", "--did", "Created the schema", "--check", "1", "--check", "2", "--next", "hand over")
    sf(repo, "complete", "1", "--summary", "users(id, email)", "--downstream", "use users.id")
    sf(repo, "session", "2", "--did", IMG, "--did", "JWT signing", "--issues", "none", "--next", "Write verify", "--check", "1")
    sf(repo, "session", "2", "--did", "Verify works", "--check", "2", "--next", "Write the refresh endpoint")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tasks")
    plan = repo.parent / "plan.json"
    plan.write_text(json.dumps({"coder:7": [{"write": {"ran.txt": "it ran\n"}, "check": True, "chain": "it ran"}],
                                "reviewer": [{"approved": True}]}))
    env = {**os.environ, "SPECFLUX_FAKE_PLAN": str(plan), "SPECFLUX_FAKE_STATE": str(repo.parent / "agent-state"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    done = subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(repo), "flow", "start", "7",
                           "--agent", "command", "--cmd", cmd], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    (repo / ".specflux" / "task-states" / "task-8-state.md").write_text("# Task #8: Broken\n\nno metadata here\n")
    sf(repo, "new", "Cycle A", "--dep", "10", "--force")  # 9
    sf(repo, "new", "Cycle B", "--dep", "9")  # 10
    sf(repo, "new", "Waits for a ghost", "--dep", "99", "--force")  # 11
    return repo


def listing(repo: Path) -> list[dict]:
    return json.loads(sf(repo, "list", "--json", expect=None)[1])


# --------------------------------------------------------------------- the data


def test_the_data_is_what_show_log_and_flow_status_say(workspace):
    manager = TaskStateManager(Workspace(workspace))
    data = gather(manager)
    tasks = {t["id"]: t for t in data["tasks"]}
    for row in listing(workspace):
        if row["status"] == "broken":
            assert [b["id"] for b in data["broken"]] == [row["id"]] and data["broken"][0]["error"] == row["error"]
            continue
        shown = json.loads(sf(workspace, "show", row["id"], "--json")[1])
        board = {k: v for k, v in tasks[row["id"]].items() if k in shown}
        for c in board["criteria"]:
            c.pop("depth")
        assert board == shown
        assert tasks[row["id"]]["history"] == task_history(manager, row["id"])
    assert tasks["1"]["dependents"] == ["2"] and tasks["2"]["done"] == 2
    status = json.loads(sf(workspace, "flow", "status", "--json")[1])
    status.pop("artifacts", None)
    assert [r["state"] for r in data["runs"]] == [status]
    log = json.loads(sf(workspace, "flow", "log", "--json")[1])
    assert data["runs"][0]["narrative"] == log
    assert any("depends on task 99" in p for p in data["problems"]) and any("cycle" in p for p in data["problems"])


def test_one_git_log_gives_every_tasks_history_as_task_history_does(workspace):
    manager = TaskStateManager(Workspace(workspace))
    found, more = histories(manager)
    for task_id in Workspace(workspace).task_ids():
        assert found.get(task_id, []) == task_history(manager, task_id), task_id
    assert more == {}
    assert len(found["2"]) == 2 and found["2"][0]["session"] == 2 and found["7"][0]["usage"]["run"]


def test_a_task_file_merged_from_two_branches_has_the_history_log_gives_it(tmp_path):
    repo = new_repo(tmp_path / "repo")
    sf(repo, "new", "One", "--ac", "a")
    sf(repo, "new", "Two")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "side")
    sf(repo, "session", "1", "--did", "side work")
    sf(repo, "session", "2", "--did", "side two")
    git(repo, "checkout", "-q", "main")
    sf(repo, "session", "1", "--did", "main work")
    git(repo, "merge", "-q", "--no-edit", "side")  # task 1 by the merge driver: differs from both parents
    manager = TaskStateManager(Workspace(repo))
    found, _ = histories(manager)
    assert found["1"] == task_history(manager, "1") and found["1"][0]["subject"].startswith("Merge")
    assert found["2"] == task_history(manager, "2")


def test_serve_reads_again_only_the_files_and_history_that_changed(tmp_path):
    repo = new_repo(tmp_path / "repo")
    for title in ("One", "Two", "Three"):
        sf(repo, "new", title, "--ac", "a")
    hour_ago = time.time() - 3600
    for path in (repo / ".specflux" / "task-states").iterdir():
        os.utime(path, (hour_ago, hour_ago))  # older than the 2 s in which a change could keep its mtime
    manager = TaskStateManager(Workspace(repo))
    cache: dict = {}
    assert gather(manager, cache) == gather(manager) and sorted(cache["tasks"]) == ["1", "2", "3"]
    parsed = {k: v[1] for k, v in cache["tasks"].items()}
    history = cache["history"]
    sf(repo, "set", "2", "--title", "Two, renamed")
    again = gather(manager, cache)
    assert again == gather(manager) and [t["title"] for t in again["tasks"]] == ["One", "Two, renamed", "Three"]
    assert cache["tasks"]["1"][1] is parsed["1"] and cache["tasks"]["3"][1] is parsed["3"]  # not read again
    assert cache["history"] is history  # no commit since
    sf(repo, "session", "2", "--did", "committed")
    assert gather(manager, cache)["tasks"][1]["history"][0]["session"] == 1  # HEAD moved: read again
    assert "history" not in parsed["1"]  # the page's additions go to copies


def test_layout_layers_by_longest_path_and_survives_cycles():
    graph = Graph({"a": [], "b": ["a"], "c": ["a", "b"], "x": ["y"], "y": ["x"], "z": ["ghost"]},
                  dict.fromkeys("abcxyz", "pending"), dict.fromkeys("abcxyz", "t"))
    drawn = layout(graph)
    layer = {n["id"]: n["layer"] for n in drawn["nodes"]}
    assert layer == {"a": 0, "b": 1, "c": 2, "x": 0, "y": 1, "z": 1, "ghost": 0}
    assert [n["id"] for n in drawn["nodes"] if n["missing"]] == ["ghost"]
    assert {(e["from"], e["to"]) for e in drawn["edges"] if e["cycle"]} == {("x", "y"), ("y", "x")}
    places = {(n["col"], n["row"]) for n in drawn["nodes"]}
    assert len(places) == len(drawn["nodes"])  # no two nodes in one place
    alone = layout(Graph({**dict.fromkeys("pqrstuvw", []), "b": ["a"], "a": []}, dict.fromkeys("pqrstuvwab", "pending"),
                         dict.fromkeys("pqrstuvwab", "t")))
    assert {n["id"]: (n["col"], n["row"]) for n in alone["nodes"]} == {  # tasks with no edge in a grid below
        "a": (0, 0), "b": (1, 0), "p": (0, 2), "q": (1, 2), "r": (2, 2), "s": (3, 2), "t": (4, 2), "u": (5, 2),
        "v": (0, 3), "w": (1, 3)}
    assert (alone["width"], alone["height"]) == (6, 4)
    ring = {str(i): [str((i + 1) % 2000)] for i in range(2000)}  # one cycle through 2,000 tasks
    chain = {f"c{i}": [f"c{i - 1}"] if i else [] for i in range(2000)}  # and a chain 2,000 long
    started = time.perf_counter()
    big = layout(Graph({**ring, **chain}, dict.fromkeys([*ring, *chain], "pending"), dict.fromkeys([*ring, *chain], "t")))
    assert len(big["nodes"]) == 4000 and time.perf_counter() - started < patience(5)
    assert all(e["cycle"] == (e["from"] in ring) for e in big["edges"])
    assert max(n["layer"] for n in big["nodes"]) == 1999


def test_task_text_cannot_end_the_script_element_it_is_embedded_in():
    hostile = "</script><script>alert(1)</script><!-- & \u2028"
    text = embed({"title": hostile})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"title": hostile}
    page, _ = render({"workspace": "w", "tasks": [], "broken": [], "problems": [hostile],
                      "graph": layout(Graph({}, {}, {})), "runs": [], "git": False})
    assert page.count("</script>") == 2 and page.count("<script") == 2  # the template's own


def test_board_writes_the_default_page_git_ignored_and_refuses_a_folder(workspace):
    code, out, err = sf(workspace, "board", expect=1)  # the page is written; the broken file and cycle make it exit 1
    page = workspace / ".specflux" / "board.html"
    assert out.strip() == str(page.resolve()) and page.stat().st_size > 1000
    assert "task-8-state.md" in err and "dependency cycle" in err
    git(workspace, "check-ignore", "-q", ".specflux/board.html")
    assert sf(workspace, "board", "--out", str(workspace), expect=2)[2].startswith("specflux: ")


# --------------------------------------------------------------------- in a browser




@contextmanager
def watched_page(browser, allowed: tuple[str, ...] = ("file://", "data:"), **options):
    """A page whose requests are recorded (any to elsewhere is refused) and whose console errors,
    uncaught exceptions and dialogs are collected."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, **options)
    seen = {"requests": [], "errors": [], "dialogs": []}

    def route(r):
        seen["requests"].append(r.request.url)
        r.continue_() if r.request.url.startswith(allowed) else r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and seen["errors"].append(m.text))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    try:
        yield page, seen
    finally:
        context.close()


def test_the_page_shows_every_task_the_graph_a_tasks_state_and_the_run(workspace, browser):
    sf(workspace, "board", expect=1)
    rows = listing(workspace)
    healthy = [r for r in rows if r["status"] != "broken"]
    with watched_page(browser) as (page, seen):
        page.goto((workspace / ".specflux" / "board.html").as_uri())
        for row in rows:  # every task in the column of its status
            assert page.locator(f'.column[data-status="{row["status"]}"] .card[data-id="{row["id"]}"]').count() == 1, row
        assert page.locator(".card").count() == len(rows)
        assert "task-8-state.md:1" in page.locator('.column[data-status="broken"] .card').inner_text()
        assert "Write the refresh endpoint" in page.locator('.card[data-id="2"]').inner_text()  # the last Next
        assert "2/3" in page.locator('.card[data-id="2"] .progress').inner_text()
        # hostile text is text: the title as written, no dialog, no handler run
        assert page.locator('.card[data-id="3"] .title').inner_text() == XSS
        # the graph: one node per task, one edge per dependency, the cycle in red, the ghost dashed
        nodes = page.locator("svg.graph .node.task")
        assert sorted(nodes.evaluate_all("ns => ns.map(n => n.dataset.id)")) == sorted(r["id"] for r in healthy)
        edges = page.locator("svg.graph path.edge").evaluate_all("ps => ps.map(p => [p.dataset.from, p.dataset.to, p.classList.contains('cycle')])")
        assert sorted(map(tuple, edges)) == sorted((d, r["id"], r["id"] in ("9", "10")) for r in healthy for d in r["dependencies"])
        assert page.locator('svg.graph .node.missing[data-id="99"]').count() == 1
        # the run: its status, metrics and narrative
        run = page.locator(".run")
        assert run.count() == 1 and "completed" in run.inner_text() and "1/1" in run.inner_text()
        assert "task 7 is complete" in run.locator("ol.narrative").inner_text()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "board.png"), full_page=True)
        # a task's full state: criteria with ticks, chain input, sessions, history
        page.locator('.card[data-id="2"]').click()
        drawer = page.locator("#detail")
        assert drawer.is_visible()
        ticks = drawer.locator("ul.criteria li").evaluate_all(
            "ls => ls.map(l => [l.querySelector('.t').textContent, l.querySelector('.tick.on') !== null])")
        assert ticks == [["sign", True], ["verify", True], ["refresh", False]]
        sessions = drawer.locator(".session")
        assert sessions.count() == 2 and IMG in sessions.first.inner_text() and "Write the refresh endpoint" in sessions.nth(1).inner_text()
        assert "users(id, email)" in drawer.locator("blockquote").inner_text()  # chain input from task 1
        manager = TaskStateManager(Workspace(workspace))
        history = drawer.locator("table tbody tr")
        assert history.count() == len(task_history(manager, "2")) == 2
        assert "Sign and verify tokens." in drawer.inner_text()
        page.screenshot(path=str(ARTIFACTS / "board-task.png"))
        page.keyboard.press("Escape")
        assert not drawer.is_visible()
        page.locator('svg.graph .node[data-id="3"]').click()  # the graph opens tasks too
        assert drawer.locator("h2").text_content() == "#3" + XSS
        assert page.evaluate("window.__pwned") is None
        page.emulate_media(color_scheme="dark")
        page.screenshot(path=str(ARTIFACTS / "board-dark.png"))
    assert seen["dialogs"] == [] and seen["errors"] == []
    assert seen["requests"] and all(u.startswith(("file://", "data:")) for u in seen["requests"]), seen["requests"]


# --------------------------------------------------------------------- --serve


def _read_line(stream, timeout: float) -> str:
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert got, "no line within the time"
    return got[0]


TOKEN: dict[str, str] = {}  # the served board's token, as its first line printed it


def _get(url: str, host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={**({"Host": host} if host else {}), **TOKEN})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _version(url: str) -> str:
    return json.loads(_get(url + "version")[1])["version"]


def _until(predicate, timeout: float = 20) -> None:
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.fixture
def served(tmp_path):
    """`specflux board --serve --port 0` on a small workspace: (repo, url); Ctrl-C at the end must
    stop it cleanly."""
    repo = new_repo(tmp_path / "repo")
    sf(repo, "new", "First task", "--ac", "one")
    sf(repo, "new", "Second task", "--dep", "1")
    proc = subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(repo), "board", "--serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
    try:
        line = _read_line(proc.stdout, 30)
        url = re.search(r"(http://127\.0\.0\.1:\d+/)\?token=(\S+)", line)
        assert url, line
        TOKEN["X-Specflux-Token"] = url.group(2)
        yield repo, url.group(1)
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0 and "Traceback" not in err and "stopped" in out, (proc.returncode, out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_regenerates_when_a_task_changes_and_the_page_follows(served, browser):
    repo, url = served
    status, page = _get(url)
    assert status == 200 and b"First task" in page and b'"live":true' in page
    assert _get(url + "nothing")[0] == 404
    port = url.rstrip("/").rsplit(":", 1)[1]
    assert _get(url, host=f"evil.example:{port}")[0] == 403  # a rebound name is refused
    before = _version(url)
    sf(repo, "set", "1", "--title", "Renamed by hand")
    _until(lambda: _version(url) != before)
    assert b"Renamed by hand" in _get(url)[1]
    from playwright.sync_api import expect

    with watched_page(browser, allowed=(url,)) as (page, seen):
        page.goto(url + "?token=" + TOKEN["X-Specflux-Token"])
        assert page.locator('.card[data-id="2"] .title').inner_text() == "Second task"
        page.locator('.card[data-id="2"]').click()  # open: a reload keeps it open
        sf(repo, "check", "1", "1")
        sf(repo, "set", "2", "--title", "Second, renamed")
        expect(page.locator('.card[data-id="2"] .title')).to_have_text("Second, renamed", timeout=20000)  # pushed to it
        assert page.locator("#detail").is_visible() and "Second, renamed" in page.locator("#detail h2").inner_text()
        assert page.locator('.column[data-status="pending"] .card[data-id="1"] .progress').inner_text().strip() == "1/1"
    assert seen["errors"] == [] and all(u.startswith(url) for u in seen["requests"])
