"""The control room (`specflux board --serve`) end to end: a real repository, the server as a process
of its own, real runs of a shell-script agent, and the page in headless Chromium (Playwright).

Browser tests skip, saying why, where playwright or chromium is missing (`.ci/run` installs chromium)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.board.browser_kit import browser  # noqa: F401  (a fixture)
from tests.conftest import git
from patience import patience

ROOT = Path(__file__).resolve().parents[2]

AGENT = """\
#!/bin/sh
# coder: a change, every criterion ticked, a chain output; reviewer: approves every criterion
if [ "$SPECFLUX_ROLE" = reviewer ]; then
  n=$(grep -c '^- \\[' "$SPECFLUX_TASK_FILE")
  results=$(i=1; while [ $i -le $n ]; do printf '{"criterion": "%s", "met": true}' $i; [ $i -lt $n ] && printf ,; i=$((i+1)); done)
  echo "{\\"approved\\": true, \\"criteria_results\\": [$results]}" | specflux submit-review --json -
else
  [ -n "$SLOW" ] && sleep "$SLOW"
  echo "work on $SPECFLUX_TASK_ID" >> "work-$SPECFLUX_TASK_ID.txt"
  echo "coder working on $SPECFLUX_TASK_ID"
  sed -i 's/^- \\[ \\]/- [x]/' "$SPECFLUX_TASK_FILE"
  specflux handoff "$SPECFLUX_TASK_ID" --summary "did $SPECFLUX_TASK_ID"
fi
"""

GATED = """\
name = "gated"
start = "coder"

[[edges]]
id = "to-approval"
from = "coder"
to = "approval"
when = "coderOutput.selfValidation.passed = true"

[[edges]]
id = "rejected"
from = "approval"
to = "coder"
when = "approvalOutput.approved = false"
max_iterations = 2
"""


def sf(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(repo), *args], capture_output=True,
                          text=True, env=_env())
    assert not check or done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def show(repo: Path, task: str) -> dict:
    return json.loads(sf(repo, "show", task, "--json").stdout)


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    sf(path, "init", str(path))
    (path / "agent.sh").write_text(AGENT)
    return path


def commit_all(repo: Path, message: str = "tasks") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


@contextmanager
def served(repo: Path, *extra: str):
    """`specflux board --serve --port 0 EXTRA` as a process: (url with its token, base url)."""
    proc = subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(repo), "board", "--serve", "--port", "0",
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        line = proc.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)\?token=(\S+)", line)
        assert found, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield found.group(1) + "?token=" + found.group(2), found.group(1), found.group(2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "Traceback" not in err, (out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def request(url: str, *, data: dict | None = None, headers: dict | None = None, method: str | None = None):
    body = json.dumps(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body, method=method or ("POST" if body is not None else "GET"),
                                 headers={**({"Content-Type": "application/json"} if body is not None else {}),
                                          **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def until(predicate, timeout: float = 60, what: str = "the condition"):
    deadline = time.monotonic() + patience(timeout)
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


# --------------------------------------------------------------------- safe by default


def test_nothing_without_the_token_and_no_action_from_another_origin(tmp_path):
    repo = new_repo(tmp_path / "repo")
    sf(repo, "new", "A task", "--ac", "one")
    with served(repo) as (url, base, token):
        port = base.rstrip("/").rsplit(":", 1)[1]
        assert request(base)[0] == 403  # no token: not even the page
        assert request(base + "api/data")[0] == 403
        assert request(base + "?token=wrong")[0] == 403
        status, page, headers = request(url)
        assert status == 200 and b"A task" in page and "HttpOnly" in headers["Set-Cookie"] \
            and "SameSite=Strict" in headers["Set-Cookie"]
        cookie = headers["Set-Cookie"].split(";")[0]
        assert request(base + "api/data", headers={"Cookie": cookie})[0] == 200  # a reload carries the cookie
        sha = json.loads(request(base + "api/data", headers={"Cookie": cookie})[1])["tasks"][0]["sha"]
        tick = {"action": "check", "task": "1", "index": 1, "sha": sha}
        # another site open in the same browser: its requests carry the cookie but never the header
        assert request(base + "api/action", data=tick, headers={"Cookie": cookie})[0] == 403
        assert request(base + "api/action", data=tick, headers={"X-Specflux-Token": token,
                                                                "Origin": "http://evil.example"})[0] == 403
        assert request(base + "api/action", data=tick, headers={"X-Specflux-Token": token,
                                                                "Origin": f"http://localhost:{port}0"})[0] == 403
        assert request(url, headers={"Host": f"evil.example:{port}"})[0] == 403  # a rebound name
        assert show(repo, "1")["criteria"][0]["checked"] is False, "a refused request changed the file"
        status, body, _ = request(base + "api/action", data=tick, headers={"X-Specflux-Token": token,
                                                                           "Origin": base.rstrip("/")})
        assert status == 200 and json.loads(body)["message"] == "task 1: checked 1. one"
        assert show(repo, "1")["criteria"][0]["checked"] is True


def test_read_only_serves_the_page_with_no_actions(tmp_path):
    repo = new_repo(tmp_path / "repo")
    sf(repo, "new", "A task", "--ac", "one")
    with served(repo, "--read-only") as (url, base, token):
        status, page, _ = request(url)
        assert status == 200 and b'"actions":false' in page and token.encode() not in page
        status, body, _ = request(base + "api/action", data={"action": "check", "task": "1", "index": 1},
                                  headers={"X-Specflux-Token": token})
        assert status == 403 and b"read-only" in body


# --------------------------------------------------------------------- in a browser




@contextmanager
def room_page(browser, url: str, base: str):
    """The page, with every request recorded (any to elsewhere refused) and errors collected.
    Waits are generous (30 s): what is tested is that the page gets there, on a loaded machine too."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    seen = {"requests": [], "errors": []}

    def route(r):
        seen["requests"].append(r.request.url)
        r.continue_() if r.request.url.startswith(base) else r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and not m.text.startswith("Failed to load resource")
            and seen["errors"].append(m.text))  # a refused action answers 4xx, which the page shows
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.goto(url)
    page.wait_for_selector(".live:not(.off)")
    try:
        yield page, seen
    finally:
        context.close()
    assert seen["errors"] == [] and all(u.startswith(base) for u in seen["requests"]), seen


