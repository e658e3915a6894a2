"""Hand-ins: the reviewer's and planner's tools, the same checks for agent CLIs, and a reviewer
session end to end through the real SDK."""

from __future__ import annotations

import io
import os
import json
from pathlib import Path

import pytest

from specflux.agent.anthropic_backend import AnthropicBackend
from specflux.agent.backend import SessionRequest
from specflux.agent.handin import HandinError, Review, TaskPlan, check_tasks
from specflux.agent.handin_cli import submit_from_cli
from specflux.agent.handin_channel import HandinChannel
from specflux.agent.scripted import Reply, call
from specflux.agent.tools import TOOL_SPECS, Toolbox
from specflux.base.errors import SpecfluxError

API_KEY = "sk-ant-test-handin-4242"

REVIEW = {
    "approved": False,
    "issues": [{"severity": "major", "description": "greet() still returns 'helo'"}],
    "criteria_results": [{"criterion": "greet() returns 'hello'", "met": False},
                         {"criterion": "tests pass", "met": True}],
}


def task(key: str, *deps: str, **fields) -> dict:
    return {"key": key, "title": f"Do {key}", "requirements": f"{key} works", "acceptance_criteria": [f"{key} done"],
            "priority": 2, "complexity": "simple", "dependencies": list(deps), **fields}


PLAN = {"tasks": [task("schema"), task("api", "schema"), task("ui", "api", "schema")],
        "summary": {"totalTasks": 3, "byPriority": {"2": 3}, "estimatedComplexity": "days"}}


class Hooks:
    """Task hooks with the optional hand-in methods."""

    def __init__(self, refuse: bool = False):
        self.reviews: list[Review] = []
        self.plans: list[TaskPlan] = []
        self.refuse = refuse

    def check_criterion(self, index: int) -> str:
        raise AssertionError("not a coder session")

    def end_session(self, handoff) -> str:
        raise AssertionError("not a coder session")

    def submit_review(self, review: Review) -> None:
        if self.refuse:
            raise SpecfluxError("the run was stopped")
        self.reviews.append(review)

    def submit_tasks(self, plan: TaskPlan) -> None:
        self.plans.append(plan)


class OldHooks:
    """A hooks object from before hand-ins: no submit_* methods."""

    def check_criterion(self, index: int) -> str:
        return "checked"

    def end_session(self, handoff) -> str:
        return "recorded"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "greet.py").write_text("def greet():\n    return 'helo'\n")
    return root


def ok(box: Toolbox, name: str, input: dict) -> str:  # noqa: A002
    result = box.call(name, input)
    assert not result.is_error, result.content
    return result.content


def refused(box: Toolbox, name: str, input: dict) -> str:  # noqa: A002
    result = box.call(name, input)
    assert result.is_error, result.content
    return result.content


# -- the roles' tools -----------------------------------------------------------------------------

def test_each_role_gets_exactly_its_tools(repo: Path):
    names = {role: [s["name"] for s in Toolbox(repo, Hooks(), role=role).specs]
             for role in ("coder", "reviewer", "planner")}
    assert names == {
        "coder": ["read_file", "list_files", "search", "write_file", "edit_file", "run_command",
                  "check_criterion", "end_session"],
        "reviewer": ["read_file", "list_files", "search", "run_command", "submit_review"],
        "planner": ["read_file", "list_files", "search", "submit_tasks"],
    }
    assert Toolbox(repo, Hooks()).specs == TOOL_SPECS  # the default role: today's specs, so recordings replay
    reviewer_run = Toolbox(repo, Hooks(), role="reviewer").specs[3]
    assert "must not change any file" in reviewer_run["description"]
    with pytest.raises(ValueError, match="unknown role 'tester'"):
        Toolbox(repo, Hooks(), role="tester")


def test_specs_is_a_fresh_copy(repo: Path):
    box = Toolbox(repo, Hooks(), role="reviewer")
    box.specs[-1]["cache_control"] = {"type": "ephemeral"}
    assert "cache_control" not in box.specs[-1]


