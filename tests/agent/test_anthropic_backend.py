"""The Anthropic backend, end to end: the real SDK against a scripted local Messages API."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from specflux.agent.anthropic_backend import AnthropicBackend, live_backend, replay_backend
from specflux.agent.backend import SessionRequest
from specflux.agent.handoff import Handoff
from specflux.agent.recording import ReplayTransport, canonical
from specflux.agent.scripted import Fail, Reply, ScriptedServer, call
from specflux.agent.tools import Toolbox
from specflux.base.errors import AgentError, SpecfluxError

API_KEY = "sk-ant-test-DO-NOT-RECORD-4242"
END = call("end_session", did=["wrote hello.py", "fixed the greeting"], issues="none", next="more tests",
           chain_output={"summary": "hello.py greets", "downstream": "import greet from hello"})


class Hooks:
    def __init__(self, interrupt_on_check: bool = False, refuse_first_end: bool = False):
        self.checked: list[int] = []
        self.ended: list[Handoff] = []
        self.interrupt_on_check = interrupt_on_check
        self.refusals_left = 1 if refuse_first_end else 0

    def check_criterion(self, index: int) -> str:
        if self.interrupt_on_check:
            raise KeyboardInterrupt
        if index > 2:
            raise SpecfluxError(f"no acceptance criterion {index}")
        self.checked.append(index)
        return f"criterion {index} checked"

    def end_session(self, handoff: Handoff) -> str:
        if self.refusals_left:
            self.refusals_left -= 1
            raise SpecfluxError("criterion 2 is not checked yet")
        self.ended.append(handoff)
        return "session recorded"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "start"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "greet.py").write_text("def greet():\n    return 'helo'\n")
    return root


CONTEXT = "Task 7: fix the greeting.\u2028(A line separator, which JSONL readers must not split on.)"


def request(context: str = CONTEXT, **kw) -> SessionRequest:
    return SessionRequest(system="You are a careful engineer.", context=context, model="claude-test",
                          max_turns=kw.pop("max_turns", 10), task_id="7", **kw)


def files(root: Path) -> dict[str, bytes]:
    """Every file's bytes, but Python's bytecode caches: the session's `python hello.py` writes one
    (unless PYTHONDONTWRITEBYTECODE is set) whose header holds its source's mtime, which a replay
    made a second later does not share."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


EVERY_TOOL = [
    Reply(text="Looking around.", calls=[call("list_files"), call("read_file", path="pkg/greet.py"),
                                         call("search", pattern="hel+o", path="pkg")]),
    Reply(calls=[call("edit_file", path="pkg/greet.py", old="'helo'", new="'hello'"),
                 call("write_file", path="hello.py", content="from pkg.greet import greet\nprint(greet())\n"),
                 call("read_file", path="../escape.txt")],
          usage={"input_tokens": 50, "output_tokens": 30, "cache_read_input_tokens": 400,
                 "cache_creation_input_tokens": 10}),
    Reply(calls=[call("run_command", command="python3 hello.py; python3 -c 'import time; print(time.time_ns())'"),
                 call("check_criterion", index=1), call("check_criterion", index=5)]),
    Reply(calls=[END], usage={"input_tokens": 7, "output_tokens": 3, "cache_read_input_tokens": 600}),
]


