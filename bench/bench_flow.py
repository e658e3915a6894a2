#!/usr/bin/env python3
"""The workflow engine (`specflux flow`) against the same work done without it, in the same run.

1. Engine cost per step. A temporary git repository with T independent tasks; a queue run over
   them is 2T steps (coder, then reviewer, on each task). The agent CLI is a tiny shell script
   that does the least a session needs and exits at once: the coder changes a file of the project
   (a run refuses an attempt that changed nothing outside .specflux/) and writes the task's chain output,
   the reviewer hands in an approving verdict with `specflux submit-review --json -` (sealed for
   its step, as docs/handins.md asks of every agent CLI). No [validate], so no tests run.
   Compared with the same 2T sessions (same agent, same tasks, each committed) run without the
   engine, interleaved, on a fresh copy of the repository each time:
     whole process   `specflux flow start --agent command --cmd AGENT`  vs  2T processes
                     `specflux run ID --agent command --cmd AGENT` (SPECFLUX_ROLE set for the agent);
     in-process      `runs.start` + `runs.drive`  vs  2T `run_session(...)` calls, as `specflux run`
                     makes them: no interpreter start-up on either side, so the difference is the
                     engine's own work (events, state, decisions, the reviewer's diff, accepting
                     each task and committing the run's history).
   Reported: the engine's cost per step, (run - sessions) / 2T, and the ratio, at 20 and 200
   steps (the engine's work per step grows with the run). Target: <= 50 ms per step. Then the
   200-step run once more under cProfile: where the engine's time goes.
2. `specflux flow status --json` on a run of 10,000 events (a queue run over ~800 tasks with
   retries and rejections, written with EventLog.append in the engine's event shapes), cold
   (state.json deleted: every event folded) and warm (state.json current), against a floor: a
   `python -c` that reads events.jsonl and `json.loads` every line. Target: within 3x.
3. Replay of a 100-step run: a queue run over 50 tasks with the default anthropic backend against
   the scripted local Messages API (`specflux.agent.scripted`), then `specflux flow replay RUN
   --into DIR` of it (offline, from its recordings), interleaved with the live run itself.
   Target: under 0.2x the live run, per round (issue 26; issue 15 asked under 5 s). A TODO row when `flow replay` does not exist.

~7 minutes on 2 cores; --quick (10-step runs, 2,000 events) ~1 minute.

Usage: python bench/bench_flow.py [--quick] [--tasks 10,100] [--runs K] [--heavy-runs K] [--events N]
                                 [--replay-tasks T]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (PYTHON, compare, fmt_ms, header, load, md, md_table, ratio_cell, round_ratios, run,  # noqa: E402
                     specflux_argv, verdict)

STEP_TARGET_MS = 50.0
STATUS_TARGET = 3.0
REPLAY_TARGET = 0.2  # issue 26: a 100-step run replays in under 0.2x the live run (issue 15: under 5 s)
CRITERIA = ("negative numbers are handled", "the signature is unchanged", "a test covers it")

# The agent CLI: POSIX sh and awk, so that it costs next to nothing and the same on both sides. Its
# reviewer hands in as every agent CLI must (docs/handins.md): `specflux submit-review --json -`,
# which seals the verdict with the step's key; a verdict written to $SPECFLUX_HANDIN directly is
# refused as tampering. SUBMIT is the command, filled in by `agent_script`.
AGENT = r"""#!/bin/sh
# The bench's agent CLI: does the least a session needs, then exits.
cat > /dev/null
if [ "$SPECFLUX_ROLE" = reviewer ]; then
  if [ "$SPECFLUX_HANDIN_STEP" = bench ]; then  # a session outside a run: hand in to the (private) temp folder, unread
    SPECFLUX_HANDIN="${TMPDIR:-/tmp}/specflux-bench-handin.json"; export SPECFLUX_HANDIN
  fi
  printf '%s\n' '{"approved": true, "issues": [], "criteria_results": [{"criterion": "1", "met": true}, {"criterion": "2", "met": true}, {"criterion": "3", "met": true}]}' \
    | SUBMIT submit-review --json - > /dev/null
else
  printf 'changed by the bench agent\n' >> "src/$(basename "$SPECFLUX_TASK_FILE" .md).txt"  # a change outside .specflux/
  awk '$0 == "(To be completed)" { print "### Summary\nDone by the bench agent.\n\n### For Downstream Tasks\nNothing to add."; next } { print }' \
    "$SPECFLUX_TASK_FILE" > "$SPECFLUX_TASK_FILE.tmp" && mv "$SPECFLUX_TASK_FILE.tmp" "$SPECFLUX_TASK_FILE"
fi
"""
ROLES = ("coder", "reviewer")


def agent_script() -> str:
    """AGENT with the `specflux` this bench measures as its hand-in command."""
    return AGENT.replace("SUBMIT", " ".join(shlex.quote(x) for x in specflux_argv()))

FLOOR_STATUS = r"""
import json, sys
with open(sys.argv[1], "rb") as f:
    events = [json.loads(line) for line in f]