def test_a_reviewer_cannot_write_and_a_planner_cannot_run_commands(repo: Path):
    reviewer = Toolbox(repo, Hooks(), role="reviewer")
    for name, input in [("write_file", {"path": "x.py", "content": "x"}),
                        ("edit_file", {"path": "pkg/greet.py", "old": "helo", "new": "hello"}),
                        ("check_criterion", {"index": 1}), ("end_session", {"did": ["x"]})]:
        message = refused(reviewer, name, input)
        assert message.startswith(f"unknown tool '{name}'; the tools are: read_file, list_files, search, "
                                  "run_command, submit_review")
    assert not (repo / "x.py").exists() and "helo" in (repo / "pkg/greet.py").read_text()
    assert "helo" in ok(reviewer, "read_file", {"path": "pkg/greet.py"})
    ran = ok(reviewer, "run_command", {"command": "echo tests ran"})
    assert ran.startswith("exit code: 0\n--- stdout ---\ntests ran")

    planner = Toolbox(repo, Hooks(), role="planner")
    assert "unknown tool 'run_command'" in refused(planner, "run_command", {"command": "true"})
    assert ok(planner, "list_files", {}) == "pkg/greet.py"


def test_a_coder_has_no_hand_in_tools(repo: Path):
    box = Toolbox(repo, Hooks())
    assert "unknown tool 'submit_review'" in refused(box, "submit_review", REVIEW)
    assert "unknown tool 'submit_tasks'" in refused(box, "submit_tasks", PLAN)


# -- submit_review --------------------------------------------------------------------------------

def test_submit_review_is_recorded_and_handed_to_the_hook(repo: Path):
    hooks = Hooks()
    box = Toolbox(repo, hooks, role="reviewer")
    assert not box.handed_in
    assert ok(box, "submit_review", REVIEW) == "review recorded; stop now"
    assert box.handed_in and hooks.reviews == [box.review]
    assert box.review.approved is False
    assert [r.met for r in box.review.criteria_results] == [False, True]
    assert box.review.issues[0].severity == "major"
    assert "already handed in" in refused(box, "submit_review", REVIEW)
    assert hooks.reviews == [box.review]


def test_a_hooks_object_without_hand_in_methods_still_works(repo: Path):
    box = Toolbox(repo, OldHooks(), role="reviewer")
    assert ok(box, "submit_review", REVIEW) == "review recorded; stop now"
    assert box.review is not None
    planner = Toolbox(repo, OldHooks(), role="planner")
    assert ok(planner, "submit_tasks", PLAN) == "3 tasks recorded; stop now"


def test_a_hook_may_refuse_the_review(repo: Path):
    box = Toolbox(repo, Hooks(refuse=True), role="reviewer")
    assert refused(box, "submit_review", REVIEW) == "the run was stopped"
    assert box.review is None and not box.handed_in


@pytest.mark.parametrize(("change", "reason"), [
    ({"approved": True}, 'submit_review refused: approved is true but criterion "greet() returns \'hello\'" is not '
                         "met: approve only when every criterion is met, or set approved to false. Correct it and "
                         "call submit_review again."),
    ({"approved": True, "criteria_results": [{"criterion": "a", "met": False}, {"criterion": "b", "met": False}]},
     'criteria "a" and "b" are not met'),
    ({"approved": True, "criteria_results": [{"criterion": "a", "met": True}],
      "issues": [{"severity": "blocker", "description": "deletes the database"}]},
     'approved is true but blocker issue "deletes the database" is listed'),
    ({"criteria_results": []}, "criteria_results is empty: give one {criterion, met} for every acceptance criterion"),
    ({"issues": [{"severity": "critical", "description": "x"}]},
     "issues[0].severity: Input should be 'blocker', 'major' or 'minor'"),
    ({"issues": [{"severity": "minor", "description": "  "}]}, "issues[0].description: String should have at least 1"),
    ({"approved": "yes"}, "approved: Input should be a valid boolean"),
    ({"verdict": "fine"}, "verdict: Extra inputs are not permitted"),
])
def test_submit_review_refusals(repo: Path, change: dict, reason: str):
    hooks = Hooks()
    box = Toolbox(repo, hooks, role="reviewer")
    message = refused(box, "submit_review", {**REVIEW, **change})
    assert message.startswith("submit_review refused: ") and reason in message
    assert box.review is None and hooks.reviews == [] and not box.handed_in


def test_submit_review_without_criteria_results(repo: Path):
    box = Toolbox(repo, Hooks(), role="reviewer")
    assert "criteria_results: Field required" in refused(box, "submit_review", {"approved": False})