def test_a_session_that_uses_every_tool(api, repo: Path):
    server = api(*EVERY_TOOL)
    hooks = Hooks()
    outcome = AnthropicBackend().run(request(), Toolbox(repo, hooks))

    assert (outcome.stop, outcome.error, outcome.turns) == ("end_session", None, 4)
    assert (repo / "pkg/greet.py").read_text() == "def greet():\n    return 'hello'\n"
    assert (repo / "hello.py").exists()
    assert hooks.checked == [1]
    assert hooks.ended == [outcome.handoff]
    assert outcome.handoff.chain_output.summary == "hello.py greets"
    assert outcome.handoff.did == ["wrote hello.py", "fixed the greeting"]
    usage = outcome.usage
    assert (usage.input_tokens, usage.output_tokens) == (100 + 50 + 100 + 7, 20 + 30 + 20 + 3)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (1000, 10)

    assert len(server.requests) == 4  # nothing is sent after a successful end_session
    for body in server.requests:
        assert body["model"] == "claude-test" and body["max_tokens"] == 8192
        assert body["system"] == [{"type": "text", "text": "You are a careful engineer.",
                                   "cache_control": {"type": "ephemeral"}}]
        assert body["tools"][-1]["name"] == "end_session"
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert sum("cache_control" in tool for tool in body["tools"]) == 1
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert server.requests[0]["messages"][0]["content"][0]["text"] == CONTEXT
    assert server.headers[0]["authorization"] == f"Bearer {API_KEY}"

    results = {r["tool_use_id"]: r for m in server.requests[3]["messages"] if m["role"] == "user"
               for r in m["content"] if r.get("type") == "tool_result"}
    assert len(results) == 9
    assert [results[f"toolu_002_{i}"]["is_error"] for i in (1, 2, 3)] == [False, False, True]
    assert "outside the repository" in results["toolu_002_3"]["content"]
    assert results["toolu_001_3"]["content"] == "pkg/greet.py:2:     return 'helo'"
    assert results["toolu_003_1"]["content"].startswith("exit code: 0\n--- stdout ---\nhello\n")
    assert [results[f"toolu_003_{i}"]["is_error"] for i in (2, 3)] == [False, True]
    assert "no acceptance criterion 5" in results["toolu_003_3"]["content"]


def test_a_refused_end_session_goes_back_to_the_model(api, repo: Path):
    server = api(Reply(calls=[END]), Reply(calls=[call("check_criterion", index=2), END]))
    hooks = Hooks(refuse_first_end=True)
    outcome = AnthropicBackend().run(request(), Toolbox(repo, hooks))
    assert outcome.stop == "end_session" and outcome.turns == 2 and hooks.checked == [2]
    refusal = server.requests[1]["messages"][-1]["content"][0]
    assert refusal["is_error"] is True and "not checked yet" in refusal["content"]


def test_rate_limits_and_overload_are_retried_with_exponential_backoff(api, repo: Path):
    server = api(Fail(429), Fail(529), Fail(503), Fail(500), Reply(calls=[END]))
    slept: list[float] = []
    outcome = AnthropicBackend(backoff_base_s=0.5, sleep=slept.append).run(request(), Toolbox(repo, Hooks()))
    assert outcome.stop == "end_session" and outcome.turns == 1
    assert slept == [0.5, 1.0, 2.0, 4.0]
    assert len(server.requests) == 5 and all(body == server.requests[0] for body in server.requests)


def test_retry_after_is_honoured_but_capped(api, repo: Path):
    api(Fail(429, retry_after=3), Fail(429, retry_after=86400), Reply(text="done"))
    slept: list[float] = []
    outcome = AnthropicBackend(sleep=slept.append).run(request(), Toolbox(repo, Hooks()))
    assert outcome.stop == "end_turn" and slept == [3.0, 60.0]


def test_retries_run_out_and_other_errors_are_not_retried(api, repo: Path):
    api(*[Fail(529, message="Overloaded")] * 3)
    slept: list[float] = []
    outcome = AnthropicBackend(max_retries=2, sleep=slept.append).run(request(), Toolbox(repo, Hooks()))
    assert outcome.stop == "error" and "529" in outcome.error and "Overloaded" in outcome.error
    assert slept == [1.0, 2.0] and outcome.handoff is None

    api(Fail(400, message="prompt is too long"))
    slept.clear()
    outcome = AnthropicBackend(sleep=slept.append).run(request(), Toolbox(repo, Hooks()))
    assert (outcome.stop, slept) == ("error", [])
    assert outcome.error == "the API answered 400 (invalid_request_error): prompt is too long"