def test_edits_from_the_page_are_the_clis_and_a_hand_edit_is_never_overwritten(tmp_path, browser):
    from playwright.sync_api import expect

    repo = new_repo(tmp_path / "repo")
    sf(repo, "new", "First task", "--ac", "one", "--ac", "two", "--req", "Old requirements.")
    sf(repo, "new", "Second task", "--ac", "three")
    path = repo / ".specflux" / "task-states" / "task-1-state.md"
    with served(repo) as (url, base, _), room_page(browser, url, base) as (page, _):
        assert "token" not in page.url, "the token stays out of the address bar"
        page.locator('.card[data-id="1"]').click()
        page.locator("#detail button.tick").first.click()
        expect(page.locator("#toast")).to_have_text("task 1: checked 1. one")
        until(lambda: show(repo, "1")["criteria"][0]["checked"], what="the tick on disk")
        expect(page.locator('.card[data-id="1"] .progress')).to_contain_text("1/2")  # pushed back to the page
        page.select_option('#detail select[name="status"]', "in_progress")
        expect(page.locator('.column[data-status="in_progress"] .card[data-id="1"]')).to_be_visible()
        assert show(repo, "1")["status"] == "in_progress"
        for _ in range(5):  # a push that redraws the panel between the fill and the click (a busy
            page.fill('#detail input[name="add-dep"]', "2")  # machine) empties the box: typed again
            page.click('#detail button[data-act="add-dep"]')
            try:
                until(lambda: show(repo, "1")["dependencies"] == ["2"], timeout=5, what="the dependency")
                break
            except AssertionError:
                continue
        assert show(repo, "1")["dependencies"] == ["2"]
        page.fill('#detail input[name="add-dep"]', "1")  # itself: refused with the CLI's words
        page.click('#detail button[data-act="add-dep"]')
        expect(page.locator("#toast")).to_have_text("task 1 cannot depend on itself")
        before = path.read_bytes()
        page.click('#detail button[data-act="edit-requirements"]')
        page.fill('#detail textarea[name="requirements"]', "New requirements,\nin two lines.")
        page.click('#detail button[data-act="save-requirements"]')
        until(lambda: show(repo, "1")["requirements"] == "New requirements,\nin two lines.", what="the requirements")
        after = path.read_bytes()
        assert after.replace(b"New requirements,\nin two lines.", b"Old requirements.") == before  # nothing else moved
        expect(page.locator("#requirements-text")).to_have_text("New requirements,\nin two lines.")
        # a person edits the file in an editor while the page has the editor open: the page's save is refused
        page.click('#detail button[data-act="edit-requirements"]')
        page.fill('#detail textarea[name="requirements"]', "From the page.")
        by_hand = path.read_text().replace("in two lines.", "in two lines, and a hand edit.")
        path.write_text(by_hand)
        page.click('#detail button[data-act="save-requirements"]')
        expect(page.locator("#detail .notice.bad")).to_contain_text("changed on disk")
        expect(page.locator("#requirements-text")).to_contain_text("and a hand edit.")
        assert path.read_text() == by_hand
        # a new task
        page.keyboard.press("Escape")  # the drawer closes
        page.click('button[data-act="new-task"]')
        page.fill('#detail input[name="title"]', "Made on the page <b>bold</b>")
        page.fill('#detail textarea[name="criteria"]', "first\nsecond")
        page.fill('#detail input[name="dependencies"]', "99")
        page.click('#detail button[data-act="create"]')
        expect(page.locator("#toast")).to_contain_text("no task 99")
        assert not (repo / ".specflux" / "task-states" / "task-3-state.md").exists()
        page.fill('#detail input[name="dependencies"]', "1")
        page.click('#detail button[data-act="create"]')
        expect(page.locator("#detail h2")).to_contain_text("Made on the page <b>bold</b>")  # text, not markup
        assert show(repo, "3")["dependencies"] == ["1"] and [c["text"] for c in show(repo, "3")["criteria"]] == ["first", "second"]
        assert page.locator("#detail b", has_text="bold").count() == 0