# -- submit_tasks ---------------------------------------------------------------------------------

def test_submit_tasks_is_recorded_and_handed_to_the_hook(repo: Path):
    hooks = Hooks()
    box = Toolbox(repo, hooks, role="planner")
    assert ok(box, "submit_tasks", PLAN) == "3 tasks recorded; stop now"
    assert box.handed_in and hooks.plans == [box.tasks]
    assert [t.key for t in box.tasks.tasks] == ["schema", "api", "ui"]
    assert box.tasks.tasks[2].dependencies == ["api", "schema"]
    assert box.tasks.summary.estimatedComplexity == "days"
    assert ok(Toolbox(repo, hooks, role="planner"), "submit_tasks", {"tasks": [task("one")]}) == \
        "1 task recorded; stop now"


@pytest.mark.parametrize(("tasks", "reason"), [
    ([task("a"), task("b"), task("a")], 'task key "a" is used by tasks 1 and 3: every key must be unique'),
    ([task("a"), task("b", "c")], 'task "b" depends on "c", which is not a task key of this list (the keys: a, b)'),
    ([task("a", "b"), task("b", "a")], "dependencies form a cycle: a -> b -> a"),
    ([task("a", "c"), task("b", "a"), task("c", "b")], "dependencies form a cycle: a -> c -> b -> a"),
    ([task("a", "a")], "dependencies form a cycle: a -> a"),
    ([task("a"), task("b", acceptance_criteria=[])], 'task "b" has no acceptance criteria'),
    ([task("a"), task("b", priority=9)], 'task "b" (tasks[1].priority): Input should be less than or equal to 5'),
    ([task("a", complexity="huge")], "task \"a\" (tasks[0].complexity): Input should be 'simple', 'medium' or"),
    ([], "tasks: List should have at least 1 item"),
])
def test_submit_tasks_refusals(repo: Path, tasks: list, reason: str):
    hooks = Hooks()
    box = Toolbox(repo, hooks, role="planner")
    message = refused(box, "submit_tasks", {"tasks": tasks})
    assert message.startswith("submit_tasks refused: ") and reason in message, message
    assert box.tasks is None and hooks.plans == []


def test_every_task_problem_is_named_at_once():
    with pytest.raises(HandinError) as e:
        check_tasks({"tasks": [task("a", "zz"), task("a", acceptance_criteria=[])]})
    assert str(e.value) == ('task key "a" is used by tasks 1 and 2: every key must be unique; '
                            'task "a" depends on "zz", which is not a task key of this list (the keys: a); '
                            'task "a" has no acceptance criteria: give at least one checkable criterion')


# -- agent CLIs -----------------------------------------------------------------------------------

@pytest.fixture
def channel(tmp_path: Path):
    opened = HandinChannel("s4", "review", parent=tmp_path)
    yield opened
    opened.close()


@pytest.fixture
def env(channel) -> dict[str, str]:
    return {**channel.env(), "SPECFLUX_ROLE": "reviewer"}


def test_a_review_from_a_file(tmp_path: Path, env: dict, channel):
    source = tmp_path / "review.json"
    source.write_text(json.dumps(REVIEW, indent=2))
    assert submit_from_cli("review", str(source), env) == (0, "review recorded")
    written = json.loads(Path(env["SPECFLUX_HANDIN"]).read_text())
    assert {k: written[k] for k in ("kind", "step", "data")} == {"kind": "review", "step": "s4", "data": REVIEW}
    assert channel.receive().data == REVIEW and channel.receive().problem is None


def test_tasks_from_stdin(tmp_path: Path):
    channel = HandinChannel("plan", "tasks", parent=tmp_path)
    env = {**channel.env(), "SPECFLUX_ROLE": "planner"}
    assert submit_from_cli("tasks", "-", env, stdin=io.StringIO(json.dumps(PLAN))) == (0, "3 tasks recorded")
    assert [t["key"] for t in channel.receive().data["tasks"]] == ["schema", "api", "ui"]


def test_stdin_by_default(env: dict, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(REVIEW)))
    assert submit_from_cli("review", "-", env) == (0, "review recorded")


