"""Under bubblewrap a run's session holds the other tasks' files read-only one by one, up to
HELD_AT_MOST of them: beyond that each mount costs bubblewrap more than the last (1,000 add ~0.7 s
to every session's start), so none is held and the session starts as fast as with a few."""

from __future__ import annotations

from pathlib import Path

import pytest

from specflux.agent.confine import HELD_AT_MOST, confine
from specflux.agent.presets import command_preset
from specflux.agent.sandbox import choose
from specflux.base.errors import AgentError


def bwrap_available() -> bool:
    try:
        return choose("bwrap").confined
    except AgentError:
        return False


def workspace(root: Path, tasks: int) -> Path:
    states = root / ".specflux" / "task-states"
    states.mkdir(parents=True)
    for n in range(1, tasks + 1):
        (states / f"task-{n}-state.md").write_text(f"# Task {n}\n")
    return states / "task-1-state.md"


@pytest.mark.skipif(not bwrap_available(), reason="bwrap is not available here")
@pytest.mark.parametrize("tasks", [3, HELD_AT_MOST + 1, HELD_AT_MOST + 2, 400])
def test_other_task_files_are_held_up_to_a_bound(tmp_path: Path, tasks: int):
    root = tmp_path / "repo"
    own = workspace(root, tasks)
    (root / ".git").mkdir()
    done = confine("true", root, tmp_path / "work", "bwrap", command_preset("true"), own_task_file=str(own))
    mounts = done.argv.count("--ro-bind") - 2  # `/` and `.git`
    expected = tasks - 1 if tasks - 1 <= HELD_AT_MOST else 0
    assert len(done.held) == expected and str(own.resolve()) not in done.held
    assert mounts >= expected and mounts < expected + 4, done.argv