print(len(events), events[-1]["type"])
"""


# ------------------------------------------------------------------------------------ set-up


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def make_template(parent: Path, tasks: int, config: str = "") -> Path:
    """A committed git repository with a small project and `tasks` independent pending tasks;
    `config` is added to `.specflux/config.toml` (a `[validate]` section, say)."""
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    root = parent / "template"
    root.mkdir()
    git(root, "init", "-q")
    for key, value in (("user.name", "Bench"), ("user.email", "bench@example.com"), ("commit.gpgsign", "false")):
        git(root, "config", key, value)
    (root / "src").mkdir()
    for i in range(1, 6):
        (root / "src" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n", encoding="utf-8")
    (root / "README.md").write_text("# bench project\n", encoding="utf-8")
    ws, _ = Workspace.init(root)
    if config:
        with open(ws.dir / "config.toml", "a", encoding="utf-8") as f:
            f.write(config)
    manager = TaskStateManager(ws, git=False)
    for i in range(1, tasks + 1):
        manager.create(f"Task {i}: change module {i % 5 + 1}",
                       requirements=f"Make f{i % 5 + 1} handle negative numbers. Keep the signature. Add a test.",
                       criteria=list(CRITERIA))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project and tasks")
    # files written in the same second as the index are "racily clean" (git re-reads them on every
    # commit until the index is rewritten later): let the clock move on, then refresh the index
    time.sleep(1.1)
    git(root, "update-index", "--refresh")
    return root


def fresh_copy(template: Path, dest: Path) -> Path:
    """A copy of the template repository at `dest` (replacing it), its index refreshed."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(template, dest, symlinks=True)
    git(dest, "update-index", "-q", "--refresh")
    return dest


# ------------------------------------------------------------------------------------ 1. engine cost


class Sessions:
    """The four ways of doing the same 2T sessions, each on a repository prepared beforehand."""

    def __init__(self, folder: Path, tasks: int):
        self.agent = folder / "agent.sh"
        self.agent.write_text(agent_script(), encoding="utf-8")
        self.cmd = f"sh {self.agent}"
        self.ids = [str(i) for i in range(1, tasks + 1)]
        self.steps = 2 * tasks

    def agent_env(self, role: str) -> dict[str, str]:
        """What a run gives the session of `role`, for the sessions run without the engine: their
        reviewer runs `specflux submit-review` too (sealed with a key of the bench's, into the
        session's temp folder, which a sandboxed `specflux run` may write; unread)."""
        env = {"SPECFLUX_ROLE": role}
        if role == "reviewer":
            env.update(SPECFLUX_HANDIN_KEY="0" * 64, SPECFLUX_HANDIN_STEP="bench")
        return env

    # whole process

    def flow_process(self, repo: Path) -> None:
        run([*specflux_argv(), "--root", str(repo), "flow", "start", "--agent", "command", "--cmd", self.cmd])

    def run_processes(self, repo: Path) -> None:
        for task in self.ids:
            for role in ROLES:
                run([*specflux_argv(), "--root", str(repo), "run", task, "--agent", "command", "--cmd", self.cmd],
                    env={**os.environ, **self.agent_env(role)})

    # in-process: what `flow start` and `specflux run` call, without the interpreter's start-up

    def flow_inprocess(self, repo: Path) -> dict:
        from specflux.flow import runs
        from specflux.flow.steps.roles import Agents
        from specflux.store.manager import TaskStateManager
        from specflux.store.workspace import Workspace

        ws = Workspace.find(explicit=repo)
        manager = TaskStateManager(ws, git=ws.config.commit)
        agents = Agents(kind="command", cmd=self.cmd)
        flow_run = runs.start(manager, (), agents=agents)
        return runs.drive(manager, flow_run, agents)

    def run_inprocess(self, repo: Path) -> None:
        from specflux.agent.command_backend import CommandBackend
        from specflux.agent.session import run_session
        from specflux.store.manager import TaskStateManager
        from specflux.store.workspace import Workspace

        for task in self.ids:
            for role in ROLES:
                ws = Workspace.find(explicit=repo)  # as `specflux run` does, once per session
                manager = TaskStateManager(ws, git=ws.config.commit)
                env = {"SPECFLUX_TASK_FILE": str(manager.path(task)), "SPECFLUX_TASK_ID": task,
                       "SPECFLUX_ROOT": str(ws.root), **self.agent_env(role)}
                backend = CommandBackend(self.cmd, timeout_s=ws.config.agent.session_timeout_s, env=env)
                report = run_session(manager, task, backend, commit=True, edits_task_file=True)
                if not report.ok or not report.commit:
                    raise RuntimeError(f"session on task {task} ({role}): {report.stop} {report.error}")


