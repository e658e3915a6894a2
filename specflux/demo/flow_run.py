"""The demo's second part: a workflow run over two new tasks, replayed offline from recordings.

The run shows what the engine does in code: the coder's first try at task 4 fails the project's
tests (run by the engine, not reported by the agent), the retry is told which test failed and
fixes it, the reviewer approves, task 4 completes and is wired into task 5; the reviewer sends
task 5 back once, the coder answers it, and the run ends with its narrative.

`python -m specflux.demo --record` re-records these sessions too (see demo.py).
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path
from typing import Callable

STAMP = "2026-01-07 10:00"  # every session entry of the run carries it, so the replay matches

RUNNER_PY = '''"""The demo project's test runner: runs tests/test_*.py functions, writes JUnit XML."""
import importlib
import pathlib
import sys
from xml.sax.saxutils import quoteattr

sys.path.insert(0, ".")
cases = []
for path in sorted(pathlib.Path("tests").glob("test_*.py")):
    module = importlib.import_module(f"tests.{path.stem}")
    for name in sorted(n for n in dir(module) if n.startswith("test_")):
        try:
            getattr(module, name)()
            cases.append((path.stem, name, None))
        except AssertionError as e:
            cases.append((path.stem, name, str(e) or "assertion failed"))
failed = [c for c in cases if c[2] is not None]
with open(".demo-junit.xml", "w") as out:
    out.write(f'<testsuite name="demo" tests="{len(cases)}" failures="{len(failed)}">\\n')
    for module, name, message in cases:
        out.write(f'  <testcase classname="tests.{module}" name="{name}">')
        if message is not None:
            out.write(f"<failure message={quoteattr(message)}/>")
        out.write("</testcase>\\n")
    out.write("</testsuite>\\n")
print(f"{len(cases) - len(failed)} passed, {len(failed)} failed")
sys.exit(1 if failed else 0)
'''

TEST_CASE_PY = '''from textkit.case import titlecase


def test_titlecase():
    assert titlecase("hello big world") == "Hello Big World", titlecase("hello big world")
'''

WRONG_CASE_PY = '''"""Title case."""


def titlecase(text: str) -> str:
    return text.upper()
'''

CASE_PY = '''"""Title case."""


def titlecase(text: str) -> str:
    """Each word capitalised: titlecase("hello big world") == "Hello Big World"."""
    return " ".join(word[:1].upper() + word[1:] for word in text.split(" "))
