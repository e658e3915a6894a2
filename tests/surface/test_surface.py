"""The surfaces' shared floor (specflux/surface/): what the CLI, the board and the MCP server say
alike. The surfaces' own tests (tests/cli, tests/board, tests/mcp) cover it through them; these
check its rules directly."""

from __future__ import annotations

import pytest

from specflux.base.errors import Refused
from specflux.surface.tasks import open_manager, refuse_complete_inside_run
from specflux.surface.views import cost_text, human_size, money, spent_text, table, tokens_text


def test_money_is_exact_below_a_dollar_and_grouped_above_and_unknown_is_said():
    assert (money(0.0123), money(12345.678), money(0), money(None)) == ("$0.0123", "$12,345.68", "$0.0000", "unknown")


def test_tokens_and_cost_say_how_many_sessions_are_unknown_never_zero():
    assert tokens_text({"inputTokens": 1200, "outputTokens": 340}) == "1200 input, 340 output tokens"
    assert tokens_text({"usageUnknown": 2}) == "tokens unknown"
    assert tokens_text({"inputTokens": 5, "usageUnknown": 1}, cache=True) == \
        "5 input, 0 output, 0 cache-read, 0 cache-write tokens (+ 1 session unknown)"
    assert cost_text({"costUnknown": 1}) == "unknown"
    assert cost_text({"costUsd": 0.5, "inputTokens": 10, "usageUnknown": 2}) == "$0.5000 + 2 sessions of unknown cost"


def test_what_one_session_spent_from_its_trailers():
    assert spent_text(None) == "-" and spent_text({"usage": "unknown"}) == "unknown"
    assert spent_text({"input_tokens": 12000, "output_tokens": 345, "cost_usd": 0.0123}) == "12,345 tok $0.0123"
    assert spent_text({"input_tokens": 10, "output_tokens": 2}) == "12 tok"


def test_a_plain_table_pads_every_column_but_the_last():
    assert table(["ID", "TITLE"], [["1", "First"], ["10", "Tenth, longer"]]).splitlines() == \
        ["ID  TITLE", "1   First", "10  Tenth, longer"]
    assert (human_size(1023), human_size(1536)) == ("1023 B", "1.5 KB")


def test_complete_is_refused_only_for_the_task_the_run_drives(monkeypatch):
    refuse_complete_inside_run("7")  # outside a run: nothing to refuse
    monkeypatch.setenv("SPECFLUX_RUN", "run-1")
    monkeypatch.setenv("SPECFLUX_ROLE", "coder")
    monkeypatch.setenv("SPECFLUX_TASK_ID", "7")
    refuse_complete_inside_run("8")  # another task: the run does not drive it
    with pytest.raises(Refused, match="inside workflow run run-1, the run completes task #7"):
        refuse_complete_inside_run("#7")


def test_open_manager_finds_the_workspace_and_commits_only_when_asked(git_repo):
    from specflux.store.workspace import Workspace

    Workspace.init(git_repo)
    assert open_manager(str(git_repo)).ws.root == git_repo.resolve()
    assert open_manager(str(git_repo), commit=False).git is None
