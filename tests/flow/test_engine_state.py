"""Engine state out of the agent's reach (docs/engine-state.md), tried the way an adversary would:
a misbehaving coder, run by the real `specflux flow start --agent command` in each sandbox mode this
machine has (bubblewrap, Landlock, none), poisons the list cache, deletes the runs' holds, reads the
runs' keys and leaves a process holding the engine's locks. And a leftover holding any lock the
engine waits for ends the wait after SPECFLUX_LOCK_TIMEOUT with an error naming it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import git
from helpers import hold, run
from helpers import specflux_process as specflux

from specflux.agent.sandbox import choose
from specflux.base.errors import AgentError
from specflux.store.workspace import Workspace


def available(name: str) -> bool:
    if name == "off":
        return True
    try:
        return choose(name).confined
    except AgentError:
        return False


MODES = [pytest.param(m, marks=pytest.mark.skipif(not available(m), reason=f"{m} is not available here"))
         for m in ("bwrap", "landlock", "off")]

# The coder: does its SPECFLUX_TEST_MISCHIEF, ticks its criterion through specflux, writes its summary; the
# reviewer approves. What it saw goes to .specflux/cache/ (writable in every mode, ignored by git).
AGENT = textwrap.dedent('''\
    import glob, json, os, pathlib, subprocess, sys, time
    role, task = os.environ["SPECFLUX_ROLE"], os.environ["SPECFLUX_TASK_ID"]
    spec = [sys.executable, "-m", "specflux.cli"]
    out = pathlib.Path(".specflux/cache")
    out.mkdir(exist_ok=True)
    git_dir = subprocess.run(["git", "rev-parse", "--git-common-dir"], capture_output=True, text=True).stdout.strip()
    mischief, report = os.environ.get("SPECFLUX_TEST_MISCHIEF", ""), {}

    def poison():  # a row for task 2 that says complete, keyed to its file as it is now
        st = os.stat(".specflux/task-states/task-2-state.md")
        key = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
        entries = {"2": [key, ["Never built", "complete", 1, 1, 3, []]]}
        for place in (".specflux/cache", os.path.join(git_dir, "specflux", "cache")):
            try:
                os.makedirs(place, exist_ok=True)
                with open(os.path.join(place, "summaries.json"), "w") as f:
                    json.dump({"version": 1, "entries": entries}, f)
                report[place] = "written"
            except OSError as e:
                report[place] = type(e).__name__

    def delete_holds():
        import shutil
        for place in (".specflux/locks/holds", os.path.join(git_dir, "specflux", "private", "holds")):
            try:
                names = os.listdir(place)
                shutil.rmtree(place)
                report[place] = f"deleted {len(names)}"
            except OSError as e:
                report[place] = type(e).__name__
        (out / "deleted").write_text("")
        deadline = time.time() + 120
        while not (out / "go").exists() and time.time() < deadline:
            time.sleep(0.05)

    def read_keys():
        found = {}
        for path in [*glob.glob(os.path.join(git_dir, "**"), recursive=True),
                     *glob.glob(".specflux/**", recursive=True)]:
            try:
                with open(path, "rb") as f:
                    found[path] = f.read(4096).decode("utf-8", "replace")
            except OSError:
                pass
        report["read"] = found

    def leave_holding():  # a daemon of its own session, holding every lock file it can open
        code = ("import fcntl, glob, os, sys, time\\n"
                "held = []\\n"
                "for path in sys.argv[1:]:\\n"
                "    for name in glob.glob(path, recursive=True):\\n"
                "        try:\\n"
                "            fd = os.open(name, os.O_RDONLY)\\n"
                "            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\\n"
                "            held.append(name)\\n"
                "        except OSError:\\n"
                "            pass\\n"
                "open('.specflux/cache/leftover.json', 'w').write(__import__('json').dumps([os.getpid(), held]))\\n"
                "time.sleep(600)\\n")
        subprocess.Popen(["setsid", sys.executable, "-c", code, "leftover-holding-locks",
                          os.path.join(git_dir, "**", "*.lock"), ".specflux/**/*.lock"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not (out / "leftover.json").exists():
            time.sleep(0.05)

    if role == "coder":
        {"poison": poison, "holds": delete_holds, "keys": read_keys, "leftover": leave_holding}.get(mischief, lambda: 0)()
        (out / f"report-{task}.json").write_text(json.dumps(report))
        subprocess.run([*spec, "check", task, "1"], check=True)
        path = pathlib.Path(os.environ["SPECFLUX_TASK_FILE"])
        path.write_text(path.read_text().replace("(To be completed)", "### Summary\\ndone\\n\\n### For Downstream Tasks\\nUse it."))
        pathlib.Path(f"work-{task}.txt").write_text("work\\n")
    else:
        review = {"approved": True, "criteria_results": [{"criterion": "1", "met": True}], "issues": []}
        sys.exit(subprocess.run([*spec, "submit-review", "--json", "-"], input=json.dumps(review), text=True).returncode)
''')


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    """Task 1 (the coder's), task 2 (never built) and task 3 (depends on 2), committed."""
    (git_repo / "agent.py").write_text(AGENT)
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    for title, deps in (("Build it", []), ("Never built", []), ("After two", ["--dep", "2"])):
        assert run(capsys, git_repo, "new", title, "--ac", f"{title} done", *deps)[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def env_for(mode: str, mischief: str, **extra: str) -> dict:
    return {"SPECFLUX_CLI_SANDBOX": mode, "SPECFLUX_TEST_MISCHIEF": mischief,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            **extra}


def start_argv(repo: Path, *tasks: str) -> list[str]:
    return [sys.executable, "-m", "specflux.cli", "--root", str(repo), "flow", "start", *tasks,
            "--agent", "command", "--cmd", f"{sys.executable} agent.py"]


def report(repo: Path, task: str = "1") -> dict:
    return json.loads((repo / ".specflux" / "cache" / f"report-{task}.json").read_text())


def wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Until `path` exists; the test fails at once if `proc` ended first."""
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended before {path.name} appeared: {out[-2000:]}{err[-2000:]}")
        time.sleep(0.05)


@pytest.mark.parametrize("mode", MODES)
def test_a_poisoned_list_cache_decides_nothing(project, mode):
    """The coder writes a cache row saying task 2 (never built) is complete, keyed to its file.
    `ready` and `flow start --all` still see task 2 pending and task 3 waiting on it."""
    done = specflux(project, "flow", "start", "1", "--agent", "command", "--cmd", f"{sys.executable} agent.py",
                    env=env_for(mode, "poison"), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = report(project)
    assert seen, "the coder ran its mischief"
    if mode != "off":  # the engine's folder is out of reach; only .specflux/cache (which it no longer reads) is not
        assert seen[os.path.join(".git", "specflux", "cache")] != "written"
    ready = json.loads(specflux(project, "ready", "--json").stdout)
    assert [r["id"] for r in ready] == ["2"], ready
    lint = specflux(project, "lint")
    assert "task 2" not in lint.stdout or "complete" not in lint.stdout
    if mode != "off":  # display rows too: the only cache `list` reads is one no agent could write
        listed = {r["id"]: r["status"] for r in json.loads(specflux(project, "list", "--json").stdout)}
        assert listed == {"1": "complete", "2": "pending", "3": "pending"}
    again = specflux(project, "flow", "start", "--all", "--agent", "command", "--cmd", f"{sys.executable} agent.py",
                     env=env_for(mode, ""), timeout=300)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert (project / "work-2.txt").exists() and (project / "work-3.txt").exists(), "task 2 was built, then 3"


CONFINED = [m for m in MODES if m.values[0] != "off"]


@pytest.mark.parametrize("mode", CONFINED)
def test_a_coder_that_deletes_the_holds_does_not_let_a_second_run_in(project, mode):
    """While its run is in flight, the coder deletes every holds folder it can find; a second
    `flow start 1` from another terminal is still refused, naming the first run. (Without a
    sandbox an agent can do anything its user can: no folder is out of its reach.)"""
    go = project / ".specflux" / "cache" / "go"
    first = subprocess.Popen(start_argv(project, "1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **env_for(mode, "holds")})
    try:
        wait_for(project / ".specflux" / "cache" / "deleted", first)
        holder = json.loads(specflux(project, "flow", "status", "--json").stdout)["runId"]
        second = specflux(project, *start_argv(project, "1")[5:], env=env_for(mode, ""), timeout=120)
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"held by another run: task 1 (run {holder})" in second.stderr
    finally:
        go.write_text("")
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, out[-3000:] + err[-3000:]
    assert not any(str(v).startswith("deleted") for v in report(project).values()), report(project)


@pytest.mark.parametrize("mode", CONFINED)
def test_a_coder_cannot_read_the_runs_keys(project, mode):
    """The coder reads every file it can find under the git directory and .specflux/: the run's
    event key is not among them (hidden by bubblewrap, and by Landlock in its mount namespace)."""
    if mode == "landlock" and not choose("landlock").top_level:
        pytest.skip("Landlock without a mount namespace cannot hide the keys (it says so when it starts)")
    done = specflux(project, "flow", "start", "1", "--agent", "command", "--cmd", f"{sys.executable} agent.py",
                    env=env_for(mode, "keys"), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_id = json.loads(specflux(project, "flow", "status", "--json").stdout)["runId"]
    (key_file,) = [p for p in (project / ".git").rglob(run_id) if p.is_file()]  # wherever this version keeps it
    key = key_file.read_text().strip()
    seen = report(project)["read"]
    assert len(seen) > 10, "the coder could read the tree and the git directory"
    assert not [path for path, text in seen.items() if key in text]


@pytest.mark.parametrize("mode", MODES)
def test_a_leftover_holding_the_locks_it_can_open_never_hangs_the_engine(project, mode):
    """The coder leaves a `setsid` process holding every lock file it can open. The run never
    hangs: it finishes (the locks it needs are out of the leftover's reach, or the leftover ended
    with its session) or it stops after SPECFLUX_LOCK_TIMEOUT with an error naming the leftover."""
    proc = subprocess.Popen(start_argv(project, "1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env_for(mode, "leftover", SPECFLUX_LOCK_TIMEOUT="3")})
    leftover = project / ".specflux" / "cache" / "leftover.json"
    pid = None
    try:
        out, err = proc.communicate(timeout=240)
        pid = json.loads(leftover.read_text())[0]
        held = json.loads(leftover.read_text())[1]
        if mode != "off" and hasattr(Workspace(project), "private_dir"):
            private = Workspace(project).private_dir.resolve()
            reached = [(project / p).resolve() for p in held]  # (relative to the agent's working folder)
            assert reached and not [p for p in reached if p.is_relative_to(private) or "runs" in p.parts], held
        if proc.returncode != 0:
            assert f"pid {pid}" in err and "leftover-holding-locks" in err and "end it" in err, out[-2000:] + err[-2000:]
        stop = specflux(project, "flow", "stop", env={"SPECFLUX_LOCK_TIMEOUT": "3"}, timeout=120)
        assert stop.returncode in (0, 1, 2) and "Traceback" not in stop.stderr, stop.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
        pid = pid or (json.loads(leftover.read_text())[0] if leftover.exists() else None)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("which", ["task", "holds", "events", "commit"])
def test_a_wait_for_a_held_lock_ends_naming_the_holder(project, which):
    """Each lock the engine waits for (a task's, the holds', a run's event log's, the commits'), held by a
    stray process: the command that needs it stops after SPECFLUX_LOCK_TIMEOUT, naming the pid
    and command of the holder and what to do, instead of hanging."""
    ws = Workspace(project)
    run_id = None
    if which == "events":  # a run to stop: a paused one
        env = env_for("off", "holds")
        first = subprocess.Popen(start_argv(project, "1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, **env})
        wait_for(project / ".specflux" / "cache" / "deleted", first)
        run_id = json.loads(specflux(project, "flow", "status", "--json").stdout)["runId"]
        first.send_signal(signal.SIGINT)
        (project / ".specflux" / "cache" / "go").write_text("")
        first.communicate(timeout=120)
    if which == "commit":  # the lock that queues specflux's commits in one repository
        lock = project / ".git" / "specflux-commit.flock"
    elif hasattr(ws, "private_dir"):
        lock = {"task": ws.lock_path("1"), "holds": ws.private_dir / "holds.lock",
                "events": ws.private_dir / "runs" / str(run_id) / "events.lock"}[which]
    else:  # where versions before docs/engine-state.md kept them (to see this test fail there)
        lock = {"task": ws.lock_path("1"), "holds": ws.dir / "locks" / "holds.lock",
                "events": ws.dir / "runs" / str(run_id) / "events.jsonl.lock"}[which]
    stray = hold(lock)
    try:
        command = {"task": ["check", "1", "1"], "holds": start_argv(project, "1")[5:],
                   "events": ["flow", "stop", str(run_id)], "commit": ["session", "1", "--did", "work"]}[which]
        done = specflux(project, *command, env=env_for("off", "", SPECFLUX_LOCK_TIMEOUT="2"), timeout=120)
        assert done.returncode != 0
        assert f"waited 2 s for" in done.stderr and f"pid {stray.pid} (" in done.stderr, done.stderr
        assert "stray-lock-holder" in done.stderr and "end it and try again" in done.stderr, done.stderr
    finally:
        stray.kill()
        stray.wait()
    if which in ("task", "commit"):  # the holder gone, the same command goes through
        assert specflux(project, *command).returncode == 0