def test_a_task_made_on_the_page_opens_when_the_push_comes_before_the_answer(tmp_path, browser):
    """The file watcher's push of the new task can reach the page before the answer to "create"
    does: the page then opens the task from what it already has (it once waited for a later push
    that never came, and kept showing the empty form)."""
    from playwright.sync_api import expect

    repo = new_repo(tmp_path / "repo")
    sf(repo, "new", "First task", "--ac", "one")
    with served(repo) as (url, base, _), room_page(browser, url, base) as (page, _):
        held = []

        def hold_create(route):
            if route.request.method == "POST" and json.loads(route.request.post_data or "{}").get("action") == "new":
                held.append((route, route.fetch()))  # the task is made; its answer waits
            else:
                route.fallback()

        page.route("**/api/action", hold_create)
        page.click('button[data-act="new-task"]')
        page.fill('#detail input[name="title"]', "Made while the answer waits")
        page.click('#detail button[data-act="create"]')
        expect(page.locator('.card[data-id="2"]')).to_be_visible()  # the push came first
        expect(page.locator("#detail h2")).to_have_text("New task")
        route, response = held[0]
        route.fulfill(response=response)
        expect(page.locator("#detail h2")).to_contain_text("Made while the answer waits")


def test_the_page_follows_changes_without_reloading(tmp_path, browser):
    from playwright.sync_api import expect

    repo = new_repo(tmp_path / "repo")
    for n in range(12):
        sf(repo, "new", f"Task {n + 1}", "--ac", "one")
    with served(repo) as (url, base, _), room_page(browser, url, base) as (page, _):
        page.evaluate("window.stillHere = true")
        page.locator('.card[data-id="2"]').click()
        page.evaluate("document.getElementById('detail').scrollTop = 40; window.scrollTo(0, 300)")
        started = time.monotonic()
        sf(repo, "set", "2", "--title", "Renamed in a terminal")
        expect(page.locator('.card[data-id="2"] .title')).to_have_text("Renamed in a terminal", timeout=patience(5) * 1000)
        took = time.monotonic() - started
        assert page.evaluate("window.stillHere") is True, "the page reloaded"
        assert "Renamed in a terminal" in page.locator("#detail h2").inner_text()  # the open task stays open
        assert page.evaluate("window.scrollY") == 300
        print(f"a change on screen {took:.2f} s after the command that made it returned")