def check_equivalent(sessions: Sessions, flow_repo: Path, runs_repo: Path) -> None:
    """Both sides did the same sessions: one commit per session (the run adds its own commits:
    one per accepted task and its history), every task completed by the run."""
    from specflux.flow.record.run import Run
    from specflux.store.workspace import Workspace

    state = Run.find(Workspace.find(explicit=flow_repo)).state()
    assert state["status"] == "completed", state.get("failureReason")
    assert state["iteration"] == sessions.steps and state["metrics"]["tasksCompleted"] == len(sessions.ids), state["metrics"]

    def session_commits(repo: Path) -> int:  # a session's commit says how it stopped
        return sum(1 for line in git(repo, "log", "--format=%(trailers:key=Specflux-Stop)").splitlines() if line.strip())

    assert session_commits(flow_repo) == session_commits(runs_repo) == sessions.steps, \
        (session_commits(flow_repo), session_commits(runs_repo))


def bench_engine(work: Path, sizes: list[int], runs: int, heavy_runs: int, profile_top: int) -> tuple[list[str], dict]:
    """Part 1 at each run size (tasks): `runs` samples up to 50 tasks, `heavy_runs` above. The
    whole-process cases run at the first size only (at 200 steps one sample would be 200
    `specflux run` processes)."""
    rows, per_step = [], {}
    for k, tasks in enumerate(sizes):
        n = runs if tasks <= 50 else heavy_runs
        folder = work / f"engine-{tasks}"
        folder.mkdir()
        template = make_template(folder, tasks)
        s = Sessions(folder, tasks)
        repos: dict[str, Path] = {}

        def setup(name: str) -> None:  # each case gets a fresh copy of the repository, in its own folder
            repos[name] = fresh_copy(template, folder / f"case-{list(cases).index(name)}")

        # sanity first: both sides complete and do the same sessions
        flow_repo, runs_repo = fresh_copy(template, folder / "check-flow"), fresh_copy(template, folder / "check-runs")
        s.flow_inprocess(flow_repo)
        s.run_inprocess(runs_repo)
        check_equivalent(s, flow_repo, runs_repo)

        pairs = {"in-process": ("runs.start + runs.drive", s.flow_inprocess, "run_session x 2T", s.run_inprocess)}
        if k == 0:
            pairs["whole process"] = ("`flow start`", s.flow_process, "`specflux run` x 2T", s.run_processes)
        cases = {}
        for flow, flow_fn, base, base_fn in pairs.values():
            cases[flow] = lambda flow=flow, fn=flow_fn: fn(repos[flow])
            cases[base] = lambda base=base, fn=base_fn: fn(repos[base])
        samples = compare(cases, runs=n, warmup=1, setup=setup)
        m = {name: md(v) for name, v in samples.items()}
        for label, (flow, _, base, _) in sorted(pairs.items(), reverse=True):
            costs = [(a - b) / s.steps for a, b in zip(samples[flow], samples[base])]  # per round
            cost = md(costs)
            per_step[(label, s.steps)] = cost
            rows.append([f"{s.steps} ({tasks} tasks; n={n})", label, f"{flow}: {fmt_ms(m[flow])}", f"{base}: {fmt_ms(m[base])}",
                         f"{fmt_ms(m[flow] / s.steps)} / {fmt_ms(m[base] / s.steps)}",
                         ratio_cell(round_ratios(samples, flow, base)),
                         f"{cost:+.1f} ({min(costs):+.1f} to {max(costs):+.1f})", step_verdict(label, cost)])
        shutil.rmtree(folder, ignore_errors=True)

    out = ["### 1. Engine cost per step: queue runs vs the same sessions without the engine\n",
           md_table(["steps", "measured", "with the engine (ms)", "the same sessions without (ms)",
                     "per step: run / sessions", "ratio, per round", "engine ms per step, per round (range)",
                     "target"], rows),
           f"\nn rounds after 1 warm-up, every case once a round, each on a fresh copy of the repository; ratio and "
           f"engine cost: the median over rounds of each round's own ratio and (run - sessions) / steps; {load()} "
           "at the end. Whole process, the run pays one interpreter start-up and `specflux run` pays one per "
           "session: the in-process rows are the engine's own cost.\n"]

    # where the engine's time goes: one in-process run of the largest size under cProfile
    tasks = sizes[-1]
    folder = work / "profiled"
    folder.mkdir()
    s = Sessions(folder, tasks)
    repo = fresh_copy(make_template(folder, tasks), folder / "run")
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    s.flow_inprocess(repo)
    prof.disable()
    wall = (time.perf_counter() - t0) * 1000
    out += profile_report(prof, wall, s.steps, profile_top, repo)
    shutil.rmtree(folder, ignore_errors=True)
    return out, per_step


