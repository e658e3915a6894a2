"""Usage and cost: each agent CLI's own output read for tokens, model and cost (usage_readers.py),
tokens priced by the shipped table and config.toml (pricing.py), `unknown` never 0, the trailers,
and a command agent stopped while it runs once its streamed usage passes its budget.

The sample outputs follow each CLI's documented format: Claude Code `-p --output-format json` /
`stream-json --verbose`, `codex exec --json`, `gemini --output-format json` / `stream-json`,
aider's per-message token report, `opencode run --format json`.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest
from patience import patience

from specflux.agent.backend import SessionRequest, Usage
from specflux.agent.command_backend import CommandBackend
from specflux.agent.pricing import Pricing, format_cost, shipped
from specflux.agent.session import usage_trailers
from specflux.agent.tools import Toolbox
from specflux.agent.usage_readers import UsageMeter, read_usage
from specflux.base.errors import ParseError
from specflux.format.fields import format_usage, parse_usage
from specflux.store.config import load_config

# ------------------------------------------------------------------ samples, as each CLI prints them

CLAUDE_STREAM = [
    {"type": "system", "subtype": "init", "cwd": "/repo", "session_id": "9f1c", "model": "claude-sonnet-4-5-20250929",
     "tools": ["Read", "Edit", "Bash"], "permissionMode": "default"},
    {"type": "assistant", "session_id": "9f1c", "message": {
        "id": "msg_01A", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Reading the task."}], "stop_reason": None,
        "usage": {"input_tokens": 4, "cache_creation_input_tokens": 5120, "cache_read_input_tokens": 12000,
                  "output_tokens": 31, "service_tier": "standard"}}},
    {"type": "assistant", "session_id": "9f1c", "message": {  # the same message's next content block
        "id": "msg_01A", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.py"}}],
        "usage": {"input_tokens": 4, "cache_creation_input_tokens": 5120, "cache_read_input_tokens": 12000,
                  "output_tokens": 31, "service_tier": "standard"}}},
    {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                              "content": "print('hi')"}]}},
    {"type": "assistant", "session_id": "9f1c", "message": {
        "id": "msg_01B", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Done."}],
        "usage": {"input_tokens": 6, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 17120,
                  "output_tokens": 120, "service_tier": "standard"}}},
]
CLAUDE_RESULT = {
    "type": "result", "subtype": "success", "is_error": False, "duration_ms": 9120, "duration_api_ms": 8800,
    "num_turns": 3, "result": "Done.", "session_id": "9f1c", "total_cost_usd": 0.0347,
    "usage": {"input_tokens": 10, "cache_creation_input_tokens": 5420, "cache_read_input_tokens": 29120,
              "output_tokens": 151, "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"},
    "modelUsage": {
        "claude-haiku-4-5-20251001": {"inputTokens": 300, "outputTokens": 20, "cacheReadInputTokens": 0,
                                      "cacheCreationInputTokens": 0, "webSearchRequests": 0, "costUSD": 0.0004},
        "claude-sonnet-4-5-20250929": {"inputTokens": 10, "outputTokens": 151, "cacheReadInputTokens": 29120,
                                       "cacheCreationInputTokens": 5420, "webSearchRequests": 0, "costUSD": 0.0343}},
}
CODEX_EXEC = [
    {"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "**Reading the task**"}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc ls",
                                        "aggregated_output": "src\n", "exit_code": 0, "status": "completed"}},
    {"type": "turn.completed", "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}},
]
GEMINI_JSON = {
    "response": "The task is done.",
    "stats": {
        "models": {
            "gemini-2.5-pro": {"api": {"totalRequests": 2, "totalErrors": 0, "totalLatencyMs": 5053},
                               "tokens": {"prompt": 24939, "candidates": 20, "total": 25113, "cached": 21263,
                                          "thoughts": 154, "tool": 0}},
            "gemini-2.5-flash": {"api": {"totalRequests": 1, "totalErrors": 0, "totalLatencyMs": 1200},
                                 "tokens": {"prompt": 800, "candidates": 12, "total": 812, "cached": 0,
                                            "thoughts": 0, "tool": 0}}},
        "tools": {"totalCalls": 1, "totalSuccess": 1, "totalFail": 0, "totalDurationMs": 16},
        "files": {"totalLinesAdded": 3, "totalLinesRemoved": 1}},
}
GEMINI_STREAM = [
    {"type": "init", "timestamp": "2025-10-10T12:00:00.000Z", "session_id": "abc123", "model": "gemini-2.5-flash"},
    {"type": "message", "role": "assistant", "content": "Listing files.", "delta": True},
    {"type": "result", "status": "success",
     "stats": {"total_tokens": 1450, "input_tokens": 1200, "output_tokens": 250, "duration_ms": 3100, "tool_calls": 1}},
]
AIDER_OUTPUT = """\
Aider v0.86.1
Main model: anthropic/claude-sonnet-4-5-20250929 with diff edit format, prompt cache, infinite output
Weak model: anthropic/claude-haiku-4-5-20251001
Git repo: .git with 12 files
Repo-map: using 4096 tokens, files refresh
Applied edit to src/calc.py
Tokens: 4.6k sent, 1.1k cache write, 2.0k cache hit, 345 received. Cost: $0.01 message, $0.01 session.
Applied edit to README.md
Tokens: 5.2k sent, 4.8k cache hit, 120 received. Cost: $0.0041 message, $0.02 session.
"""
OPENCODE_RUN = [
    {"type": "step_start", "timestamp": 1767036059338, "sessionID": "ses_494719016ffe",
     "part": {"id": "prt_b6b8e1", "sessionID": "ses_494719016ffe", "messageID": "msg_b6b8e0", "type": "step-start",
              "snapshot": "46358aa5"}},
    {"type": "text", "timestamp": 1767036060001, "sessionID": "ses_494719016ffe",
     "part": {"id": "prt_b6b8e2", "type": "text", "text": "Fixing add()."}},
    {"type": "step_finish", "timestamp": 1767036061921, "sessionID": "ses_494719016ffe",
     "part": {"id": "prt_b6b8e3", "sessionID": "ses_494719016ffe", "messageID": "msg_b6b8e0", "type": "step-finish",
              "reason": "tool-calls", "snapshot": "46358aa5", "cost": 0.0121,
              "tokens": {"input": 3000, "output": 200, "reasoning": 50, "cache": {"read": 9000, "write": 1000}}}},
    {"type": "step_finish", "timestamp": 1767036065000, "sessionID": "ses_494719016ffe",
     "part": {"id": "prt_b6b8e9", "type": "step-finish", "reason": "stop", "cost": 0.0033,
              "tokens": {"input": 100, "output": 40, "reasoning": 0, "cache": {"read": 12000, "write": 0}}}},
]


def lines(events: list) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


# ------------------------------------------------------------------ the readers


def test_claude_code_json_and_stream_json():
    whole = read_usage("claude", json.dumps(CLAUDE_RESULT))
    assert whole == Usage(input_tokens=10, output_tokens=151, cache_read_input_tokens=29120,
                          cache_creation_input_tokens=5420, model="claude-sonnet-4-5-20250929", cost_usd=0.0347,
                          cost_reported=True)
    streamed = read_usage("claude", lines(CLAUDE_STREAM + [CLAUDE_RESULT]))
    assert streamed == whole, "the result, the session's own total, wins"
    # Before the result: each message counted once, however many content blocks it had.
    meter = UsageMeter("claude")
    for event in CLAUDE_STREAM:
        meter.feed(json.dumps(event))
    running = meter.usage()
    assert (running.input_tokens, running.output_tokens, running.cache_read_input_tokens,
            running.cache_creation_input_tokens) == (10, 151, 29120, 5420)
    assert running.model == "claude-sonnet-4-5-20250929" and running.cost_usd is None


def test_codex_exec_json():
    usage = read_usage("codex", lines(CODEX_EXEC))
    assert usage == Usage(input_tokens=24763 - 24448, output_tokens=122, cache_read_input_tokens=24448)
    assert usage.model is None and usage.total == 24763 + 122


def test_gemini_json_and_stream_json():
    usage = read_usage("gemini", json.dumps(GEMINI_JSON, indent=2))  # printed over many lines
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens) == \
        (24939 - 21263 + 800, 20 + 154 + 12, 21263)
    assert usage.model == "gemini-2.5-pro", "the model that did most of the work"
    streamed = read_usage("gemini", lines(GEMINI_STREAM))
    assert (streamed.input_tokens, streamed.output_tokens, streamed.model) == (1200, 250, "gemini-2.5-flash")


def test_aider_token_and_cost_lines():
    usage = read_usage("aider", AIDER_OUTPUT)
    assert usage.model == "anthropic/claude-sonnet-4-5-20250929"
    assert (usage.input_tokens, usage.output_tokens) == (4600 - 1100 - 2000 + 5200 - 4800, 345 + 120)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (2000 + 4800, 1100)
    assert (usage.cost_usd, usage.cost_reported) == (0.02, True), "the session figure, as aider reports it"


def test_opencode_run_format_json():
    usage = read_usage("opencode", lines(OPENCODE_RUN))
    assert (usage.input_tokens, usage.output_tokens) == (3100, 290)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (21000, 1000)
    assert usage.cost_usd == pytest.approx(0.0154) and usage.cost_reported


@pytest.mark.parametrize("text,kind", [
    (json.dumps(CLAUDE_RESULT), "claude"), (lines(CODEX_EXEC), "codex"), (json.dumps(GEMINI_JSON, indent=2), "gemini"),
    (lines(GEMINI_STREAM), "gemini"), (AIDER_OUTPUT, "aider"), (lines(OPENCODE_RUN), "opencode"),
])
def test_auto_reads_each_as_its_own_reader_does(text, kind):
    assert read_usage("auto", text) == read_usage(kind, text)


def test_a_reader_reads_only_its_own_cli():
    assert read_usage("codex", json.dumps(CLAUDE_RESULT)) is None
    assert read_usage("claude", AIDER_OUTPUT) is None
    for text in ("", "I changed two files.", "{broken", '{"type": "result"}', "Tokens: many"):
        assert read_usage("auto", text) is None, text
    with pytest.raises(ValueError):
        UsageMeter("cursor")


# ------------------------------------------------------------------ money


def test_the_shipped_table_is_dated_and_prices_tokens():
    date, table = shipped()
    assert date.count("-") == 2 and "claude-sonnet-4-5" in table and "gpt-5" in table and "gemini-2.5-pro" in table
    pricing = Pricing()
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_input_tokens=2_000_000,
                  cache_creation_input_tokens=100_000, model="claude-sonnet-4-5-20250929")
    assert pricing.cost(usage) == pytest.approx(3.0 + 1.5 + 0.6 + 0.375)  # the date suffix is not the model
    assert pricing.price("anthropic/claude-sonnet-4-5") == pricing.price("claude-sonnet-4-5")
    assert pricing.cost(Usage(input_tokens=10, model="some-model-nobody-prices")) is None
    assert pricing.cost(Usage(input_tokens=10)) is None, "no model: no price"
    assert pricing.cost(Usage.unknown()) is None
    reported = Usage(input_tokens=1_000_000, model="claude-sonnet-4-5", cost_usd=0.5, cost_reported=True)
    assert pricing.cost(reported) == 0.5, "the CLI's own figure wins"
    assert (format_cost(None), format_cost(0.01234), format_cost(12.5)) == ("unknown", "$0.0123", "$12.50")


def test_config_toml_overrides_and_adds_prices(tmp_path: Path):
    config = tmp_path / "config.toml"
    config.write_text('[pricing."claude-sonnet-4-5"]\ninput = 1.0\n\n[pricing."my-local-model"]\ninput = 0.5\n'
                      'output = 1.5\n')
    pricing = Pricing(load_config(config).pricing)
    assert pricing.price("claude-sonnet-4-5").input == 1.0 and pricing.price("claude-sonnet-4-5").output == 15.0
    assert pricing.cost(Usage(input_tokens=2_000_000, output_tokens=1_000_000, model="my-local-model")) == 2.5
    config.write_text('[pricing."x"]\ninput = 1.0\ninptu = 2.0\n')
    with pytest.raises(ParseError, match="unknown rate"):
        load_config(config)
    config.write_text('[pricing."x"]\ninput = "cheap"\n')
    with pytest.raises(ParseError, match="dollars per million"):
        load_config(config)


def test_trailers_and_the_usage_line_say_unknown_never_zero():
    usage = Usage(input_tokens=1200, output_tokens=340, cache_read_input_tokens=900, model="claude-sonnet-4-5",
                  cost_usd=0.0123)
    t = usage_trailers(usage)
    assert (t["Specflux-Input-Tokens"], t["Specflux-Model"], t["Specflux-Cost-Usd"]) == ("1200", "claude-sonnet-4-5",
                                                                                        "0.012300")
    assert usage_trailers(Usage.unknown()) == {"Specflux-Usage": "unknown"}
    assert "Specflux-Cost-Usd" not in usage_trailers(Usage(input_tokens=5, model="nobody-prices-this"))
    line = format_usage(1200, 340, 900, 0, "claude-sonnet-4-5", 0.0123)
    assert parse_usage(line) == {"input_tokens": 1200, "output_tokens": 340, "cache_read_input_tokens": 900,
                                 "cache_creation_input_tokens": 0, "model": "claude-sonnet-4-5", "cost_usd": 0.0123}
    assert parse_usage("unknown (the agent printed no usage specflux can read)") == {"unknown": True}


# ------------------------------------------------------------------ a command agent stopped in flight


class Hooks:
    def check_criterion(self, index: int) -> str:
        raise AssertionError

    def end_session(self, handoff) -> str:
        raise AssertionError


STREAMING_AGENT = """\
import json, sys, time
sys.stdin.read()
print(json.dumps({"type": "system", "subtype": "init", "model": "claude-sonnet-4-5"}), flush=True)
for n in range(1, 1000):
    print(json.dumps({"type": "assistant", "message": {"id": f"m{n}", "model": "claude-sonnet-4-5",
          "usage": {"input_tokens": 10000, "output_tokens": 1000}}}), flush=True)
    time.sleep(0.05)