def test_runs_are_started_followed_paused_and_resumed_from_the_page(tmp_path, browser):
    from playwright.sync_api import expect

    repo = new_repo(tmp_path / "repo")
    sf(repo, "new", "Gated task", "--ac", "one")
    sf(repo, "new", "Slow task", "--ac", "two")
    (repo / ".specflux" / "workflows").mkdir()
    (repo / ".specflux" / "workflows" / "gated.toml").write_text(GATED)
    commit_all(repo)
    with served(repo) as (url, base, _), room_page(browser, url, base) as (page, _):
        # a run through an approval gate
        page.click('button[data-act="start-run"]')
        page.fill('#detail input[name="tasks"]', "1")
        page.fill('#detail input[name="cmd"]', "sh agent.sh")
        page.click('#detail button[data-act="start"]')
        expect(page.locator("#output-lines")).to_contain_text("coder working on 1", timeout=30000)
        run = until(lambda: sorted((repo / ".specflux" / "runs").glob("run-*")), what="the run")[0].name
        until(lambda: json.loads(sf(repo, "flow", "status", run, "--json").stdout)["status"] in ("completed", "failed"),
              timeout=60, what="the first run to end")
    with served(repo) as (url, base, token), room_page(browser, url, base) as (page, _):
        status, body, _ = request(base + "api/action", headers={"X-Specflux-Token": token}, data={
            "action": "start", "tasks": ["2"], "agent": "command", "cmd": "SLOW=3 sh agent.sh"})
        assert status == 200, body
        box = page.locator(".run").first
        expect(box.locator('button[data-act="pause"]')).to_be_visible(timeout=30000)
        box.locator('button[data-act="pause"]').click()
        expect(page.locator(".run").first.locator(".badge").first).to_contain_text("paused", timeout=60000)
        page.locator(".run").first.locator('button[data-act="resume"]').click()
        expect(page.locator(".run").first.locator(".badge").first).to_contain_text("completed", timeout=60000)
        assert show(repo, "2")["status"] == "complete"


def test_an_approval_gate_is_answered_on_the_page_with_the_diff_and_the_verdicts(tmp_path, browser):
    from playwright.sync_api import expect

    repo = new_repo(tmp_path / "repo")
    sf(repo, "new", "Gated task", "--ac", "one")
    (repo / ".specflux" / "workflows").mkdir()
    (repo / ".specflux" / "workflows" / "gated.toml").write_text(GATED)
    commit_all(repo)
    done = sf(repo, "flow", "start", "1", "--workflow", "gated", "--agent", "command", "--cmd", "sh agent.sh", check=False)
    assert "waiting for approval" in done.stdout, (done.stdout, done.stderr)
    with served(repo) as (url, base, _), room_page(browser, url, base) as (page, _):
        gate = page.locator(".approval")
        expect(gate).to_contain_text("waiting for your approval: task 1")
        expect(gate).to_contain_text("tests:")
        gate.locator('button[data-act="diff"]').click()
        expect(gate.locator("pre.diff")).to_contain_text("work-1.txt")
        gate.locator('button[data-act="reject"]').click()  # no note: refused, as `flow reject` refuses it
        expect(page.locator("#toast")).to_contain_text("note")
        gate.locator('textarea[name="note"]').fill("looks right")
        gate.locator('button[data-act="approve"]').click()
        expect(page.locator("#output-lines")).to_contain_text("completed", timeout=60000)
        expect(page.locator(".run").first.locator(".badge").first).to_contain_text("completed", timeout=30000)
    assert show(repo, "1")["status"] == "complete"


def test_the_queue_of_a_remote_is_on_the_page(tmp_path, browser):
    from playwright.sync_api import expect

    from tests.flow.remote_kit import Daemon

    bare_base = tmp_path / "served"
    bare_base.mkdir()
    repo = new_repo(tmp_path / "repo")
    sf(repo, "new", "Remote one", "--ac", "one")
    sf(repo, "new", "Remote two", "--ac", "two")
    commit_all(repo)
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare_base / "queue.git"))
    with Daemon(bare_base) as daemon:
        git(repo, "remote", "add", "origin", daemon.url("queue.git"))
        git(repo, "fetch", "-q", "origin")
        git(repo, "branch", "-q", "--set-upstream-to", "origin/main")
        workers = []
        for name in ("w1", "w2"):
            clone_dir = tmp_path / name
            git(tmp_path, "clone", "-q", daemon.url("queue.git"), str(clone_dir))
            workers.append(clone_dir)
        with served(repo, "--remote", "origin") as (url, base, _), room_page(browser, url, base) as (page, _):
            expect(page.locator("#queue")).to_contain_text("No claims", timeout=30000)
            procs = [subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(w), "flow", "start", "--all",
                                       "--remote", "origin", "--worker", w.name, "--agent", "command", "--cmd",
                                       "SLOW=4 sh agent.sh"], cwd=w, env=_env(), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True) for w in workers]
            try:
                expect(page.locator("#queue table.claims")).to_contain_text("w", timeout=60000)  # a claim, live
                for proc in procs:
                    proc.wait(timeout=120)
                expect(page.locator("#queue")).to_contain_text("Complete 2", timeout=60000)
                expect(page.locator("#queue")).to_contain_text("2 run(s) integrated")
                expect(page.locator("#queue")).not_to_contain_text("unconfirmed")
            finally:
                for proc in procs:
                    if proc.poll() is None:
                        proc.kill()