def step_verdict(label: str, cost: float) -> str:
    if label != "in-process":  # whole process, the sessions' side pays a start-up per session
        return "- (start-ups: see in-process)"
    return ("met" if cost <= STEP_TARGET_MS else "MISSED") + f" (<= {STEP_TARGET_MS:g} ms)"


# The engine's own costs, as functions of specflux/flow/ (file, name): what each one does.
ENGINE_COSTS = [
    ("flow/record/events.py", "read", "`EventLog.read`: read and parse the whole events.jsonl"),
    ("flow/record/events.py", "append", "`EventLog.append`: lock, read the tail, write one line, fsync"),
    ("flow/state.py", "fold", "`fold`: deep-copy the state, then apply the events"),
    ("flow/engine.py", "_view", "`Engine._view`: deep-copy the state for the workflow's decision"),
    ("flow/workflow/workflow_file.py", "fires", "`Edge.fires`: the JSONata `when` conditions, on the whole state"),
    ("flow/engine.py", "_task_effect", "`Engine._task_effect`: accept a task (complete, wire, git commit)"),
    ("flow/steps/roles.py", "_change_to_review", "`Roles._change_to_review`: git log + git diff for the reviewer"),
    ("flow/runs.py", "start", "`runs.start`: load the workflow and the graph, create the run"),
    ("flow/record/run.py", "commit", "`Run.commit`: state.json, narrative.md, the history's commit"),
]


def profile_report(prof: cProfile.Profile, wall_ms: float, steps: int, top: int, repo: Path) -> list[str]:
    """The profiled run split into the agent sessions (`run_session`, which `specflux run` does
    too) and the rest; the engine's own costs (ENGINE_COSTS); the leaf functions that cost the
    most. Under cProfile, Python-heavy code (deepcopy, JSON, JSONata) is slowed more than waiting
    for git or the agent: read the split, not the absolute milliseconds."""
    entries = pstats.Stats(prof).stats  # (file, line, name) -> (primitive calls, calls, own s, cumulative s, callers)

    def find(file_end: str, name: str) -> list[tuple]:
        return [(key, v) for key, v in entries.items() if key[2] == name and key[0].replace(os.sep, "/").endswith(file_end)]

    def cumulative(file_end: str, name: str) -> tuple[int, float]:
        found = find(file_end, name)
        return sum(v[1] for _, v in found), sum(v[3] for _, v in found) * 1000

    _, in_sessions = cumulative("specflux/agent/session.py", "run_session")
    _, agent = cumulative("specflux/agent/command_backend.py", "run")
    outside = wall_ms - in_sessions
    per = lambda ms: fmt_ms(ms / steps)  # noqa: E731
    lines = [f"#### Where one in-process run's time goes (cProfile; {wall_ms:,.0f} ms wall, {steps} steps)\n",
             md_table(["part", "ms", "ms per step"], [
                 ["the whole run (runs.start + runs.drive)", fmt_ms(wall_ms), per(wall_ms)],
                 ["in the agent sessions (`run_session`, as `specflux run` does)", fmt_ms(in_sessions), per(in_sessions)],
                 ["  of which the agent CLI itself (CommandBackend.run)", fmt_ms(agent), per(agent)],
                 ["**outside the sessions: the engine and its roles**", f"**{fmt_ms(outside)}**", f"**{per(outside)}**"],
             ]),
             "", run_facts(repo, entries, steps), "",
             "The engine's own costs (cumulative; rows overlap where one calls another, e.g. accepting a task "
             "records an event):\n"]
    rows = []
    for file_end, name, what in ENGINE_COSTS:
        calls, ms = cumulative(file_end, name)
        rows.append([what, f"{calls:,}", fmt_ms(ms), per(ms), f"{ms / outside:.0%}" if outside > 0 else "-"])
    lines.append(md_table(["cost", "calls", "ms", "per step", "of the engine's time"], rows))
    readers = {}
    for _, v in find("flow/record/events.py", "read"):
        for (f, _, caller), info in v[4].items():
            label = f"{_short(f).split('/')[-1].removesuffix('.py')}.{caller}"
            readers[label] = readers.get(label, 0) + info[1]
    lines.append("\n`EventLog.read` is called by " + ", ".join(
        f"{k} ({n:,})" for k, n in sorted(readers.items(), key=lambda kv: -kv[1])) + ".")
    lines.append("\nLeaf costs of the whole run (own time, any module; `poll` and `sleep` are waits for git and the "
                 "agent):\n")
    leaves = sorted(entries.items(), key=lambda kv: -kv[1][2])[:top]
    lines.append(md_table(["function", "calls", "own ms", "per step"], [
        [f"`{_short(f)}:{ln} {n}`", f"{v[1]:,}", fmt_ms(v[2] * 1000), per(v[2] * 1000)] for (f, ln, n), v in leaves]))
    lines.append("")
    return lines


