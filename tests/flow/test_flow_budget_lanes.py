"""A run's budget in money shared by its lanes: two sessions at once each get half of what the
run has left, priced by `[pricing."MODEL"]` in config.toml (the API backend against the scripted
Messages API)."""

from __future__ import annotations

import json
import re

from conftest import git
from helpers import run
from test_flow_parallel import project  # noqa: F401


def test_lanes_share_what_is_left_of_the_runs_budget_in_money(project, api, capsys):
    from specflux.agent.scripted import Reply, call

    with open(project / ".specflux" / "config.toml", "a") as f:  # each reply: 100 in, 20 out = $0.20
        f.write('\n[pricing."claude-sonnet-5-5"]\ninput = 1000.0\noutput = 5000.0\n')
    git(project, "commit", "-qam", "prices")

    def route(body: dict) -> tuple[str, str]:
        first = "\n".join(b.get("text", "") for b in body["messages"][0]["content"])
        return re.search(r"# Task #(\d+)", first).group(1), "coder"

    reads = [Reply(calls=[call("read_file", path="README.md")]) for _ in range(3)]
    api({("1", "coder"): list(reads), ("2", "coder"): list(reads)}, route=route)
    code, out, err = run(capsys, project, "flow", "start", "1", "2", "--parallel", "2", "--budget-usd", "0.6")
    assert code == 1 and "budget_usd" in out, out + err
    run_dir = sorted((project / ".specflux" / "runs").iterdir())[-1]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    costs = [e["usage"]["costUsd"] for e in events if e["type"] == "step_finished" and e["kind"] == "coder"]
    assert costs and max(costs) <= 0.4 + 1e-9, costs  # $0.30 each: stopped after its second reply, not its third
    state = json.loads((run_dir / "state.json").read_text())
    assert state["failureReason"] == "budget_usd" and state["metrics"]["costUsd"] >= 0.6
