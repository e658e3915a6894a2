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


def landlock_available() -> bool:
    try:
        return choose("landlock").confined
    except AgentError:
        return False


@pytest.mark.parametrize("kind", [
    pytest.param("bwrap", marks=pytest.mark.skipif(not bwrap_available(), reason="bwrap is not available here")),
    pytest.param("landlock", marks=pytest.mark.skipif(not landlock_available(), reason="Landlock is not available here")),
])
def test_a_reviewer_gets_every_task_file_read_only_with_one_mount_however_many_tasks(tmp_path: Path, kind: str):
    """A run's reviewer (or planner) hands in and writes no task file: `task-states/` is read-only
    whole, so every task file is held (a deletion after the session is a person's) without one
    bubblewrap mount each; the list cache and archives stay writable for its `specflux show`."""
    import subprocess

    root = tmp_path / "repo"
    own = workspace(root, 200)
    (root / ".git").mkdir()
    (root / ".specflux" / "cache").mkdir()
    states = own.parent
    attack = (f"rm -f {states}/task-2-state.md; echo changed >> {own}; mv {states}/task-3-state.md {states}/x.md; "
              f"echo new > {states}/task-999-state.md; echo kept > {root}/.specflux/cache/list.json; echo ok")
    (tmp_path / "work").mkdir()
    done = confine(attack, root, tmp_path / "work", kind, command_preset("true"), own_task_file=str(own),
                   tasks_read_only=True)
    assert len(done.held) == 200 and str(own.resolve()) in done.held
    assert not [arg for arg in done.argv if "task-states" in arg and arg != attack]  # no mount per file, nor the folder writable
    ran = subprocess.run(done.argv, cwd=root, capture_output=True, text=True, env={**done.env, "PATH": "/usr/bin:/bin"})
    assert ran.stdout.strip().endswith("ok"), ran.stderr
    assert sorted(p.name for p in states.iterdir()) == sorted(f"task-{n}-state.md" for n in range(1, 201))
    assert own.read_text() == "# Task 1\n"
    assert (root / ".specflux" / "cache" / "list.json").read_text() == "kept\n"