def run_facts(repo: Path, entries: dict, steps: int) -> str:
    """What the engine's work per step grows with: the events file, and the state (whose
    openSteps keeps every step ever requested)."""
    from specflux.flow.record.run import Run
    from specflux.store.workspace import Workspace

    flow_run = Run.find(Workspace.find(explicit=repo))
    events = flow_run.events.read()
    state = flow_run.state()
    reads = sum(v[1] for (f, _, n), v in entries.items() if n == "read" and f.replace(os.sep, "/").endswith("flow/record/events.py"))
    size = flow_run.events.path.stat().st_size
    return (f"The run wrote {len(events):,} events ({size / 1e3:,.0f} KB of events.jsonl); `EventLog.read` ran {reads:,} "
            f"times ({reads / steps:.1f} per step), each reading and parsing the whole file; the state is "
            f"{len(json.dumps(state)) / 1e3:,.0f} KB at the end, and its `openSteps` holds {len(state['openSteps'])} "
            "steps (every step ever requested).")


def _short(file: str) -> str:
    """`flow/engine.py`, `subprocess.py`, `json/decoder.py`: the path from the package on."""
    path = file.replace(os.sep, "/")
    for marker in ("/specflux/", "/site-packages/"):
        if marker in path:
            return path.split(marker)[-1]
    if "/lib/python" in path:
        return path.split("/lib/python")[-1].split("/", 1)[-1]
    return path


# ------------------------------------------------------------------------------------ 2. flow status


def long_run_events(target: int) -> list[dict]:
    """The events of a finished queue run of about `target` events, in the shapes the engine
    writes (see a real run's events.jsonl): every 4th task's first coder attempt fails its tests
    (coder-retry), every 5th task's first review asks for changes (reviewer-reject)."""
    tasks: list[dict] = []
    created = {"type": "run_created", "runId": "run-bench-long", "workflow": {
        "name": "queue", "version": "1", "hash": "0" * 64, "source": "queue"}, "tasks": tasks,
        "maxIterations": None, "tokenBudget": None, "baseCommit": "1" * 40,
        "agent": {"kind": "anthropic", "cmd": None, "model": None}}
    events: list[dict] = [created, {"type": "status", "status": "running"}, {"type": "boot", "now": 1, "seed": 7}]
    seq = lambda: len(events) + 1  # noqa: E731  (the seq the next event gets)
    usage = {"inputTokens": 48213, "outputTokens": 2890, "cacheReadTokens": 31022, "cacheWriteTokens": 4011}

    def decision(step_id, task_id, edge, actions, why, finalize=False):
        events.append({"type": "decision", "stepId": step_id, "taskId": task_id, "edge": edge, "decision": {
            "decisionId": f"dec-{seq()}-{step_id}", "actions": actions, "finalize": finalize,
            "basedOn": {"stepId": step_id, "edge": edge} if edge else None, "failureReason": None, "why": why}})
        return events[-1]

    def request(kind, task_id, by):
        step_id = f"s{by}"
        events.append({"type": "step_requested", "stepId": step_id, "kind": kind, "payload": {"taskId": task_id},
                       "taskId": task_id, "decision": by})
        return step_id

    def work(kind, task_id):
        return {"type": "REQUEST_WORK", "workKind": kind, "payload": {"taskId": task_id}, "stepId": None}

    def coder(step_id, task_id, passed):
        failed = [] if passed else [f"tests/test_mod{task_id}.py::test_negative"]
        validation = {"passed": passed, "passRate": 1.0 if passed else 0.95, "coverage": 87.5, "failedTests": failed,
                      "failures": [{"name": t, "message": "assert f(-1) == 0\n where f(-1) = -2"} for t in failed],
                      "moreFailed": 0, "exitCode": 0 if passed else 1, "error": None, "notes": [], "durationMs": 4210,
                      "outputTail": "....................                                [100%]\n20 passed in 3.91s\n"}
        events.append({"type": "step_started", "stepId": step_id, "kind": "coder", "taskId": task_id})
        events.append({"type": "step_finished", "stepId": step_id, "kind": "coder", "taskId": task_id, "now": seq(),
                       "seed": 12345, "status": "OK", "output": {
                           "taskId": task_id, "code": f"commit {seq():012x}: src/mod{task_id}.py, tests/test_mod{task_id}.py",
                           "status": "complete" if passed else "needs_revision",
                           "selfValidation": {"passed": passed, "issues": failed}},
                       "usage": usage, "durationMs": 48211, "validation": validation,
                       "chainOutput": {"summary": f"f{task_id} handles negative numbers.", "downstream": "Call it as before."},
                       "commit": f"{seq():040x}"})

    def reviewer(step_id, task_id, approved):
        issues = [] if approved else [{"severity": "major", "description": "the test does not cover zero"}]
        events.append({"type": "step_started", "stepId": step_id, "kind": "reviewer", "taskId": task_id})
        events.append({"type": "step_finished", "stepId": step_id, "kind": "reviewer", "taskId": task_id, "now": seq(),
                       "seed": 54321, "status": "OK", "output": {
                           "taskId": task_id, "approved": approved, "issues": issues, "criteriaResults": [
                               {"criterion": c, "met": approved or i < 2} for i, c in enumerate(CRITERIA)]},
                       "usage": usage, "durationMs": 20133, "commit": f"{seq():040x}"})

    i = 0
    decision("boot", None, None, [work("coder", "1")], "start: coder on task 1")
    step = request("coder", "1", len(events))
    while True:
        i += 1
        task_id = str(i)
        tasks.append({"id": task_id, "title": f"Task {i}: change module {i % 5 + 1}", "status": "pending", "priority": 3,
                      "complexity": "medium", "acceptanceCriteria": list(CRITERIA), "dependencies": []})
        if i > 1:
            events.append({"type": "task_changed", "index": i - 1, "taskId": task_id})
        attempts = [False, True] if i % 4 == 0 else [True]
        reviews = [False, True] if i % 5 == 0 else [True]
        for r, approved in enumerate(reviews):
            for passed in attempts if r == 0 else [True]:
                coder(step, task_id, passed)
                edge = "coder-to-reviewer" if passed else "coder-retry"
                decision(step, task_id, edge, [work("reviewer" if passed else "coder", task_id)], f"{edge} on task {task_id}")
                step = request("reviewer" if passed else "coder", task_id, len(events))
            reviewer(step, task_id, approved)
            last = len(events) + 3 >= target  # the run ends with this task
            if not approved:
                decision(step, task_id, "reviewer-reject", [work("coder", task_id)], f"reviewer-reject on task {task_id}")
                step = request("coder", task_id, len(events))
            elif not last:
                decision(step, task_id, "next-task", [{"type": "ANNOTATE", "key": f"accepted:{task_id}",
                                                       "value": {"edge": "next-task"}}, work("coder", str(i + 1))],
                         f"next-task: task {task_id} accepted; coder on task {i + 1}")
                events.append({"type": "task_status", "taskId": task_id, "status": "complete", "reason": None})
                step = request("coder", str(i + 1), len(events) - 1)
            else:
                decision(step, task_id, None, [{"type": "ANNOTATE", "key": f"accepted:{task_id}", "value": {"edge": None}}],
                         "no edge from reviewer: accepted", finalize=True)
                events.append({"type": "task_status", "taskId": task_id, "status": "complete", "reason": None})
                events.append({"type": "status", "status": "completed"})
                return events


