"""The usage readers believe no number an agent prints unchecked (agent/usage_checks.py), never
raise out of the thread reading an agent's output, and say which budgets an agent's output cannot
feed (agent/metering.py). End to end, with runs: tests/flow/test_flow_usage_trust.py."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

import pytest

from specflux.agent.backend import SessionRequest, Usage
from specflux.agent.command_backend import CommandBackend
from specflux.agent.metering import announce, unfed
from specflux.agent.presets import PRESETS, command_preset
from specflux.agent.pricing import Pricing
from specflux.agent.tools import Toolbox
from specflux.agent.usage_checks import MAX_TOKENS, uncounted
from specflux.agent.usage_readers import UsageMeter, read_usage_and_turns
from specflux.base.errors import UsageError


@pytest.mark.parametrize("line, why", [
    ('{"type":"result","usage":{"input_tokens":1e400}}', "input_tokens is 1e400, not a finite number"),
    ('{"type":"result","usage":{"input_tokens":-Infinity}}', "input_tokens is -Infinity, not a finite number"),
    ('{"type":"result","usage":{"output_tokens":NaN}}', "output_tokens is NaN, not a finite number"),
    ('{"type":"result","usage":{"input_tokens":-5}}', "input_tokens is -5, a negative number"),
    ('{"type":"result","usage":{"input_tokens":true}}', "input_tokens is True, not a number"),
    ('{"type":"result","usage":{"input_tokens":5},"total_cost_usd":-0.01}', "total_cost_usd is -0.01, a negative number"),
    ('{"type":"result","usage":{"input_tokens":5},"total_cost_usd":1e6}', "total_cost_usd is 1e6, more than the $100,000"),
    (f'{{"type":"result","usage":{{"input_tokens":{MAX_TOKENS + 1}}}}}', "input_tokens is 10000000001, more than the"),
    ('{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":-3}}', "cached_input_tokens is -3"),
    ('{"type":"step_finish","part":{"tokens":{"input":1,"output":2},"cost":NaN}}', "cost is NaN"),
    ('{"stats":{"models":{"g":{"tokens":{"prompt":1e999}}}}}', "prompt is 1e999"),
    ("Tokens: 99999999M sent, 3 received. Cost: $0.01 message, $0.05 session.", "sent is 99999999M, more than"),
    ('{"type":"result","usage":' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
])
def test_a_number_not_believed_makes_the_usage_unknown_naming_it(line, why):
    meter = UsageMeter()
    meter.feed('{"type":"result","usage":{"input_tokens":100,"output_tokens":10}}')
    assert meter.feed(line) is True
    meter.feed('{"type":"result","usage":{"input_tokens":100,"output_tokens":10}}')  # stays unknown
    usage = meter.usage()
    assert usage is not None and not usage.known and why in usage.why, usage
    assert (usage.input_tokens, usage.cost_usd) == (0, None)


def test_real_reports_and_lines_that_are_no_report_are_read_as_before():
    meter = UsageMeter()
    for line in ('{"type":"result","usage":{"input_tokens":', "{not json", '{"usage": "lots"}', "plain words"):
        assert meter.feed(line) is False
    assert meter.usage() is None
    meter.feed('{"type":"result","num_turns":1e400,"total_cost_usd":0.5,"usage":{"input_tokens":1.0e3,'
               '"output_tokens":null}}')
    assert meter.usage() == Usage(input_tokens=1000, cost_usd=0.5, cost_reported=True)
    assert meter.turns == 1  # a silly turn count is not worth doubting the tokens for


def test_a_failure_of_the_reader_itself_is_caught_and_said(monkeypatch):
    import specflux.agent.usage_readers as readers

    def broken(usage):
        raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setattr(readers, "claude_usage", broken)
    meter = UsageMeter()
    assert meter.feed('{"type":"result","usage":{"input_tokens":5}}') is True
    assert "the usage reader failed on the agent's output (OverflowError: cannot convert" in meter.usage().why
    usage, _ = read_usage_and_turns("auto", '{"type":"result","usage":{"input_tokens":5}}')
    assert usage is not None and not usage.known


def test_a_budget_does_not_stop_a_session_on_numbers_not_believed_and_it_ends_normally(tmp_path):
    lines = ['{"type":"result","usage":{"input_tokens":1e400}}', '{"type":"result","usage":{"input_tokens":9e9}}']
    script = "; ".join(f"echo {shlex.quote(line)}" for line in lines) + "; echo done > out.txt"
    backend = CommandBackend(script, stream=False)
    request = SessionRequest(system="s", context="c", model="m", max_turns=1, token_budget=10, budget_usd=0.01,
                             pricing=Pricing())
    outcome = backend.run(request, Toolbox(tmp_path, SimpleNamespace()))
    assert outcome.stop == "end_turn", outcome.error
    assert not outcome.usage.known and outcome.usage.why == "input_tokens is 1e400, not a finite number"
    assert (tmp_path / "out.txt").read_text() == "done\n"
    said = uncounted(outcome.usage, request.token_budget, request.budget_usd)
    assert said.endswith("; the token budget and the budget in money could not count this session")


def test_the_api_backends_usage_follows_the_same_rule():
    from specflux.agent.anthropic_backend import _usage

    api = SimpleNamespace(input_tokens=float("inf"), output_tokens=3, cache_read_input_tokens=None,
                          cache_creation_input_tokens=0)
    usage = _usage(api, "claude-sonnet-4-5")
    assert not usage.known and usage.why == "the API's input_tokens is inf, not a finite number"
    total = Usage(input_tokens=10).add(usage)
    assert not total.known and SessionRequest("s", "c", "m", 1, token_budget=1).over_budget(total) is None


def test_which_budgets_each_agent_can_feed():
    pricing = Pricing()
    for name in ("claude", "aider", "opencode", "gemini"):
        assert unfed(PRESETS[name], None, pricing) is None, name
    assert unfed(None, None, pricing) is None  # the API backend
    codex = unfed(PRESETS["codex"], None, pricing)
    assert codex is not None and (codex.tokens, codex.money) == (False, True) and "--model" in codex.why
    assert unfed(PRESETS["codex"], "gpt-5-codex", pricing) is None
    assert "no-such-model" in unfed(PRESETS["codex"], "no-such-model", pricing).why
    command = unfed(command_preset("my-agent"), None, pricing)
    assert (command.tokens, command.money) == (True, True) and "names no usage reader" in command.why
    with pytest.raises(UsageError, match=r"--budget-usd \$0.50 cannot be enforced: .*--allow-unmetered"):
        announce(command, 100, 0.5, allowed=False)
    assert announce(command, 100, 0.5, allowed=True).startswith("the run's token budget (100) and budget in money "
                                                                "($0.50) may not bind")
    assert announce(codex, 100, None, allowed=False) is None  # codex's tokens feed a token budget
    with pytest.raises(UsageError, match=r"\[flow\] budget_usd"):
        announce(codex, None, 2.0, allowed=False, money_source="[flow] budget_usd")


def test_a_users_own_cli_that_names_its_reader_feeds_both_budgets():
    from specflux.agent.presets import from_config

    entry = SimpleNamespace(command="my-agent --json", usage="claude")
    assert unfed(from_config("mine", entry), None, Pricing()) is None
