"""`specflux demo`: the whole story offline, in a fresh folder, in a few seconds.

A small git repository gets three dependent tasks; agent sessions, replayed from recordings shipped
in the package (the real tool-use loop and real tools; only the model's side comes from the file),
implement the first two. Task 1 grows past a (deliberately small) archive limit, its chain output is
wired into task 2, and task 2's into task 3, which is left ready for you.

`python -m specflux.demo --record` re-records the sessions against the scripted local Messages API
(specflux.agent.scripted); the demo and the tests replay them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable

from specflux.base.errors import GitError, NotFoundError, SpecfluxError, UsageError

MODEL = "claude-sonnet-5-5"
DEMO_CONFIG = """\
# The demo's limits are tiny so that archiving shows up after a few sessions.
[archive]
warn_kb = 0.8
archive_kb = 1.0
keep_sessions = 1

[agent]
model = "claude-sonnet-5-5"
max_turns = 12
"""

PROJECT = {
    ".gitignore": "__pycache__/\n",
    "README.md": "# textkit\n\nSmall text helpers.\n",
    "textkit/__init__.py": '"""Small text helpers."""\n',
}

TASKS = [
    dict(task_id="1", title="slugify helper", epic_id="1", epic_title="textkit", repository="textkit",
         requirements="Add `slugify(text)` to textkit: lower case, runs of anything but letters and digits\n"
                      "become one hyphen, no hyphen at either end.",
         criteria=["slugify('Hello, World!') returns 'hello-world'", "a test file covers slugify and passes"]),
    dict(task_id="2", title="slug command line", epic_id="1", epic_title="textkit", repository="textkit",
         dependencies=["1"],
         requirements="Add `python3 -m textkit.cli TEXT` printing the slug of TEXT, using slugify from task #1.",
         criteria=["`python3 -m textkit.cli 'Hello World'` prints hello-world", "no argument prints usage and exits 2"]),
    dict(task_id="3", title="document the slug command", epic_id="1", epic_title="textkit", repository="textkit",
         dependencies=["2"],
         requirements="Describe the slug command in README.md with one example.",
         criteria=["README.md shows the command and its output"]),
]

SLUG_PY = '''"""Slugs for titles and file names."""

import re


def slugify(text: str) -> str:
    """'Hello, World!' -> 'hello-world'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
'''

TEST_PY = '''from textkit.slug import slugify

assert slugify("Hello, World!") == "hello-world"
assert slugify("  many   spaces ") == "many-spaces"
assert slugify("!!!") == ""
print("ok: 3 checks")
'''

CLI_PY = '''"""python3 -m textkit.cli TEXT: print the slug of TEXT."""

import sys