def test_bad_json_names_line_and_column(tmp_path: Path, env: dict):
    source = tmp_path / "review.json"
    source.write_text('{\n  "approved": false,\n  "issues": [}\n')
    code, message = submit_from_cli("review", str(source), env)
    assert (code, message) == (1, f"{source}:3:14: not valid JSON: Expecting value")
    assert not Path(env["SPECFLUX_HANDIN"]).exists()
    assert submit_from_cli("review", "-", env, stdin=io.StringIO("")) == \
        (1, "<stdin>: empty: give the review as one JSON object")
    assert submit_from_cli("review", "-", env, stdin=io.StringIO("[1, 2]")) == \
        (1, "<stdin>: refused: give a JSON object {approved, issues, criteria_results}, not an array")


def test_refused_content_says_why_and_writes_nothing(tmp_path: Path, env: dict):
    source = tmp_path / "review.json"
    source.write_text(json.dumps({**REVIEW, "approved": True}))
    code, message = submit_from_cli("review", str(source), env)
    assert code == 1 and message.startswith(f"{source}: refused: approved is true but criterion")
    assert "\n" not in message and not Path(env["SPECFLUX_HANDIN"]).exists()

    env["SPECFLUX_ROLE"] = "planner"
    code, message = submit_from_cli("tasks", "-", env, stdin=io.StringIO(json.dumps({"tasks": [task("a", "a")]})))
    assert (code, message) == (1, "<stdin>: refused: dependencies form a cycle: a -> a; a task cannot depend "
                                  "on itself, directly or through others")


def test_a_missing_file(tmp_path: Path, env: dict):
    code, message = submit_from_cli("review", str(tmp_path / "nope.json"), env)
    assert code == 1 and message.startswith(f"{tmp_path / 'nope.json'}: cannot read this file")


def test_outside_a_session(tmp_path: Path):
    source = tmp_path / "review.json"
    source.write_text(json.dumps(REVIEW))
    assert submit_from_cli("review", str(source), {}) == \
        (2, "specflux submit-review runs inside a workflow run's reviewer session (SPECFLUX_HANDIN is not set)")
    assert submit_from_cli("tasks", str(source), {})[1] == \
        "specflux submit-tasks runs inside a workflow run's planner session (SPECFLUX_HANDIN is not set)"
    assert submit_from_cli("review", str(source), {"SPECFLUX_HANDIN": "handin.json"}) == \
        (2, "SPECFLUX_HANDIN must be an absolute file path, not 'handin.json'")
    env = {"SPECFLUX_HANDIN": str(tmp_path / "h.json"), "SPECFLUX_ROLE": "coder", "SPECFLUX_HANDIN_KEY": "k",
           "SPECFLUX_HANDIN_STEP": "s4"}
    assert submit_from_cli("review", str(source), env) == \
        (2, "specflux submit-review is the reviewer's hand-in; this session's role is coder (SPECFLUX_ROLE)")
    assert not (tmp_path / "h.json").exists()


def test_a_hand_in_without_the_steps_key_is_refused(tmp_path: Path, env: dict):
    source = tmp_path / "review.json"
    source.write_text(json.dumps(REVIEW))
    for name in ("SPECFLUX_HANDIN_KEY", "SPECFLUX_HANDIN_STEP"):
        code, message = submit_from_cli("review", str(source), {k: v for k, v in env.items() if k != name})
        assert code == 2 and f"({name} is not set: only the session the run started for this step" in message
    assert not Path(env["SPECFLUX_HANDIN"]).exists()


def test_what_a_channel_receives(tmp_path: Path, channel, env: dict):
    from specflux.agent.handin_rules import sign

    path = channel.path
    assert channel.receive().data is None and channel.receive().problem is None  # nothing handed in
    approving = {**REVIEW, "approved": True, "criteria_results": [{"criterion": "1", "met": True}]}

    def received(text: str):
        path.write_text(text)
        channel._received = None
        return channel.receive()

    assert "not valid JSON (line 1, column 2)" in received("{oops").problem
    unsealed = received(json.dumps({"kind": "review", "data": approving}))
    assert unsealed.data is None and "carries no seal of this step's key" in unsealed.tampered
    guessed = received(json.dumps({"kind": "review", "step": "s4", "data": approving, "seal": "0" * 64}))
    assert guessed.data is None and "does not match this step's key" in guessed.tampered
    other_key = sign("another step's key", "s4", "review", approving)
    assert "does not match" in received(json.dumps({"kind": "review", "step": "s4", "data": approving,
                                                    "seal": other_key})).tampered
    other_step = sign(channel.key, "s8", "review", approving)
    assert "sealed for step 's8', not for this step (s4)" in received(json.dumps(
        {"kind": "review", "step": "s8", "data": approving, "seal": other_step})).tampered
    bad = {**REVIEW, "approved": True}  # sealed by the step, but it contradicts itself
    done = received(json.dumps({"kind": "review", "step": "s4", "data": bad, "seal": sign(channel.key, "s4", "review", bad)}))
    assert done.tampered is None and "the hand-in was refused: approved is true" in done.problem


