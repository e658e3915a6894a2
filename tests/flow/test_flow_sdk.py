"""Workflow runs end to end through the real anthropic SDK: `specflux flow start` with the default
`--agent anthropic`, in-process (so the `api` fixture's ANTHROPIC_BASE_URL applies), against the
scripted Messages API on 127.0.0.1; real git repositories; real pytest runs as validation.

Each coder step is one API session (write_file, check_criterion, end_session...), each reviewer
step one session with read-only tools and `submit_review`; the scripted replies are served in the
order the run asks for them: coder session, then reviewer session, and so on.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import git

from specflux.agent.scripted import Fail, Reply, call
from specflux.cli.main import main

# A key that cannot occur by accident: if it shows up in a recording or the run's files, it leaked.
API_KEY = "sk-ant-test-FLOW-SECRET-7c1d2e"

WRONG = "def add(a, b):\n    return a - b\n"
TIMES = "def add(a, b):\n    return a * b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
TEST = 'import sys\nsys.path.insert(0, "src")\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n'
DOCS = "# project\n\nadd(a, b) returns the sum of a and b.\n"
VALIDATE = """
[validate]
command = "{python} -m pytest -q -p no:cacheprovider --junitxml=.specflux-junit.xml"
junit_xml = ".specflux-junit.xml"
"""
CRITERION_1 = "add returns the sum"
CRITERION_2 = "README explains add"
REVIEWER_TOOLS = ["read_file", "list_files", "search", "run_command", "submit_review"]


# ------------------------------------------------------------------------------------ helpers


def cli(capsys, repo: Path, *argv: str) -> tuple[int, str, str]:
    """`specflux --root REPO ARGV...` in this process: exit code, stdout, stderr."""
    capsys.readouterr()
    code = main(["--root", str(repo), *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    """A repo whose add() subtracts, its test, [validate] running pytest, and tasks 1 (fix add) and
    2 (document add, depends on 1), committed."""
    (git_repo / "src").mkdir()
    (git_repo / "src" / "calc.py").write_text(WRONG)
    (git_repo / "tests").mkdir()
    (git_repo / "tests" / "test_calc.py").write_text(TEST)
    (git_repo / ".gitignore").write_text(".specflux-junit.xml\n__pycache__/\n")
    assert cli(capsys, git_repo, "init", git_repo)[0] == 0
    with open(git_repo / ".specflux" / "config.toml", "a") as f:
        f.write(VALIDATE.format(python=sys.executable))
    assert cli(capsys, git_repo, "new", "Fix add", "--ac", CRITERION_1)[0] == 0
    assert cli(capsys, git_repo, "new", "Document add", "--dep", "1", "--ac", CRITERION_2)[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def usage(i: int, o: int) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


def end(did: str, chain: str | None = None, downstream: str = "") -> object:
    """An end_session call; with `chain`, a chain output (the criteria must be checked first)."""
    extra = {"chain_output": {"summary": chain, "downstream": downstream}} if chain else {}
    return call("end_session", did=[did], issues="", next="", **extra)


def review(approved: bool, *issues: tuple[str, str], criteria: tuple[tuple[str, bool], ...] = ()) -> object:
    return call("submit_review", approved=approved,
                issues=[{"severity": s, "description": d} for s, d in issues],
                criteria_results=[{"criterion": c, "met": m} for c, m in criteria])


def coder_fixes_add(tokens: tuple[int, int] = (100, 20)) -> list[Reply]:
    """One coder session that fixes add(), ticks its criterion and hands over a chain output."""
    return [Reply(calls=[call("write_file", path="src/calc.py", content=RIGHT), call("check_criterion", index=1)],
                  usage=usage(*tokens)),
            Reply(calls=[end("Fixed add() to return a + b", chain="add(a, b) in src/calc.py returns a + b",
                             downstream="from calc import add")], usage=usage(*tokens))]


def coder_documents_add() -> list[Reply]:
    return [Reply(calls=[call("write_file", path="README.md", content=DOCS), call("check_criterion", index=1),
                         end("Documented add() in README.md", chain="README.md explains add()")])]


def reviewer_approves(criterion: str = CRITERION_1, tokens: tuple[int, int] = (100, 20)) -> list[Reply]:
    return [Reply(calls=[call("read_file", path="src/calc.py")], usage=usage(*tokens)),
            Reply(calls=[review(True, criteria=((criterion, True),))], usage=usage(*tokens))]


def start(capsys, repo: Path, *args: str) -> tuple[int, str, str]:
    return cli(capsys, repo, "flow", "start", *args)


def status(capsys, repo: Path) -> dict:
    code, out, err = cli(capsys, repo, "flow", "status", "--json")
    assert code == 0, err
    return json.loads(out)


def show(capsys, repo: Path, task_id: str) -> dict:
    code, out, err = cli(capsys, repo, "show", task_id, "--json")
    assert code == 0, err
    return json.loads(out)


def trailers(repo: Path, rev: str) -> dict[str, str]:
    text = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", rev)
    return dict(line.split(": ", 1) for line in text.splitlines() if line.strip())


def run_commits(repo: Path, run_id: str) -> list[dict[str, str]]:
    """The trailers of every commit of run `run_id`, oldest first, with the subject as `subject`."""
    out = []
    for sha in reversed(git(repo, "log", "--format=%H").split()):
        t = trailers(repo, sha)
        if t.get("Specflux-Run") == run_id:
            out.append({**t, "sha": sha, "subject": git(repo, "log", "-1", "--format=%s", sha).strip()})
    return out


def first_user_text(body: dict) -> str:
    """The text of the first user message of a request (the session's context)."""
    return "\n".join(b["text"] for b in body["messages"][0]["content"] if b.get("type") == "text")


def session_starts(server) -> list[int]:
    """The index in `server.requests` of each session's first request (one user message)."""
    return [i for i, body in enumerate(server.requests) if len(body["messages"]) == 1]


def tool_names(body: dict) -> list[str]:
    return [t["name"] for t in body["tools"]]


def events(repo: Path, run_id: str) -> list[dict]:
    path = repo / ".specflux" / "runs" / run_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------- 1. a failed test named in the retry


def test_a_failed_test_is_named_in_the_retry_and_both_tasks_complete(project, api, capsys):
    attempt_1 = [Reply(calls=[call("write_file", path="src/calc.py", content=TIMES)], usage=usage(1000, 50)),
                 Reply(calls=[end("Rewrote add()")], usage=usage(1100, 60))]
    attempt_2 = coder_fixes_add(tokens=(1200, 70))
    review_1 = reviewer_approves(tokens=(900, 30))
    task_2 = coder_documents_add()
    review_2 = [Reply(calls=[review(True, criteria=((CRITERION_2, True),))])]
    server = api(*attempt_1, *attempt_2, *review_1, *task_2, *review_2)

    code, out, err = start(capsys, project)

    assert code == 0, out + err
    run_id = out.splitlines()[0]
    assert f"run {run_id}: completed" in out
    assert len(server.requests) == 2 + 2 + 2 + 1 + 1, "every scripted reply was used, none more"
    starts = session_starts(server)
    assert starts == [0, 2, 4, 6, 7], "five sessions: coder, coder, reviewer, coder, reviewer"

    # The first attempt knew of no failure; the second is told which test failed and why.
    first, retry = first_user_text(server.requests[0]), first_user_text(server.requests[2])
    assert "tests/test_calc.py::test_add" not in first and "Why the last attempt" not in first
    assert "Why the last attempt failed" in retry
    assert "tests/test_calc.py::test_add" in retry and "assert 6 == 5" in retry, retry

    # The reviewer gets read-only tools and submit_review, and the change to review.
    reviewer = server.requests[4]
    assert tool_names(reviewer) == REVIEWER_TOOLS
    assert tool_names(server.requests[0])[-2:] == ["check_criterion", "end_session"]
    assert "write_file" not in tool_names(reviewer) and "end_session" not in tool_names(reviewer)
    reviewer_context = first_user_text(reviewer)
    assert "# Review of task #1" in reviewer_context and "Tests: passed (run by the harness)" in reviewer_context
    assert "+    return a + b" in reviewer_context, "the coder's diff is shown"

    # Task 2's coder gets task 1's chain output, wired in when task 1 was accepted.
    assert "add(a, b) in src/calc.py returns a + b" in first_user_text(server.requests[6])

    # The run's state.
    state = status(capsys, project)
    assert state["runId"] == run_id and state["status"] == "completed"
    assert [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    assert state["taskAttempts"] == {"1": 2, "2": 1}
    assert state["validation"]["passed"] is True
    m = state["metrics"]
    assert (m["tasksCompleted"], m["tasksFailed"], m["totalAttempts"], m["totalReviews"]) == (2, 0, 3, 2)
    # Token usage: the scripted replies' `usage`, summed per run and per task.
    task_1_in = 1000 + 1100 + 1200 + 1200 + 900 + 900
    task_1_out = 50 + 60 + 70 + 70 + 30 + 30
    assert (state["taskMetrics"]["1"]["inputTokens"], state["taskMetrics"]["1"]["outputTokens"]) == (task_1_in, task_1_out)
    assert (state["taskMetrics"]["2"]["inputTokens"], state["taskMetrics"]["2"]["outputTokens"]) == (200, 40)
    assert (m["inputTokens"], m["outputTokens"]) == (task_1_in + 200, task_1_out + 40)
    assert state["taskMetrics"]["1"]["attempts"] == 2 and state["taskMetrics"]["1"]["reviews"] == 1

    # The task files: task 1 complete with the coder's chain output, wired into task 2.
    task1, task2 = show(capsys, project, "1"), show(capsys, project, "2")
    assert task1["status"] == "complete" and task2["status"] == "complete"
    assert task1["chain_output"]["summary"] == "add(a, b) in src/calc.py returns a + b"
    assert task2["chain_inputs"][0]["body"].startswith("add(a, b) in src/calc.py returns a + b")
    assert [s["did"][0] for s in task1["sessions"]] == ["Rewrote add()", "Fixed add() to return a + b",
                                                         "Review: approved (1/1 criteria met)"]
    assert task1["criteria"][0]["checked"] is True
    assert (project / "src" / "calc.py").read_text() == RIGHT
    assert (project / "README.md").read_text() == DOCS

    # Every commit of the run carries its run and role; the coder's and reviewer's their step.
    commits = run_commits(project, run_id)
    roles = [c["Specflux-Role"] for c in commits]
    assert roles.count("coder") == 3 and roles.count("reviewer") == 2 and "engine" in roles
    assert all(c.get("Specflux-Step") for c in commits if c["Specflux-Role"] in ("coder", "reviewer"))
    assert [c["Specflux-Input-Tokens"] for c in commits if c["Specflux-Role"] == "coder"] == ["2100", "2400", "100"]
    assert git(project, "status", "--porcelain", "--", "src", "README.md").strip() == "", "all the work is committed"
    assert cli(capsys, project, "lint")[0] == 0
    code, narrative, _ = cli(capsys, project, "flow", "log")
    assert "tests failed: tests/test_calc.py::test_add" in narrative and "task 1 is complete" in narrative


# ------------------------------------------------------------- 2. a rejection answered


def test_a_rejection_reaches_the_next_coder_session_then_the_task_is_approved(project, api, capsys):
    issue = "add() has no docstring saying it returns the sum"
    rejected = [Reply(calls=[review(False, ("major", issue), criteria=((CRITERION_1, False),))])]
    fixed_again = [Reply(calls=[call("edit_file", path="src/calc.py", old="def add(a, b):\n",
                                     new='def add(a, b):\n    """The sum of a and b."""\n'),
                                end("Added the docstring", chain="add(a, b) returns the sum")])]
    server = api(*coder_fixes_add(), *rejected, *fixed_again, *reviewer_approves())

    code, out, err = start(capsys, project, "1")

    assert code == 0, out + err
    assert session_starts(server) == [0, 2, 3, 4]
    retry = first_user_text(server.requests[3])
    assert "The reviewer requested changes:" in retry
    assert f"[major] {issue}" in retry, retry
    assert f"Criteria the reviewer found not met:\n- {CRITERION_1}" in retry
    assert "tests/test_calc.py::test_add" not in retry, "the tests passed: only the review is news"
    state = status(capsys, project)
    assert state["status"] == "completed" and [t["status"] for t in state["tasks"]] == ["complete"]
    assert state["taskMetrics"]["1"]["attempts"] == 2 and state["taskMetrics"]["1"]["reviews"] == 2
    assert state["reviewerOutput"]["approved"] is True
    sessions = show(capsys, project, "1")["sessions"]
    assert sessions[1]["did"][0] == "Review: changes requested (0/1 criteria met)"
    assert issue in sessions[1]["issues"]
    # The chain output is the last attempt's.
    assert show(capsys, project, "1")["chain_output"]["summary"] == "add(a, b) returns the sum"
    assert '"""The sum of a and b."""' in (project / "src" / "calc.py").read_text()


# ------------------------------------------------------------- 3. no verdict is no approval


def test_a_reviewer_that_ends_its_turn_without_a_verdict_is_a_blocker(project, api, capsys):
    silent = [Reply(calls=[call("read_file", path="src/calc.py")]), Reply(text="Looks good to me.")]
    server = api(*coder_fixes_add(), *silent, *coder_fixes_add(), *reviewer_approves())

    code, out, err = start(capsys, project, "1")

    assert code == 0, out + err
    assert session_starts(server) == [0, 2, 4, 6]
    events_ = events(project, out.splitlines()[0])
    verdicts = [e["output"] for e in events_ if e["type"] == "step_finished" and e["kind"] == "reviewer"]
    assert verdicts[0]["approved"] is False
    assert [i["severity"] for i in verdicts[0]["issues"]] == ["blocker"]
    assert "handed in no verdict" in verdicts[0]["issues"][0]["description"]
    assert verdicts[1]["approved"] is True
    # The coder after it is told so, and the reviewer's session entry says it ended without one.
    retry = first_user_text(server.requests[4])
    assert "The reviewer gave no verdict (this is not a rejection of your work):\n- the reviewer handed in no " \
        "verdict (its session ended without one)" in retry, retry
    sessions = show(capsys, project, "1")["sessions"]
    assert sessions[1]["did"][0].startswith("Review ended without a verdict")
    assert status(capsys, project)["status"] == "completed"


# ------------------------------------------------------------- 4. the API keeps refusing


def rate_limited(n: int) -> list[Fail]:
    """`n` 429 answers without a wait (`retry-after: 0`), so the backend's own retries are fast."""
    return [Fail(429, retry_after=0, message="rate limited by the scripted server")] * n


BACKEND_TRIES = 5  # AnthropicBackend(max_retries=4): the first request and 4 retries


def test_a_rate_limit_outlasting_the_backends_retries_ends_the_session_on_an_error(project, api, capsys):
    """What is observed: the session ends with stop "error" and a progress-log entry saying so;
    the harness's tests still run (the coder wrote nothing, so they fail) and the queue's
    `coder-retry` edge sends the coder again, told of the failed test."""
    server = api(*rate_limited(BACKEND_TRIES), *coder_fixes_add(), *reviewer_approves())

    code, out, err = start(capsys, project, "1")

    assert code == 0, out + err
    assert len(server.requests) == BACKEND_TRIES + 4
    assert all(body == server.requests[0] for body in server.requests[:BACKEND_TRIES]), "the same request, retried"
    state = status(capsys, project)
    assert state["status"] == "completed" and state["tasks"][0]["status"] == "complete"
    assert state["taskAttempts"] == {"1": 2}
    first = show(capsys, project, "1")["sessions"][0]
    assert first["did"][0].startswith("Session ended without a hand-off: the session stopped on an error")
    assert "429" in first["issues"] and "rate limited by the scripted server" in first["issues"]
    commits = run_commits(project, state["runId"])
    assert commits[0]["Specflux-Stop"] == "error" and commits[0]["Specflux-Role"] == "coder"


def test_a_rate_limited_coder_step_is_an_agent_error_that_on_agent_error_retries(project, api, capsys):
    server = api(*rate_limited(BACKEND_TRIES), *coder_fixes_add(), *reviewer_approves())

    code, out, err = start(capsys, project, "1")

    assert code == 0, out + err
    run_id = out.splitlines()[0]
    coder_steps = [e for e in events(project, run_id) if e["type"] == "step_finished" and e["kind"] == "coder"]
    assert coder_steps[0]["status"] == "ERROR" and coder_steps[0]["error"]["type"] == "RATE_LIMIT"
    decision = next(e for e in events(project, run_id) if e["type"] == "decision" and e["seq"] > coder_steps[0]["seq"])
    assert "rate limit: retry coder" in decision["decision"].get("why", "")
    assert len(server.requests) == BACKEND_TRIES + 4


# ------------------------------------------------------------- 5. recordings


def recordings_in_order(folder: Path, steps: list[str]) -> list[Path]:
    """The recordings of `steps` in the order they ran: `s8.jsonl` is a step's first try, `s8-2.jsonl`
    its second."""
    tries = {}
    for path in folder.glob("*.jsonl"):
        m = re.fullmatch(r"(s\d+)(?:-(\d+))?", path.stem)
        assert m, f"a recording named like no step: {path.name}"
        tries[(m.group(1), int(m.group(2) or 1))] = path
    assert {step for step, _ in tries} == set(steps), "a recording for each agent step, and none else"
    return [tries[key] for key in sorted(tries, key=lambda k: (steps.index(k[0]), k[1]))]


def test_every_agent_call_of_the_run_is_recorded_under_the_run(project, api, capsys):
    attempt_1 = [Reply(calls=[call("write_file", path="src/calc.py", content=TIMES), end("Rewrote add()")])]
    server = api(*attempt_1, Fail(429, retry_after=0), *coder_fixes_add(), *reviewer_approves())

    code, out, err = start(capsys, project, "1")

    assert code == 0, out + err
    run_id = out.splitlines()[0]
    folder = project / ".specflux" / "runs" / run_id / "recordings"
    agent_steps = [e["stepId"] for e in events(project, run_id)
                   if e["type"] == "step_started" and e["kind"] in ("coder", "reviewer")]
    assert len(agent_steps) == 3, "coder, coder, reviewer"
    recorded_requests, statuses = [], []
    for path in recordings_in_order(folder, agent_steps):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert lines[0]["kind"] == "meta" and lines[0]["task_id"] == "1"
        recorded_requests += [r["body"] for r in lines if r["kind"] == "request"]
        statuses += [r["status"] for r in lines if r["kind"] == "response"]
    assert recorded_requests == server.requests, "every request the server received, in order"
    assert statuses == [200, 429, 200, 200, 200, 200], "the retried 429 is recorded too"
    leaked = [p for p in (project / ".specflux").rglob("*") if p.is_file() and API_KEY in p.read_text(errors="ignore")]
    assert leaked == [], "the API key is never written"
    workspace_recordings = project / ".specflux" / "recordings"
    assert not workspace_recordings.exists() or not any(workspace_recordings.iterdir()), \
        "a run's sessions are recorded under the run, not in the workspace's recordings"
    # Recordings stay out of git (they can hold file contents); the run leaves nothing uncommitted.
    assert git(project, "check-ignore", str(folder / f"{agent_steps[0]}.jsonl")).strip()
    assert git(project, "status", "--porcelain").strip() == ""


# ------------------------------------------------------------- limits and options


def test_the_run_wide_token_budget_stops_before_the_next_step_and_the_model_is_sent(project, api, capsys):
    server = api(*coder_fixes_add(), *reviewer_approves())

    code, out, err = start(capsys, project, "1", "--token-budget", "150", "--model", "claude-test-model")

    assert code == 1, out + err
    assert "failed (token_budget: the run used 240 tokens of its budget of 150; over the budget by 90 tokens" in out
    assert len(server.requests) == 2, "the coder's session ran (240 tokens); the reviewer never started"
    assert {body["model"] for body in server.requests} == {"claude-test-model"}
    state = status(capsys, project)
    assert state["status"] == "failed" and state["failureReason"] == "token_budget"
    assert (state["metrics"]["inputTokens"], state["metrics"]["outputTokens"]) == (200, 40)
    assert state["metrics"]["totalReviews"] == 0


def test_a_session_stops_where_the_run_wide_token_budget_runs_out(project, api, capsys):
    """The run's budget is passed down: a session does not spend past what the run has left."""
    write = [Reply(calls=[call("read_file", path="src/calc.py")], usage=usage(100, 20)) for _ in range(3)]
    server = api(*write, *coder_fixes_add(), *reviewer_approves())

    code, out, err = start(capsys, project, "1", "--token-budget", "150")

    assert code == 1, out + err
    assert len(server.requests) == 2, "the session went on past the run's budget (120 + 120 > 150)"
    state = status(capsys, project)
    assert state["failureReason"] == "token_budget"
    last = run_commits(project, state["runId"])[0]
    assert last["Specflux-Stop"] == "token_budget"


# ------------------------------------------------------------- bugs found (see each reason)


def test_the_retry_names_the_attempt_it_is(project, api, capsys):
    attempt_1 = [Reply(calls=[call("write_file", path="src/calc.py", content=TIMES), end("Rewrote add()")])]
    server = api(*attempt_1, *coder_fixes_add(), *reviewer_approves())

    code, out, err = start(capsys, project, "1")

    assert code == 0, out + err
    retry = first_user_text(server.requests[1])
    assert "## Why the last attempt failed (attempt 2 of this task)" in retry, retry[retry.index("## Why"):]


def test_a_reviewer_cannot_change_the_code_it_reviews(project, api, capsys):
    meddling = [Reply(calls=[call("run_command", command="echo reviewer > hack.txt; echo 'x = 1' >> src/calc.py")]),
                Reply(calls=[review(True, criteria=((CRITERION_1, True),))])]
    api(*coder_fixes_add(), *meddling)

    code, out, err = start(capsys, project, "1")

    assert code == 0, out + err
    reviewer_commit = next(c for c in reversed(run_commits(project, out.splitlines()[0]))
                           if c["Specflux-Role"] == "reviewer")
    files = git(project, "show", "--name-only", "--format=", reviewer_commit["sha"]).split()
    # task files alone: its own (the review, and the acceptance it led to: flow/early_acceptance.py)
    # and the dependent task its chain output was wired into
    assert files[0] == ".specflux/task-states/task-1-state.md", files
    assert all(f.startswith(".specflux/task-states/task-") for f in files), files
    assert git(project, "show", "HEAD:src/calc.py") == RIGHT, "the accepted code is the code that was validated"
    kept = sorted(p.name.split("-", 2)[-1] for p in (project / ".specflux" / "reverted").iterdir())
    assert kept == ["calc.py", "hack.txt"], "what was put back is kept (a person's edit meanwhile is never lost)"


def test_without_a_handed_over_chain_output_the_coders_account_is_wired_not_the_verdict(project, api, capsys):
    coder = [Reply(calls=[call("write_file", path="src/calc.py", content=RIGHT), call("check_criterion", index=1),
                          end("Fixed add() to return a + b")])]
    api(*coder, *reviewer_approves())

    code, out, err = start(capsys, project, "1")

    assert code == 0, out + err
    summary = show(capsys, project, "1")["chain_output"]["summary"]
    assert "Fixed add() to return a + b" in summary and "Review:" not in summary, summary