def write_long_run(root: Path, target: int) -> tuple[Path, int]:
    """A workspace holding one finished run of about `target` events; (run folder, events)."""
    from specflux.flow.record.events import EventLog
    from specflux.flow.record.run import Run
    from specflux.store.workspace import Workspace

    ws, _ = Workspace.init(root)
    events = long_run_events(target)
    run_dir = ws.dir / "runs" / "run-bench-long"
    run_dir.mkdir(parents=True)
    log = EventLog(run_dir / "events.jsonl")
    real_fsync = os.fsync
    os.fsync = lambda fd: None  # writing the fixture: durability does not matter here, 10,000 fsyncs would
    try:
        for event in events:
            log.append(event)
    finally:
        os.fsync = real_fsync
    state = Run(ws, "run-bench-long").state()  # sanity: the engine's own fold agrees with what was meant
    tasks = len(events[0]["tasks"])
    assert state["status"] == "completed" and state["metrics"]["tasksCompleted"] == tasks, state["metrics"]
    assert not state["openSteps"] or all(s["status"] == "DONE" for s in state["openSteps"].values())
    return run_dir, len(events)


def bench_status(work: Path, target: int, runs: int) -> tuple[list[str], dict[str, float]]:
    root = work / "status"
    root.mkdir()
    run_dir, n = write_long_run(root, target)
    events = run_dir / "events.jsonl"
    snapshot = run_dir / "state.json"
    base = [*specflux_argv(), "--root", str(root), "flow", "status", "--json"]

    from specflux.flow.record.run import Run
    from specflux.store.workspace import Workspace

    Run(Workspace.find(explicit=root), "run-bench-long").save()  # state.json and narrative.md, current
    saved = snapshot.read_bytes()
    out = run(base, capture=True).stdout
    shown = json.loads(out)
    assert shown["status"] == "completed" and shown["iteration"] > 0

    def setup(name: str) -> None:
        if name == "cold":
            snapshot.unlink(missing_ok=True)
        elif not snapshot.exists():
            snapshot.write_bytes(saved)

    cases = {
        "python -c pass": lambda: run([PYTHON, "-c", "pass"]),
        "floor": lambda: run([PYTHON, "-c", FLOOR_STATUS, str(events)]),
        "cold": lambda: run(base),
        "warm": lambda: run(base),
    }
    samples = compare(cases, runs=runs, warmup=2, setup=setup)
    m = {k: md(v) for k, v in samples.items()}
    cold, warm = round_ratios(samples, "cold", "floor"), round_ratios(samples, "warm", "floor")
    m["cold ratio"], m["warm ratio"] = md(cold), md(warm)
    tasks = len(shown["tasks"])
    rows = [["`python -c pass`", fmt_ms(m["python -c pass"]), "", ""],
            ["floor: read events.jsonl, `json.loads` every line", fmt_ms(m["floor"]), "", ""],
            ["`flow status --json`, cold (no state.json: every event folded)", fmt_ms(m["cold"]),
             ratio_cell(cold), verdict(m["cold ratio"], STATUS_TARGET)],
            ["`flow status --json`, warm (state.json current)", fmt_ms(m["warm"]),
             ratio_cell(warm), verdict(m["warm ratio"], STATUS_TARGET)]]
    lines = [f"### 2. `flow status --json` on a run of {n:,} events ({events.stat().st_size / 1e6:.1f} MB, {tasks} tasks, "
             f"{shown['iteration']:,} steps)\n",
             md_table(["case", "median ms", "vs floor, per round", f"target {STATUS_TARGET:g}x"], rows),
             f"\n{runs} rounds after 2 warm-ups, every case once a round (ratio: the median of per-round ratios); "
             f"{load()} at the end; state.json ({len(saved) / 1e3:.0f} KB) deleted "
             "before every cold run\n"]
    return lines, m