"""


def streaming(tmp_path: Path, request: SessionRequest):
    script = tmp_path / "agent.py"
    script.write_text(STREAMING_AGENT)
    repo = tmp_path / "repo"
    repo.mkdir()
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    started = time.monotonic()
    outcome = CommandBackend(cmd, timeout_s=60, stream=False).run(request, Toolbox(repo, Hooks()))
    return outcome, time.monotonic() - started


def test_a_command_agent_is_stopped_when_its_streamed_cost_passes_its_budget(tmp_path: Path):
    # Each message: 10,000 input and 1,000 output tokens of claude-sonnet-4-5 = $0.045.
    request = SessionRequest(system="S", context="C", model="any", max_turns=1, budget_usd=0.10, pricing=Pricing())
    outcome, took = streaming(tmp_path, request)
    assert outcome.stop == "budget_usd" and took < patience(20)
    assert "spent $0.1350, past its budget of $0.1000" in outcome.error, "at the third message, the first past it"
    assert 30000 <= outcome.usage.input_tokens < 100_000, "what it spent until it was stopped, all of it"
    assert outcome.usage.model == "claude-sonnet-4-5"


def test_a_command_agent_is_stopped_when_its_streamed_tokens_pass_its_budget(tmp_path: Path):
    request = SessionRequest(system="S", context="C", model="any", max_turns=1, token_budget=50_000)
    outcome, took = streaming(tmp_path, request)
    assert outcome.stop == "token_budget" and took < patience(20)
    assert "used 55,000 tokens, past its budget of 50,000" in outcome.error and outcome.usage.total >= 55_000


CACHED_AGENT = """\
import json, sys, time
sys.stdin.read()
for n in range(1, 31):  # a 30-turn session re-reading its 40,000-token context from the cache each turn
    print(json.dumps({"type": "assistant", "message": {"id": f"m{n}", "model": "claude-sonnet-4-5",
          "usage": {"input_tokens": 200, "output_tokens": 300, "cache_read_input_tokens": 40000,
                    "cache_creation_input_tokens": 500}}}), flush=True)
    time.sleep(0.03)