def test_max_turns_without_end_session(api, repo: Path):
    server = api(*[Reply(calls=[call("read_file", path="pkg/greet.py")])] * 5)
    outcome = AnthropicBackend().run(request(max_turns=3), Toolbox(repo, Hooks()))
    assert (outcome.stop, outcome.turns, outcome.handoff) == ("max_turns", 3, None)
    assert len(server.requests) == 3


def test_a_reply_without_tool_calls_ends_the_turn(api, repo: Path):
    api(Reply(calls=[call("list_files")]), Reply(text="I am done."))
    outcome = AnthropicBackend().run(request(), Toolbox(repo, Hooks()))
    assert (outcome.stop, outcome.turns, outcome.handoff) == ("end_turn", 2, None)


def test_the_token_budget_stops_the_session(api, repo: Path):
    api(*[Reply(calls=[call("list_files")])] * 5)
    outcome = AnthropicBackend().run(request(token_budget=300), Toolbox(repo, Hooks()))
    assert (outcome.stop, outcome.turns, outcome.usage.total) == ("token_budget", 3, 360)


def test_a_budget_in_money_stops_the_session_priced_by_the_table(api, repo: Path):
    from specflux.agent.pricing import Pricing

    # Each reply: 100 input and 20 output tokens of "claude-test", priced at $1,000 / $5,000 per million.
    api(*[Reply(calls=[call("list_files")])] * 5)
    pricing = Pricing({"claude-test": {"input": 1000.0, "output": 5000.0}})
    outcome = AnthropicBackend().run(request(budget_usd=0.5, pricing=pricing), Toolbox(repo, Hooks()))
    assert (outcome.stop, outcome.turns) == ("budget_usd", 3), "$0.20 a turn: past $0.50 at the third"
    assert outcome.usage.model == "claude-test" and pricing.cost(outcome.usage) == pytest.approx(0.6)
    assert outcome.error == "spent $0.6000, past its budget of $0.5000"


def test_keyboard_interrupt_in_a_hook_ends_the_session_cleanly(api, repo: Path):
    api(Reply(calls=[call("write_file", path="w.txt", content="x"), call("check_criterion", index=1)]))
    outcome = AnthropicBackend().run(request(), Toolbox(repo, Hooks(interrupt_on_check=True)))
    assert (outcome.stop, outcome.turns, outcome.handoff) == ("interrupted", 1, None)
    assert (repo / "w.txt").read_text() == "x" and outcome.usage.input_tokens == 100


def test_keyboard_interrupt_while_waiting_to_retry(api, repo: Path):
    api(Fail(429), Reply(calls=[END]))

    def sleep(seconds: float) -> None:
        raise KeyboardInterrupt

    outcome = AnthropicBackend(sleep=sleep).run(request(), Toolbox(repo, Hooks()))
    assert outcome.stop == "interrupted" and outcome.handoff is None


