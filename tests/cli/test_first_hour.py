"""The first hour with specflux, as a new user meets it: each command in a fresh git repository
through `python -m specflux.cli` as a process of its own. Each test is one thing issue 24 found
leaving a trap: a refusal that did not name what was wrong or how to fix it, a wrong exit code,
output that misled. Exit codes follow one rule (docs/first-hour.md): 0 done, 1 the data or a run
said no, 2 a usage mistake, 130 interrupted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from helpers import ROOT, specflux_process


def sf(repo: Path, *args: str, code: int = 0, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`specflux ARGS` in `repo` (or `cwd`, found upwards from there), asserting its exit code."""
    if cwd is not None:
        done = subprocess.run([sys.executable, "-m", "specflux.cli", *args], cwd=cwd, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    else:
        done = specflux_process(repo, *args)
    assert done.returncode == code, f"specflux {' '.join(args)} -> {done.returncode}: {done.stdout}{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def repo(git_repo: Path) -> Path:
    """A fresh repository with a workspace and tasks 1 <- 2 <- 3 (each depends on the one before), committed."""
    sf(git_repo, "init", cwd=git_repo)
    sf(git_repo, "new", "Schema", "--ac", "tables exist")
    sf(git_repo, "new", "Service", "--dep", "1", "--ac", "it answers")
    sf(git_repo, "new", "Endpoints", "--dep", "2", "--ac", "routes exist")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tasks")
    return git_repo


def files(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted((repo / ".specflux").rglob("*")) if p.is_file()}


# --------------------------------------------------------------------- init


def test_init_says_to_commit_the_workspace_and_its_gitattributes(git_repo):
    out = sf(git_repo, "init", cwd=git_repo).stdout
    assert "next: commit .specflux/ and .gitattributes" in out
    assert "git add .specflux/ .gitattributes && git commit" in out
    git(git_repo, "add", ".specflux", ".gitattributes")
    git(git_repo, "commit", "-q", "-m", "workspace")
    assert "next:" not in sf(git_repo, "init", cwd=git_repo).stdout, "committed: nothing more to say"


def test_init_in_a_workspaces_subfolder_refuses_naming_the_one_above(repo):
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    done = sf(repo, "init", cwd=sub, code=1)
    assert f"{repo} already holds a workspace" in done.stderr and "would hide its tasks" in done.stderr
    assert f"specflux init --nested {sub}" in done.stderr
    assert not (sub / ".specflux").exists()
    assert "Schema" in sf(repo, "list", cwd=sub).stdout, "the workspace above is still the one found"
    sf(repo, "init", "--nested", cwd=sub)
    assert (sub / ".specflux").is_dir()


# --------------------------------------------------------------------- commands and ids


def test_a_typo_lists_every_command_and_says_which_was_meant(repo):
    done = sf(repo, "flwo", code=2)
    for name in ("flow", "submit-review", "submit-tasks", "list", "demo"):
        assert f"'{name}'" in done.stderr
    assert "did you mean 'flow'?" in done.stderr
    assert "did you mean 'start'?" in sf(repo, "flow", "strat", code=2).stderr


def test_show_takes_an_id_written_with_its_hash(repo):
    assert sf(repo, "show", "#2").stdout.startswith("Task #2: Service")
    assert json.loads(sf(repo, "show", "#2", "--json").stdout)["id"] == "2"


def test_new_refuses_a_dependency_that_does_not_exist_as_set_does(repo):
    before = files(repo)
    done = sf(repo, "new", "Orphan", "--dep", "99", code=1)
    assert "no task 99: a dependency must be an existing task" in done.stderr
    assert files(repo) == before
    assert "no task 42" in sf(repo, "set", "1", "--add-dep", "42", code=1).stderr
    sf(repo, "new", "Waits", "--dep", "99", "--force")  # on purpose: said in --help


def test_delete_names_the_dependent_in_grammar_and_the_command_that_frees_it(repo):
    done = sf(repo, "delete", "2", code=1)
    assert done.stderr.startswith("specflux: task 3 depends on task 2;"), done.stderr
    assert "specflux set 3 --remove-dep 2" in done.stderr and "specflux delete 2 --force" in done.stderr


def test_data_refusals_exit_1_and_usage_mistakes_exit_2(repo):
    assert "already exists" in sf(repo, "new", "Dup", "--id", "1", code=1).stderr
    assert "closes the cycle" in sf(repo, "set", "1", "--add-dep", "3", code=1).stderr
    assert "no task 9" in sf(repo, "show", "9", code=1).stderr
    sf(repo, "set", "1", "--status", "done", code=2)  # a value that is no status
    sf(repo, "show", code=2)  # a missing argument


# --------------------------------------------------------------------- ready, board, lint, complete


def test_ready_leaves_out_blocked_tasks(repo):
    sf(repo, "new", "Cancelled upstream")  # 4, no dependencies
    sf(repo, "set", "4", "--status", "blocked")
    out = sf(repo, "ready").stdout
    assert "Schema" in out and "Cancelled upstream" not in out
    assert [r["id"] for r in json.loads(sf(repo, "ready", "--json").stdout)] == ["1"]


def test_a_broken_file_is_reported_once_not_as_its_dependents_missing_dependency(repo):
    (repo / ".specflux/task-states/task-2-state.md").write_text("garbage\n")
    for command in ("ready", "board", "graph"):
        done = sf(repo, command, code=1)
        assert "task-2-state.md:1: no title" in done.stderr, command
        assert "does not exist" not in done.stderr, f"{command}: {done.stderr}"


def test_lint_names_yaml_front_matter_that_specflux_does_not_read(repo):
    path = repo / ".specflux/task-states/task-1-state.md"
    path.write_text("---\nstatus: complete\npriority: 1\n---\n" + path.read_text())
    done = sf(repo, "lint", code=1)
    assert (".specflux/task-states/task-1-state.md:1: YAML front matter (lines 1-4) is not read by specflux "
            "(its `status`, `priority` are ignored)") in done.stderr
    assert "## 0. Metadata" in done.stderr and "ok:" not in done.stdout


def test_complete_warns_of_unticked_criteria_and_dependencies_not_complete(repo):
    done = sf(repo, "complete", "2", "--summary", "the service", "--no-commit")
    assert "task 2: complete" in done.stdout
    assert ("warning: task 2 is completed with 1 of 1 acceptance criteria not ticked (1; `specflux check 2 1` "
            "ticks them)") in done.stderr
    assert "warning: task 2 is completed before its dependencies: 1 (pending)" in done.stderr
    sf(repo, "check", "1", "1")
    quiet = sf(repo, "complete", "1", "--summary", "the schema", "--no-commit")
    assert "warning" not in quiet.stderr


# --------------------------------------------------------------------- the demo


def test_the_demo_says_each_decision_once_and_a_command_that_runs_here(tmp_path):
    done = subprocess.run([sys.executable, "-m", "specflux.cli", "demo", str(tmp_path / "demo")], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("decision: coder-retry: coder on task 4") == 1, "said once (the narrative), not twice"
    show = next(line.strip() for line in out.splitlines() if line.strip().endswith(" show 2"))
    assert show != "specflux show 2", "`specflux` is not on this PATH"
    ran = subprocess.run(show, shell=True, cwd=tmp_path / "demo", capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert ran.returncode == 0 and ran.stdout.startswith("Task #2:"), ran.stderr