'''

VALIDATE = """
[validate]
command = "python3 tests/run.py"
junit_xml = ".demo-junit.xml"
"""

TASKS = [
    dict(task_id="4", title="titlecase helper", epic_id="1", epic_title="textkit", repository="textkit",
         requirements="Add `titlecase(text)` to textkit/case.py: every word capitalised. A test is in tests/test_case.py.",
         criteria=["titlecase('hello big world') returns 'Hello Big World'", "the project's tests pass"]),
    dict(task_id="5", title="document titlecase", epic_id="1", epic_title="textkit", repository="textkit",
         dependencies=["4"], requirements="Describe titlecase in README.md, using task #4's chain output.",
         criteria=["README.md shows titlecase with an example and its output"]),
]

README_SHORT = "# textkit\n\nSmall text helpers.\n\n- titlecase(text) capitalises words.\n"
README_FULL = README_SHORT + "\n```python\n>>> titlecase('hello big world')\n'Hello Big World'\n```\n"


def prepare_flow(manager, git: Callable[..., str]) -> None:
    """Tasks 4 and 5, the project's test runner and test, and [validate], committed."""
    root = manager.ws.root
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / "run.py").write_text(RUNNER_PY)
    (root / "tests" / "test_case.py").write_text(TEST_CASE_PY)
    with open(root / ".gitignore", "a") as f:
        f.write(".demo-junit.xml\n")
    config = manager.ws.dir / "config.toml"
    text = config.read_text()  # the first part's tiny archive limit would archive (and list commit shas,
    text = text.replace("archive_kb = 1.0", "archive_kb = 75").replace("warn_kb = 0.8", "warn_kb = 50")  # new each run)
    config.write_text(text + VALIDATE)
    manager.ws.__dict__.pop("config", None)  # read the settings again, [validate] included
    for spec in TASKS:
        manager.create(**spec)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "textkit: titlecase tasks, a test runner, [validate]")


def scripts() -> list:
    """What the model says, session by session, in the run (used only to record)."""
    from specflux.agent.scripted import Reply, call

    def reply(*calls, usage=(2000, 150, 1500)):
        return Reply(calls=list(calls), usage={"input_tokens": usage[0], "output_tokens": usage[1],
                                               "cache_read_input_tokens": usage[2], "cache_creation_input_tokens": 0})

    def review(approved: bool, issues=(), criteria=()):
        return reply(call("submit_review", approved=approved, issues=list(issues),
                          criteria_results=[{"criterion": c, "met": approved} for c in criteria]))

    return [
        # task 4, coder try 1: a plausible mistake
        reply(call("write_file", path="textkit/case.py", content=WRONG_CASE_PY)),
        reply(call("end_session", did=["Added textkit/case.py with titlecase()"], issues="None",
                   next="Run the tests")),
        # task 4, coder try 2: the context names the failing test; fix it
        reply(call("read_file", path="tests/test_case.py")),
        reply(call("write_file", path="textkit/case.py", content=CASE_PY),
              call("check_criterion", index=1), call("check_criterion", index=2)),
        reply(call("end_session", did=["Fixed titlecase: capitalise each word instead of upper-casing the text"],
                   issues="None", next="Task complete",
                   chain_output={"summary": "titlecase(text) in textkit/case.py capitalises each word.",
                                 "downstream": "from textkit.case import titlecase; "
                                               "titlecase('hello big world') == 'Hello Big World'"})),
        # task 4, reviewer
        reply(call("read_file", path="textkit/case.py")),
        review(True, criteria=["titlecase('hello big world') returns 'Hello Big World'", "the project's tests pass"]),
        # task 5, coder try 1
        reply(call("write_file", path="README.md", content=README_SHORT), call("check_criterion", index=1)),
        reply(call("end_session", did=["Documented titlecase in README.md"], issues="None", next="Task complete",
                   chain_output={"summary": "README.md documents titlecase."})),
        # task 5, reviewer sends it back
        review(False, issues=[{"severity": "major", "description": "README.md has no example with its output"}],
               criteria=["README.md shows titlecase with an example and its output"]),
        # task 5, coder try 2 answers the review
        reply(call("write_file", path="README.md", content=README_FULL)),
        reply(call("end_session", did=["Added an example with its output to README.md"], issues="None",
                   next="Task complete", chain_output={"summary": "README.md documents titlecase with an example."})),
        # task 5, reviewer approves
        review(True, criteria=["README.md shows titlecase with an example and its output"]),
    ]


def flow_recordings() -> Path:
    return Path(str(resources.files("specflux.demo.data"))) / "flow"


def run_flow(manager, say: Callable[[str], None], replay_from: Path | None) -> dict:
    """Start the run over tasks 4 and 5 and drive it (replaying `replay_from`, or live)."""
    from specflux.flow import runs
    from specflux.flow.steps.roles import Agents

    agents = Agents(kind="replay", replay_from=replay_from) if replay_from else Agents()
    run = runs.start(manager, ["4", "5"], agents=agents)
    state = runs.drive(manager, run, agents, say=lambda line: say(f"  {line}"), stamp_clock=lambda: STAMP)
    state["_run"] = run
    return state


def record_flow(manager, out_dir: Path, say: Callable[[str], None]) -> None:
    """Drive the run live against the scripted Messages API and keep its recordings."""
    import os

    from specflux.agent.scripted import ScriptedServer

    with ScriptedServer(scripts()) as server:
        saved = {k: os.environ.get(k) for k in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")}
        os.environ.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="scripted")
        try:
            state = run_flow(manager, say, None)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    if state["status"] != "completed":
        raise RuntimeError(f"the recorded run ended {state['status']}: {state.get('failureReason')}")
    target = out_dir / "flow" / "recordings"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for path in state["_run"].recordings_dir.glob("*.jsonl"):
        shutil.copy(path, target / path.name)