from textkit.slug import slugify


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python3 -m textkit.cli TEXT", file=sys.stderr)
        return 2
    print(slugify(" ".join(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


@dataclass(frozen=True)
class DemoSession:
    name: str  # recording file stem
    task_id: str
    stamp: str


SESSIONS = [
    DemoSession("task-1-session-1", "1", "2026-01-05 09:00"),
    DemoSession("task-1-session-2", "1", "2026-01-05 11:30"),
    DemoSession("task-2-session-1", "2", "2026-01-06 10:00"),
]


def scripts() -> dict[str, list]:
    """What the model says in each session (used only to record)."""
    from specflux.agent.scripted import Reply, call

    def reply(text, *calls, usage=(1800, 120, 0)):
        return Reply(calls=list(calls), text=text, usage={
            "input_tokens": usage[0], "output_tokens": usage[1], "cache_read_input_tokens": usage[2],
            "cache_creation_input_tokens": 0})

    return {
        "task-1-session-1": [
            reply("First session: I'll look at the repository.", call("run_command", command="git status --short"), call("list_files", path="textkit")),
            reply("textkit is empty. Writing slugify.", call("write_file", path="textkit/slug.py", content=SLUG_PY), usage=(2100, 260, 1700)),
            reply("Verifying criterion 1.", call("run_command", command="python3 -c \"from textkit.slug import slugify; print(slugify('Hello, World!'))\""), usage=(2300, 60, 1900)),
            reply("It prints hello-world.", call("check_criterion", index=1), usage=(2400, 40, 2000)),
            reply("Handing over.", call("end_session", did=["Added textkit/slug.py with slugify()", "Verified slugify('Hello, World!') prints hello-world"],
                                         issues="None", next="Write tests/test_slug.py covering slugify, run it, check criterion 2"), usage=(2500, 110, 2100)),
        ],
        "task-1-session-2": [
            reply("The log says: tests next. Reading slug.py first.", call("read_file", path="textkit/slug.py")),
            reply("Writing the test.", call("write_file", path="tests/test_slug.py", content=TEST_PY), usage=(2200, 150, 1700)),
            reply("Running it.", call("run_command", command="python3 -m tests.test_slug"), usage=(2300, 40, 1900)),
            reply("Passes.", call("check_criterion", index=2), usage=(2400, 40, 2000)),
            reply("All criteria are checked: completing with a chain output.", call(
                "end_session", did=["Added tests/test_slug.py (3 checks), passing"], issues="None", next="Task complete",
                chain_output={"summary": "slugify(text) in textkit/slug.py: lower case, runs of other characters become one hyphen, trimmed.",
                              "downstream": "Import: from textkit.slug import slugify\nReturns '' when the text has no letters or digits.\nTests: python3 -m tests.test_slug"}),
                usage=(2500, 160, 2100)),
        ],
        "task-2-session-1": [
            reply("Chain input from task #1 says how to import slugify. Writing the CLI.", call("write_file", path="textkit/cli.py", content=CLI_PY)),
            reply("Checking both criteria.", call("run_command", command="python3 -m textkit.cli 'Hello World'; python3 -m textkit.cli; echo \"exit=$?\""), usage=(2300, 70, 1800)),
            reply("Both behave.", call("check_criterion", index=1), call("check_criterion", index=2), usage=(2400, 50, 2000)),
            reply("Done.", call("end_session", did=["Added textkit/cli.py: python3 -m textkit.cli TEXT prints the slug", "No argument prints usage and exits 2"],
                               issues="None", next="Task complete",
                               chain_output={"summary": "Command line: python3 -m textkit.cli TEXT prints slugify(TEXT); no argument prints usage, exit 2.",
                                             "downstream": "Example: python3 -m textkit.cli 'Hello World' prints hello-world"}),
                  usage=(2500, 140, 2100)),
        ],
    }


def recordings_dir() -> Path:
    return Path(str(resources.files("specflux.demo.data")))


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    except FileNotFoundError:
        raise NotFoundError("the demo needs git, and git is not installed") from None
    if done.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def prepare(root: Path):
    """A fresh repository with the project, the workspace and the three tasks, committed."""
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} is not empty: give the demo a new folder")
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q")
    if not _has_identity(root):  # a fresh machine: give the demo repository its own identity
        _git(root, "config", "user.name", "specflux demo")
        _git(root, "config", "user.email", "demo@specflux.invalid")
    _git(root, "config", "commit.gpgsign", "false")
    for name, text in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    ws, _ = Workspace.init(root)
    (ws.dir / "config.toml").write_text(DEMO_CONFIG)
    manager = TaskStateManager(ws)
    for spec in TASKS:
        manager.create(**spec)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "textkit: project and three specflux tasks")
    return manager


def _has_identity(root: Path) -> bool:
    done = subprocess.run(["git", "var", "GIT_AUTHOR_IDENT"], cwd=root, capture_output=True, text=True)
    return done.returncode == 0


def run_sessions(manager, backend_for: Callable[[DemoSession], object], say: Callable[[str], None]) -> list:
    from specflux.agent.session import run_session

    reports = []
    for s in SESSIONS:
        report = run_session(manager, s.task_id, backend_for(s), clock=lambda s=s: s.stamp)
        reports.append(report)
        line = f"  task {s.task_id}, session {report.session}: {report.stop}, status {report.status}, commit {report.commit[:8]}"
        say(line)
        for a in report.archived:
            say(f"    archived {a}")
        for t in report.wired:
            say(f"    chain output wired into task {t}")
        if report.error:
            raise SpecfluxError(f"demo session {s.name} failed: {report.error}")
    return reports


def run_demo(target: Path | None = None, say: Callable[[str], None] = print) -> int:
    from specflux.agent.anthropic_backend import replay_backend
    from specflux.store.chain import Graph
    from specflux.surface.views import list_table

    from specflux.store.workspace import check_folder

    root = check_folder((target or Path(tempfile.mkdtemp(prefix="specflux-demo-"))).resolve())
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} is not empty: give the demo a new folder")
    say(f"specflux demo in {root}\n")
    manager = prepare(root)
    say("Created a git repository with three dependent tasks: #1 -> #2 -> #3.")
    say("Agent sessions, replayed offline from recordings (real tools, real files, real commits):")
    run_sessions(manager, lambda s: replay_backend(recordings_dir() / f"{s.name}.jsonl"), say)
    say("")
    say(list_table(manager.summaries()))
    say("")
    say(f"Ready next: {', '.join('#' + t for t in Graph.load(manager).ready()) or 'nothing'}")
    say("")
    from specflux.demo.flow_run import flow_recordings, prepare_flow, run_flow

    prepare_flow(manager, _git)
    say("A workflow run over two new tasks, #4 -> #5 (coder, the project's tests, reviewer), replayed offline:")
    state = run_flow(manager, lambda line: None, flow_recordings())  # its narrative below says each step once
    run = state.pop("_run")
    if state["status"] != "completed":
        raise SpecfluxError(f"the demo's workflow run ended {state['status']}: {state.get('failureReason')}")
    say("")
    say((run.dir / "narrative.md").read_text().rstrip())
    say("")
    from specflux.demo.lanes import conflicted, run_lanes

    say("A parallel run: tasks #6 and #7 at once (--parallel 2), each in its own git worktree, with a")
    say("scripted agent CLI; both add a line at the end of textkit/__init__.py:")
    lanes = run_lanes(manager, _git, say)
    lanes.pop("_run")
    if lanes["status"] != "completed":
        raise SpecfluxError(f"the demo's parallel run ended {lanes['status']}: {lanes.get('failureReason')}")
    redone = conflicted(lanes)
    say("")
    say(list_table(manager.summaries()))
    say("")
    say(_git(root, "log", "--graph", "--format=%h %s", "-12").rstrip())
    lanes_note = (f" Task #{redone[0]}'s merge conflicted in textkit/__init__.py: it was\n"
                  "  aborted, and the workflow gave the task a new attempt on top of the merged branch, told\n"
                  "  about the conflict; that one merged." if redone else
                  " Both merged without a conflict this time (the lanes finished far apart).")
    program = _program()
    say(f"""
What happened:
- Each session read its task file, worked with real tools, and handed over with end_session;
  each one is a single commit with trailers (git log --format=%B shows them).
- Task #1 grew past the demo's 1 KB archive limit: session 1 moved verbatim to
  .specflux/archives/task-1-archive.md, and the progress log keeps an Archived Summary.
- Task #1's chain output was wired into task #2's Chain Inputs, and task #2's into task #3.
- The workflow run: the coder's first try at #4 failed the project's tests (run by the engine,
  not taken from the agent); the retry was told which test failed and fixed it; the reviewer
  approved; #4 completed and was wired into #5; the reviewer sent #5 back once, and the coder
  answered it. Every step is an event in .specflux/runs/, every session a commit.
- The parallel run: #6 and #7 ran at the same time in worktrees under .specflux/worktrees/; the
  run merged each accepted lane into your branch itself.{lanes_note}
  The worktrees and their branches were removed when the run ended.

Look around:
  cd {root}
  {program} show 2
  {program} log 1
  {program} context 3
  cat .specflux/archives/task-1-archive.md
  {program} flow status
  {program} flow log""")
    return 0