# ------------------------------------------------------------------------------------ 3. replay


def replay_available() -> bool:
    done = run([*specflux_argv(), "flow", "replay", "--help"], check=False, capture=True)
    return done.returncode == 0 and "--into" in done.stdout


def scripted_turns(tasks: int) -> list:
    """The Messages API's answers for a queue run over `tasks` tasks, in the order the run asks:
    per task a coder session (write a file and tick the three criteria; end with a chain output)
    and a reviewer session (read the file; approve)."""
    from specflux.agent.scripted import Reply, call

    turns = []
    for i in range(1, tasks + 1):
        path = f"src/mod{i % 5 + 1}.py"
        turns += [
            Reply(calls=[call("write_file", path=path, content=f"def f(x):\n    return abs(x) + {i}\n"),
                         *(call("check_criterion", index=n) for n in (1, 2, 3))]),
            Reply(calls=[call("end_session", did=[f"Task {i}: f handles negative numbers"], issues="", next="",
                              chain_output={"summary": f"{path} handles negative numbers", "downstream": ""})]),
            Reply(calls=[call("read_file", path=path)]),
            Reply(calls=[call("submit_review", approved=True, issues=[], criteria_results=[
                {"criterion": c, "met": True} for c in CRITERIA])]),
        ]
    return turns


