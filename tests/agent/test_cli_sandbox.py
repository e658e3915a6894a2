"""An agent CLI runs in the sandbox of `run_command` (agent/confine.py): a misbehaving agent script,
run by the real `specflux run --agent command`, tries to write outside the repository, into
`.git/` and `.specflux/config.toml`, and into its HOME; only its work in the repository and its
hand-off through `specflux` get through. `--no-sandbox` lets it out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from helpers import run

from specflux.agent.sandbox import choose
from specflux.base.errors import AgentError

SANDBOX = choose("auto")
pytestmark = pytest.mark.skipif(not SANDBOX.confined, reason=f"no sandbox on this system: {SANDBOX.reason}")

AGENT = '''\
import json, os, shutil, subprocess, sys
outside, real_home, report = sys.argv[1], sys.argv[2], {}
def attempt(name, path):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("mischief")
        report[name] = "written"
    except OSError as e:
        report[name] = type(e).__name__
attempt("outside", outside)
attempt("git_hook", os.path.join(".git", "hooks", "pre-commit"))
attempt("config", os.path.join(".specflux", "config.toml"))
attempt("real_home", os.path.join(real_home, ".agentrc"))
attempt("own_home", os.path.join(os.environ["HOME"], ".agentrc"))
attempt("work", os.path.join("src", "work.py"))
attempt("holds", os.path.join(".specflux", "locks", "holds", "task-1.json"))
try:
    report["key"] = open(os.path.join(".git", "specflux-keys", "run-x")).read()
except OSError as e:
    report["key"] = type(e).__name__
report["check"] = subprocess.run(["specflux", "check", "1", "1"], capture_output=True, text=True).returncode
report["home"] = os.environ["HOME"]
for shell in ("bash", "zsh"):  # a here-document's temp file (zsh's goes to $TMPPREFIX, not $TMPDIR)
    if shutil.which(shell):
        report[shell] = subprocess.run([shell, "-c", "cat <<'EOF'\\nhere\\nEOF"], capture_output=True, text=True).stdout
with open("report.json", "w") as f:
    json.dump(report, f)
'''


@pytest.fixture
def project(git_repo: Path, capsys, tmp_path) -> Path:
    (git_repo / "agent.py").write_text(AGENT)
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "new", "Do work", "--ac", "work is done")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def agent_run(repo: Path, tmp_path: Path, *extra: str, sandbox: str = "auto") -> tuple[subprocess.CompletedProcess, dict]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "SPECFLUX_CLI_SANDBOX": sandbox, "HOME": str(home),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    cmd = f"{sys.executable} agent.py {tmp_path / 'outside.txt'} {home}"
    done = subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(repo), "run", "1", "--agent", "command",
                           "--cmd", cmd, *extra], capture_output=True, text=True, env=env, timeout=300)
    report = json.loads((repo / "report.json").read_text())
    return done, report


def available(name: str) -> bool:
    try:
        return choose(name).confined
    except AgentError:  # not on this system
        return False


@pytest.mark.parametrize("sandbox", ["bwrap", "landlock"])
def test_a_sandboxed_agent_cli_writes_only_its_work_and_its_hand_off(project, tmp_path, sandbox):
    if not available(sandbox):
        pytest.skip(f"{sandbox} is not available here")
    config = (project / ".specflux" / "config.toml").read_bytes()
    (project / ".git" / "specflux-keys").mkdir()
    (project / ".git" / "specflux-keys" / "run-x").write_text("secret")
    (project / ".specflux" / "locks" / "holds").mkdir(parents=True)
    done, report = agent_run(project, tmp_path, sandbox=sandbox)
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["outside"] != "written" and not (tmp_path / "outside.txt").exists()
    assert report["git_hook"] != "written" and not (project / ".git" / "hooks" / "pre-commit").exists()
    assert report["config"] != "written" and (project / ".specflux" / "config.toml").read_bytes() == config
    assert report["real_home"] != "written" and not (tmp_path / "home" / ".agentrc").exists()
    assert report["own_home"] == "written" and report["home"] != str(tmp_path / "home")  # a private HOME
    assert report["work"] == "written" and (project / "src" / "work.py").read_text() == "mischief"
    assert report["check"] == 0  # the hand-off through specflux gets through
    for shell in ("bash", "zsh"):  # what agent CLIs run commands in: Claude Code prefers zsh
        assert report.get(shell, "here\n") == "here\n", (shell, report.get(shell))
    assert report["holds"] != "written"  # .specflux/locks/ is not the agent's (docs/engine-state.md)
    if sandbox == "bwrap" or choose(sandbox).top_level:  # the runs' keys (older versions' place) are hidden
        assert report["key"] == "FileNotFoundError"
    else:  # Landlock with no mount namespace confines writes only
        assert report["key"] == "secret"
    shown = json.loads(subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(project), "show", "1",
                                       "--json"], capture_output=True, text=True).stdout)
    assert shown["criteria"][0]["checked"] is True


def test_no_sandbox_lets_the_agent_out(project, tmp_path):
    done, report = agent_run(project, tmp_path, "--no-sandbox")
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["outside"] == "written" and (tmp_path / "outside.txt").exists()


FAKE_AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_flow_agent.py"


def test_parallel_lanes_write_only_their_own_worktree(git_repo, capsys, tmp_path):
    """Two lanes at once, each agent CLI in its own worktree's sandbox: the coders' work, their
    task files and the reviewers' hand-ins (in the run's folder, outside the worktree) get
    through; a write to the main checkout, outside, or into the worktree's git does not."""
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "new", "One", "--ac", "one.txt exists")[0] == 0
    assert run(capsys, git_repo, "new", "Two", "--ac", "two.txt exists")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tasks")
    outside = tmp_path / "outside"
    mischief = (f"echo bad > {outside}-$SPECFLUX_TASK_ID; echo bad > {git_repo}/main-$SPECFLUX_TASK_ID.txt; "
                "echo bad > \"$(git rev-parse --git-dir)/mischief-$SPECFLUX_TASK_ID\"")
    plan = {"coder:1": [{"sh": mischief, "write": {"one.txt": "1\n"}, "check": True, "chain": "one"}],
            "coder:2": [{"sh": mischief, "write": {"two.txt": "2\n"}, "check": True, "chain": "two"}],
            "reviewer": [{"approved": True}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    env = {**os.environ, "SPECFLUX_CLI_SANDBOX": "auto", "SPECFLUX_FAKE_PLAN": str(tmp_path / "plan.json"),
           "SPECFLUX_FAKE_STATE": ".specflux/cache/agent-state",  # relative: inside each lane's worktree
           "PYTHONPATH": str(Path(__file__).resolve().parents[2]) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = f"{sys.executable} {FAKE_AGENT}"
    done = subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(git_repo), "flow", "start", "--all",
                           "--parallel", "2", "--agent", "command", "--cmd", cmd], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    state = json.loads(subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(git_repo), "flow",
                                       "status", "--json"], capture_output=True, text=True).stdout)
    assert [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    assert (git_repo / "one.txt").read_text() == "1\n" and (git_repo / "two.txt").read_text() == "2\n"
    assert not list(tmp_path.glob("outside-*"))
    assert not list(git_repo.glob("main-*.txt"))
    assert not list((git_repo / ".git").rglob("mischief-*"))