def _program() -> str:
    """How to run this specflux from any folder: `specflux` when that is what PATH finds, else the
    path of the script beside this Python (a virtualenv not activated), else `python -m specflux.cli`."""
    import shlex
    import shutil

    beside = Path(sys.executable).parent / "specflux"
    found = shutil.which("specflux")
    if found and beside.exists() and Path(found).resolve() == beside.resolve():
        return "specflux"
    if beside.exists():
        return shlex.quote(str(beside))
    return f"{shlex.quote(sys.executable)} -m specflux.cli"


def record(out_dir: Path, say: Callable[[str], None] = print) -> None:
    """Run the demo live against the scripted Messages API, recording each session to `out_dir`."""
    from specflux.agent.anthropic_backend import live_backend
    from specflux.agent.scripted import ScriptedServer

    turns = scripts()
    with tempfile.TemporaryDirectory() as tmp:
        manager = prepare(Path(tmp) / "demo")
        servers: list[ScriptedServer] = []

        def backend_for(s: DemoSession):
            server = ScriptedServer(turns[s.name]).__enter__()
            servers.append(server)
            return live_backend(out_dir / f"{s.name}.jsonl", task_id=s.task_id, base_url=server.base_url, api_key="scripted")

        try:
            run_sessions(manager, backend_for, say)
        finally:
            for server in servers:
                server.__exit__(None, None, None)
        from specflux.demo.flow_run import prepare_flow, record_flow

        prepare_flow(manager, _git)
        record_flow(manager, out_dir, say)