def bench_replay(work: Path, tasks: int, runs: int) -> tuple[list[str], dict | None]:
    """`flow replay RUN --into DIR` of a finished 2T-step run of the default anthropic backend
    (recorded against the scripted local Messages API), interleaved with the live run itself."""
    title = f"### 3. Replay of a {2 * tasks}-step run\n"
    if not replay_available():
        return [title, md_table(["case", "median ms", "target"],
                                [["TODO: `specflux flow replay RUN --into DIR` (not in this build: "
                                  "`flow replay --help` fails)", "-", "seconds"]]), ""], None
    from specflux.agent.scripted import ScriptedServer

    folder = work / "replay"
    folder.mkdir()
    template = make_template(folder, tasks)
    turns = scripted_turns(tasks)
    sf = specflux_argv()

    def live(repo: Path) -> None:  # `flow start` with the default backend, against the scripted API
        with ScriptedServer(turns) as server:
            run([*sf, "--root", str(repo), "flow", "start"],
                env={**os.environ, "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "scripted"})

    source = fresh_copy(template, folder / "source")
    live(source)
    state = json.loads(run([*sf, "--root", str(source), "flow", "status", "--json"], capture=True).stdout)
    assert state["status"] == "completed" and state["iteration"] == 2 * tasks, (state["status"], state["iteration"])
    into = folder / "replayed"
    replay_argv = [*sf, "--root", str(source), "flow", "replay", state["runId"], "--into", str(into)]
    done = run(replay_argv, capture=True)
    assert "matches" in done.stdout, done.stdout + done.stderr
    # what a replay's time is mostly made of: git processes (counted in an untimed replay, GIT_TRACE)
    shutil.rmtree(into, ignore_errors=True)
    trace = folder / "git-trace.txt"
    run(replay_argv, env={**os.environ, "GIT_TRACE": str(trace)})
    git_processes = sum(1 for line in trace.read_text(errors="replace").splitlines() if "trace: built-in: git " in line)

    repos = {}

    def setup(name: str) -> None:
        if name == "replay":
            shutil.rmtree(into, ignore_errors=True)
        else:
            repos[name] = fresh_copy(template, folder / "live")

    samples = compare({"live": lambda: live(repos["live"]), "replay": lambda: run(replay_argv)},
                      runs=runs, warmup=1, setup=setup)
    m = {k: md(v) for k, v in samples.items()}
    ratios = round_ratios(samples, "replay", "live")
    m["ratio"] = md(ratios)
    steps = 2 * tasks
    rows = [[f"`flow start` (anthropic backend, scripted local API), {steps} steps", fmt_ms(m["live"]),
             fmt_ms(m["live"] / steps), "", ""],
            [f"`flow replay RUN --into DIR` of that run", fmt_ms(m["replay"]), fmt_ms(m["replay"] / steps),
             ratio_cell(ratios), verdict(m["ratio"], REPLAY_TARGET)]]
    shutil.rmtree(folder, ignore_errors=True)
    m["git"] = git_processes
    return [title, md_table(["case", "median ms", "ms per step", "vs the live run, per round", "target"], rows),
            f"\n{runs} rounds after 1 warm-up, every case once a round (ratio: the median of per-round ratios); "
            f"{load()} at the end; the replay clones the repository at the run's "
            "base commit and runs every step again from the recordings (no [validate]: no tests); it runs "
            f"{git_processes:,} git processes ({git_processes / steps:.1f} per step: the session's commit, the "
            "branch guard, the reviewer's diff, the no-change evidence)\n"], m


# ------------------------------------------------------------------------------------ main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a 10-step run, 3 runs; 2,000 events; a 10-step replay")
    ap.add_argument("--tasks", help="run sizes for part 1, in tasks, comma-separated (default 10,100: 20 and "
                    "200 steps; 5 with --quick); whole-process cases at the first size only")
    ap.add_argument("--runs", type=int, help="timed runs per case (default 5; 3 with --quick)")
    ap.add_argument("--heavy-runs", type=int, default=3, help="timed runs of runs over 50 tasks and of the "
                    "replay (default 3)")
    ap.add_argument("--events", type=int, help="events in the run of part 2 (default 10,000; 2,000 with --quick)")
    ap.add_argument("--replay-tasks", type=int, help="tasks in the replayed run (default 50: 100 steps; 5 with --quick)")
    ap.add_argument("--top", type=int, default=12, help="rows of the profile tables")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--only", help="parts to run, comma-separated: engine, status, replay (default: all three)")
    a = ap.parse_args()
    parts = set((a.only or "engine,status,replay").split(","))
    if parts - {"engine", "status", "replay"}:
        ap.error(f"--only: unknown part(s) {', '.join(sorted(parts - {'engine', 'status', 'replay'}))}")
    sizes = [int(x) for x in (a.tasks or ("5" if a.quick else "10,100")).split(",")]
    runs = a.runs or (3 if a.quick else 5)
    target = a.events or (2000 if a.quick else 10_000)
    replay_tasks = a.replay_tasks or (5 if a.quick else 50)
    if shutil.which("git") is None:
        raise SystemExit("bench_flow needs git")

    header("bench_flow: the workflow engine vs the same work without it", a.quick)
    work = Path(tempfile.mkdtemp(prefix="specflux-bench-flow-"))
    try:
        problems, met = [], []
        if "engine" in parts:
            engine_lines, per_step = bench_engine(work, sizes, runs, a.heavy_runs, a.top)
            print("\n".join(engine_lines), flush=True)
            worst_step = max(v for (label, _), v in per_step.items() if label == "in-process")
            (problems if worst_step > STEP_TARGET_MS else met).append(
                f"the engine costs at most {worst_step:.1f} ms per step (target <= {STEP_TARGET_MS:g})")
        if "status" in parts:
            status_lines, status = bench_status(work, target, 7 if a.quick else 11)
            print("\n".join(status_lines), flush=True)
            worst_status = max(status["cold ratio"], status["warm ratio"])
            (problems if worst_status > STATUS_TARGET else met).append(
                f"flow status within {worst_status:.2f}x of reading its events (target <= {STATUS_TARGET:g}x)")
        if "replay" in parts:
            replay_lines, replay = bench_replay(work, replay_tasks, min(runs, a.heavy_runs))
            print("\n".join(replay_lines))
            if replay is None:
                problems.append("replay not measured (TODO)")
            else:
                (problems if replay["ratio"] > REPLAY_TARGET else met).append(
                    f"replay {replay['ratio']:.2f}x the live run, {replay['replay'] / 1000:.1f} s "
                    f"(target <= {REPLAY_TARGET:g}x)")
        print(("MISSED: " + "; ".join(problems) + "\n") if problems else "", end="")
        print("OK: " + "; ".join(met) if met else "")
        return 0
    finally:
        if a.keep:
            print(f"(kept {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
