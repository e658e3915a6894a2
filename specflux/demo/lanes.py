"""The demo's third part: two independent tasks at once (`flow start --parallel 2`), each in its
own git worktree, with a scripted agent CLI (demo_data/lane_agent.py) instead of a model.

Both tasks add a line at the end of textkit/__init__.py. Whichever lane finishes second cannot be
merged cleanly: the merge is aborted, the workflow sees the conflict and gives that task a new
attempt on top of the merged branch, which merges. Nothing here is recorded: the agent is a script.
"""

from __future__ import annotations

import shlex
import sys
from importlib import resources
from pathlib import Path
from typing import Callable

STAMP = "2026-01-07 11:00"  # the time in every session entry of the run (the agent writes it too)
TASKS = [
    dict(task_id="6", title="wordcount helper", epic_id="1", epic_title="textkit", repository="textkit",
         requirements="Add `wordcount(text)` in textkit/words.py and export it from textkit.",
         criteria=["`from textkit import wordcount` works"]),
    dict(task_id="7", title="initials helper", epic_id="1", epic_title="textkit", repository="textkit",
         requirements="Add `initials(text)` in textkit/initials.py and export it from textkit.",
         criteria=["`from textkit import initials` works"]),
]


def agent_command() -> str:
    script = Path(str(resources.files("specflux.demo.data"))) / "lane_agent.py"
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def run_lanes(manager, git: Callable[..., str], say: Callable[[str], None]) -> dict:
    """Create tasks 6 and 7, commit them, and run them in two lanes; the final state."""
    from specflux.flow import runs
    from specflux.flow.steps.roles import Agents

    for spec in TASKS:
        manager.create(**spec)
    git(manager.ws.root, "add", "-A")
    git(manager.ws.root, "commit", "-q", "-m", "textkit: tasks 6 and 7")
    agents = Agents(kind="command", cmd=agent_command())
    run = runs.start(manager, ["6", "7"], agents=agents, parallel=2)
    state = runs.drive(manager, run, agents, say=lambda line: say(f"  {line}"), stamp_clock=lambda: STAMP)
    state["_run"] = run
    return state


def conflicted(state: dict) -> list[str]:
    """The tasks whose first merge conflicted and were done again."""
    return sorted((state.get("edgeIterations") or {}).get("merge-conflict", {}))