def test_a_missing_api_key_is_a_clear_error(repo: Path, monkeypatch, tmp_path: Path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no credentials profile on disk either
    for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(AgentError, match="no Anthropic API key: set ANTHROPIC_API_KEY"):
        AnthropicBackend().run(request(), Toolbox(repo, Hooks()))
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(AgentError, match="cannot load Anthropic credentials"):
        AnthropicBackend().run(request(), Toolbox(repo, Hooks()))


def test_a_local_server_needs_no_key(repo: Path, monkeypatch):
    with ScriptedServer([Reply(text="hi")]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        assert AnthropicBackend().run(request(), Toolbox(repo, Hooks())).stop == "end_turn"


# -- recording and replay ------------------------------------------------------------------------


def record(api, repo: Path, tmp_path: Path, turns=EVERY_TOOL) -> tuple[Path, Path]:
    """Record a live session on a copy of `repo`; return (recording, the untouched start)."""
    start = tmp_path / "pristine"
    shutil.copytree(repo, start)
    api(*turns[:1], Fail(429, retry_after=0), *turns[1:])
    recording = tmp_path / "rec" / "s1.jsonl"
    outcome = live_backend(recording, task_id="7", sleep=lambda s: None).run(request(), Toolbox(repo, Hooks()))
    assert outcome.stop == "end_session" and outcome.recording == recording
    return recording, start


def test_a_recording_holds_bodies_and_no_secrets(api, repo: Path, tmp_path: Path):
    recording, _ = record(api, repo, tmp_path)
    text = recording.read_text()
    assert API_KEY not in text and "authorization" not in text.lower() and "x-api-key" not in text.lower()
    lines = [json.loads(line) for line in text.split("\n") if line]
    assert lines[0]["kind"] == "meta" and lines[0]["model"] == "claude-test" and lines[0]["task_id"] == "7"
    assert [(r["kind"], r["turn"]) for r in lines[1:]] == [
        ("request", 1), ("response", 1), ("request", 2), ("response", 2), ("request", 2), ("response", 2),
        ("request", 3), ("response", 3), ("request", 4), ("response", 4)]
    assert all(set(r) == {"kind", "turn", "body"} for r in lines[1::2])
    assert all(set(r) == {"kind", "turn", "status", "body"} for r in lines[2::2])
    assert [r["status"] for r in lines[2::2]] == [200, 429, 200, 200, 200]
    assert lines[1]["body"]["system"][0]["text"] == "You are a careful engineer."
    assert lines[2]["body"]["content"][1]["name"] == "list_files"


def test_replay_reproduces_the_session(api, repo: Path, tmp_path: Path):
    recording, start = record(api, repo, tmp_path)
    hooks = Hooks()
    outcome = replay_backend(recording).run(request(), Toolbox(start, hooks))
    assert outcome.stop == "end_session" and outcome.turns == 4
    assert files(start) == files(repo)  # the run_command output differed (time_ns); the files do not
    assert hooks.checked == [1] and hooks.ended[0].chain_output.downstream == "import greet from hello"
    assert outcome.usage.cache_read_input_tokens == 1000


def test_replay_refuses_a_different_context(api, repo: Path, tmp_path: Path):
    recording, start = record(api, repo, tmp_path)
    with pytest.raises(AgentError, match=r"diverged at turn 1 \(request 1\): messages\[0\]\.content\[0\]\.text"):
        replay_backend(recording).run(request("Task 7: something else."), Toolbox(start, Hooks()))


def test_replay_refuses_a_different_starting_tree(api, repo: Path, tmp_path: Path):
    recording, start = record(api, repo, tmp_path)
    (start / "pkg" / "greet.py").write_text("def greet():\n    return 'hi'\n")
    with pytest.raises(AgentError, match=r"diverged at turn 2 .*messages\[2\]\.content\[1\]\.content"):
        replay_backend(recording).run(request(), Toolbox(start, Hooks()))


def test_replay_past_the_end_of_a_recording(api, repo: Path, tmp_path: Path):
    recording, start = record(api, repo, tmp_path)
    recording.write_text("\n".join(recording.read_text().split("\n")[:5]) + "\n")
    with pytest.raises(AgentError, match="past the end of the recording"):
        replay_backend(recording).run(request(), Toolbox(start, Hooks()))


def test_replay_compares_only_the_exit_code_line_of_commands():
    body = {"messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "run_command", "input": {}},
                                          {"type": "tool_use", "id": "t2", "name": "read_file", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "exit code: 0\nA"},
                                     {"type": "tool_result", "tool_use_id": "t2", "content": "B\nC"}]}]}
    results = canonical(body)["messages"][1]["content"]
    assert [r["content"] for r in results] == ["exit code: 0", "B\nC"]


def test_a_broken_recording_names_its_line(tmp_path: Path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"kind": "meta"}\n{"kind": "request", "turn": 1, "body": {}}\nnot json\n')
    with pytest.raises(AgentError) as caught:
        ReplayTransport(path)
    assert str(caught.value).startswith(f"{path}:3: ")