def test_a_channel_is_private_and_fresh_each_time(tmp_path: Path):
    import stat

    one, two = HandinChannel("s4", "review"), HandinChannel("s4", "review")
    try:
        assert one.folder != two.folder and one.key != two.key
        assert stat.S_IMODE(one.folder.stat().st_mode) == 0o700 and not list(one.folder.iterdir())
    finally:
        one.close()
        two.close()
    from specflux.base.tidy import wait

    wait()  # (removed in the background: base/tidy.py)
    assert not one.folder.exists() and not two.folder.exists()


# -- a reviewer session through the real SDK ------------------------------------------------------

def test_a_reviewer_session_end_to_end(api, repo: Path):
    verdict = {**REVIEW, "issues": [{"severity": "blocker", "description": "typo in the greeting"}]}
    server = api(Reply(text="Reading the change.", calls=[call("read_file", path="pkg/greet.py")]),
                 Reply(calls=[call("submit_review", **{**verdict, "approved": True})]),  # refused: goes back
                 Reply(calls=[call("submit_review", **verdict), call("read_file", path="pkg/greet.py")]),
                 Reply(text="never sent"))
    hooks = Hooks()
    box = Toolbox(repo, hooks, role="reviewer")
    request = SessionRequest(system="You review.", context="Review task 7.", model="claude-test", max_turns=10)
    outcome = AnthropicBackend().run(request, box)

    assert (outcome.stop, outcome.error, outcome.turns, outcome.handoff) == ("end_session", None, 3, None)
    assert len(server.requests) == 3  # nothing is sent after the accepted hand-in
    assert hooks.reviews == [box.review] and box.review.issues[0].severity == "blocker"
    for body in server.requests:
        assert [t["name"] for t in body["tools"]] == ["read_file", "list_files", "search", "run_command",
                                                      "submit_review"]
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    first = server.requests[1]["messages"][-1]["content"][0]
    assert first["is_error"] is False and "return 'helo'" in first["content"]
    refusal = server.requests[2]["messages"][-1]["content"][0]
    assert refusal["is_error"] is True
    assert refusal["content"].startswith("submit_review refused: approved is true but criterion")


def test_a_reviewer_that_never_hands_in_ends_by_the_turn_limit(api, repo: Path):
    api(*[Reply(calls=[call("list_files")])] * 3)
    box = Toolbox(repo, Hooks(), role="reviewer")
    request = SessionRequest(system="You review.", context="Review.", model="claude-test", max_turns=2)
    outcome = AnthropicBackend().run(request, box)
    assert (outcome.stop, outcome.turns, box.review) == ("max_turns", 2, None)


# -- the verdict checked without the model (handin_rules.plain_review) ------------------------------