"""


def test_a_token_budget_does_not_count_cache_reads(tmp_path: Path):
    """1.2M cache reads, 30,000 tokens otherwise: a 400k session budget lets it finish."""
    script = tmp_path / "agent.py"
    script.write_text(CACHED_AGENT)
    repo = tmp_path / "repo"
    repo.mkdir()
    request = SessionRequest(system="S", context="C", model="any", max_turns=1, token_budget=400_000)
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    outcome = CommandBackend(cmd, timeout_s=60, stream=False).run(request, Toolbox(repo, Hooks()))
    assert outcome.stop == "end_turn", outcome.error
    assert outcome.usage.cache_read_input_tokens == 1_200_000 and outcome.usage.budgeted == 30_000
    request.token_budget = 20_000  # cache writes count: 500 a turn
    outcome = CommandBackend(cmd, timeout_s=60, stream=False).run(request, Toolbox(repo, Hooks()))
    assert outcome.stop == "token_budget" and "past its budget of 20,000" in outcome.error


def test_an_agent_that_times_out_keeps_what_it_spent_and_one_silent_is_unknown(tmp_path: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    request = SessionRequest(system="S", context="C", model="any", max_turns=1)
    printed = json.dumps({"type": "assistant", "message": {"id": "m1", "model": "claude-sonnet-4-5",
                                                           "usage": {"input_tokens": 700, "output_tokens": 20}}})
    cmd = f"echo {shlex.quote(printed)}; sleep 600"
    outcome = CommandBackend(cmd, timeout_s=patience(1), stream=False).run(request, Toolbox(repo, Hooks()))
    assert outcome.stop == "error" and "timed out" in outcome.error
    assert (outcome.usage.known, outcome.usage.input_tokens, outcome.usage.model) == (True, 700, "claude-sonnet-4-5")
    outcome = CommandBackend("sleep 600", timeout_s=1, stream=False).run(request, Toolbox(repo, Hooks()))
    assert outcome.stop == "error" and outcome.usage == Usage.unknown()


def test_the_model_the_cli_was_told_prices_output_that_names_none(tmp_path: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    request = SessionRequest(system="S", context="C", model="any", max_turns=1)
    cmd = f"printf '%s\\n' {shlex.quote(lines(CODEX_EXEC))}"
    outcome = CommandBackend(cmd, timeout_s=30, stream=False, model="gpt-5").run(request, Toolbox(repo, Hooks()))
    assert outcome.usage.model == "gpt-5" and outcome.usage.output_tokens == 122
    assert Pricing().cost(outcome.usage) == pytest.approx((315 * 1.25 + 122 * 10 + 24448 * 0.125) / 1e6)
    assert read_usage("claude", json.dumps(CLAUDE_RESULT)).model == "claude-sonnet-4-5-20250929", "named: it wins"


def test_one_budget_rule_for_every_backend():
    """`SessionRequest.over_budget`, which the API backend checks after each turn and an agent
    CLI's meter after each line of its output: tokens first, then money; unknown money passes."""
    request = SessionRequest("s", "c", "m", 5, token_budget=1000, budget_usd=0.5)
    assert request.over_budget(Usage(input_tokens=900, output_tokens=100)) is None  # at the budget: within
    assert request.over_budget(Usage(input_tokens=900, output_tokens=101, cache_read_input_tokens=10**6)) == \
        ("token_budget", "used 1,001 tokens, past its budget of 1,000")  # cache reads are not budgeted tokens
    assert request.over_budget(Usage(input_tokens=10, cost_usd=0.75, cost_reported=True)) == \
        ("budget_usd", "spent $0.7500, past its budget of $0.5000")
    assert request.over_budget(Usage(input_tokens=10, cost_usd=0.75)) is None  # a cost no one reported or priced