def _verdicts() -> list:
    """Verdicts as agents write them, right and wrong in every field: each as the model takes or refuses it."""
    issue = {"severity": "major", "description": "greet() still returns 'helo'"}
    result = {"criterion": "1", "met": True}
    out = [REVIEW, {**REVIEW, "issues": []}, {k: v for k, v in REVIEW.items() if k != "issues"},
           {"approved": True, "criteria_results": [result, {"criterion": "criterion 2", "met": True}]},
           {"approved": False, "issues": [issue, {**issue, "severity": "blocker"}, {**issue, "severity": "minor"}],
            "criteria_results": [{**result, "met": False}]},
           {"approved": True, "issues": [{**issue, "severity": "blocker"}], "criteria_results": [result]},  # contradicts itself
           {"approved": True, "criteria_results": []}, [REVIEW], "approved", None, 1]
    for key, values in {"approved": [1, 0, "true", None, [], {}],
                        "issues": [None, {}, "", [None], [[]], [{}], [{**issue, "extra": 1}], [{"severity": "major"}]],
                        "criteria_results": [None, {}, "1", [None], [{}], [{"criterion": "1"}],
                                             [{**result, "why": "x"}], [{**result, "met": 1}], [{**result, "met": "yes"}]]}.items():
        out += [{**REVIEW, key: value} for value in values]
    out += [{**REVIEW, "extra": True}, {"issues": [], "criteria_results": [result]}, {"approved": True}]
    for text in ("", " ", " x", "x ", "\tx", "x\n", "\u00a0x", "x\u3000", "\x1cx", "x\x1f", "\u200bx", "é",
                 "criterion\u00a0one", 1, None, True, ["x"]):
        out.append({"approved": False, "issues": [{**issue, "description": text}], "criteria_results": [result]})
        out.append({"approved": False, "criteria_results": [{**result, "criterion": text}]})
    for severity in ("Major", "major ", "critical", "", 1, None):
        out.append({"approved": False, "issues": [{**issue, "severity": severity}], "criteria_results": [result]})
    return out


@pytest.mark.parametrize("verdict", _verdicts(), ids=lambda v: json.dumps(v)[:60])
def test_a_verdict_taken_without_the_model_is_the_one_the_model_makes(verdict):
    """Where `plain_review` takes a verdict, the model takes it too and dumps the same JSON; where
    it does not, the model judges it (and words a refusal)."""
    from pydantic import ValidationError

    from specflux.agent.handin_rules import plain_review

    plain = plain_review(verdict)
    try:
        modelled = Review.model_validate(verdict).model_dump(mode="json")
    except ValidationError:
        modelled = None
    if plain is not None:
        assert modelled == plain and json.dumps(plain) == json.dumps(modelled)  # the same keys in the same order
    clean = isinstance(verdict, dict) and modelled == {"issues": [], **verdict} and all(
        not s[0].isspace() and not s[-1].isspace()
        for s in [*(r["criterion"] for r in verdict["criteria_results"]), *(i["description"] for i in verdict.get("issues", []))])
    assert (plain is not None) == clean, "a verdict the model keeps as it is goes without the model"


def test_submit_review_in_its_own_process_checks_without_importing_pydantic(tmp_path: Path, env: dict, channel):
    """`specflux submit-review` of a verdict that needs nothing of the model: recorded, judged
    against the task's criteria, and pydantic never imported (the hand-in costs ~40 ms, not ~120);
    a verdict with a field to coerce still goes through the model, and one that judges the
    wrong criteria is refused by the same words either way."""
    import subprocess
    import sys

    task_file = tmp_path / "task-1-state.md"
    task_file.write_text("# Task 1: greet\n\n## 1. Metadata\n- **Status:** in_progress\n\n## 2. Requirements\nGreet.\n\n"
                         "### Acceptance Criteria\n- [ ] greet() returns 'hello'\n- [ ] tests pass\n")
    probe = ("import sys; from specflux.cli.main import main; code = main(['submit-review', '--json', '-']); "
             "print('pydantic' in sys.modules, file=sys.stderr); sys.exit(code)")
    for verdict, code, says, pydantic in [
            (REVIEW, 0, "review recorded", "False"),
            ({**REVIEW, "issues": [{"severity": "major", "description": "  trailing spaces  "}]}, 0, "review recorded", "True"),
            ({**REVIEW, "criteria_results": [{"criterion": "3", "met": True}]}, 1,
             "refused: criteria_results must judge each acceptance criterion of the task", "False")]:
        done = subprocess.run([sys.executable, "-c", probe], input=json.dumps(verdict), capture_output=True, text=True,
                              env={**env, "SPECFLUX_TASK_FILE": str(task_file), "PATH": "/usr/bin:/bin",
                                   **{k: os.environ[k] for k in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")
                                      if k in os.environ}})  # the suite's bytecode folder (conftest.py)
        assert done.returncode == code and says in done.stdout + done.stderr, done.stdout + done.stderr
        assert done.stderr.strip().splitlines()[-1] == pydantic, done.stderr
    received = channel.receive().data
    assert received["issues"][0]["description"] == "trailing spaces"  # the last recorded, as the model strips it
