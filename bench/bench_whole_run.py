#!/usr/bin/env python3
"""A whole workflow run as a user waits for it: `specflux flow start` against a hand-written
LangGraph loop doing the same agent calls, each above the agents' own time.

In a temporary git repository with a small project and T independent pending tasks (default 50),
whose `.specflux/config.toml` has a `[validate]` command that passes at once (`true`), three whole
processes do the same work on fresh copies of the repository, interleaved round by round:

  specflux   `specflux --root REPO flow start --agent command --cmd "sh AGENT"`: the built-in
             queue workflow, coder -> validate -> reviewer on each task, with the default sandbox
             (bubblewrap where it works) and, with `--no-sandbox-too`, once more with `--no-sandbox`.
  LangGraph  a Python process running a `StateGraph` with coder -> validate -> reviewer nodes and
             the conditional edges (tests fail -> coder, reviewer rejects -> coder, approves -> the
             next task's coder or END) under a durable `SqliteSaver` on a file, `durability="sync"`:
             for each task it runs the same agent with the environment the agent needs
             (SPECFLUX_ROLE, SPECFLUX_TASK_FILE, ...; the reviewer gets SPECFLUX_HANDIN in a fresh
             temporary folder, SPECFLUX_HANDIN_KEY and SPECFLUX_HANDIN_STEP, so it runs the very same
             `specflux submit-review`, and the loop reads the verdict from that file), runs the same
             validate command, marks an approved task complete in its file, and after every agent
             step `git add -A` + `git commit`: what a hand-written loop does.
  floor      a Python process running the same 3T invocations (coder, validate, reviewer; the
             reviewer with the same hand-in environment) in a plain loop: the agents' own time.

The agent (AGENT below) is POSIX sh: the coder appends a line to a file in src/ (a change outside
.specflux/) and fills the task file's chain output; the reviewer approves every criterion through
`specflux submit-review --json -` (hand-ins are sealed: docs/handins.md).

Reported: per agent step (2T steps: coder and reviewer; validate counted in the floor), the ms
above the floor for each side (medians), and the median of the per-round ratios
(specflux - floor) / (LangGraph - floor) with its spread and the machine's load. The loop's figure,
a difference of two runs of similar length, is what a busy machine moves most: as a cross-check,
the loop and the floor time their agent and validate calls from inside, giving the loop's own time
within one process. Then, untimed, one run of each with GIT_TRACE: git processes per step by
subcommand (`maintenance`: the `git maintenance run --auto` every `git commit` starts), commits
written; and a check that all do the same work (every task complete, one coder change per task,
the same sessions by role and passed validations; specflux's from its run's events).

Needs the bench extra: `pip install -e ".[bench]"` (langgraph, langgraph-checkpoint-sqlite).
~10 min at 50 tasks and 7 rounds on a quiet 2-core machine, ~30 at load 8 (longer with
--no-sandbox-too); --quick ~1 min.

Usage: python bench/bench_whole_run.py [--quick] [--tasks T] [--rounds K] [--no-sandbox-too]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_flow  # noqa: E402
from bench_flow import CRITERIA, fresh_copy  # noqa: E402
from _common import (PYTHON, compare, fmt_ms, header, load, md, md_table, ratio_cell, round_ratios, run,  # noqa: E402
                     specflux_argv)

VALIDATE = "true"  # the project's test command: passes at once, on both sides
REVIEW = json.dumps({"approved": True, "issues": [],
                     "criteria_results": [{"criterion": str(i + 1), "met": True} for i in range(len(CRITERIA))]})

# The agent CLI: POSIX sh and awk, plus `specflux submit-review` for the reviewer's sealed hand-in.
AGENT = r"""#!/bin/sh
# The bench's agent CLI: does the least a session needs, then exits.
cat > /dev/null
if [ "$SPECFLUX_ROLE" = reviewer ]; then
  printf '%s\n' '@REVIEW@' | @SPECFLUX@ submit-review --json - > /dev/null
else
  printf 'changed by the bench agent\n' >> "src/$(basename "$SPECFLUX_TASK_FILE" .md).txt"  # a change outside .specflux/
  awk '$0 == "(To be completed)" { print "### Summary\nDone by the bench agent.\n\n### For Downstream Tasks\nNothing to add."; next } { print }' \
    "$SPECFLUX_TASK_FILE" > "$SPECFLUX_TASK_FILE.tmp" && mv "$SPECFLUX_TASK_FILE.tmp" "$SPECFLUX_TASK_FILE"
fi
"""

SIDES = {  # the cases, in the order they run in each round
    "specflux": "`specflux flow start` (default sandbox)",
    "specflux-nosandbox": "`specflux flow start --no-sandbox`",
    "langgraph": "LangGraph + SqliteSaver (sync) + git",
    "floor": "the agents alone (3T invocations)",
}


# ------------------------------------------------------------------------------------ set-up


def git(root: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=env).stdout


def make_template(parent: Path, tasks: int) -> Path:
    """bench_flow's template repository of `tasks` independent tasks, with the `[validate]` command."""
    return bench_flow.make_template(parent, tasks, config=f'\n[validate]\ncommand = "{VALIDATE}"\n')


def write_agent(folder: Path) -> str:
    """The agent script in `folder`; returns the command line that runs it."""
    agent = folder / "agent.sh"
    sf = " ".join(shlex.quote(a) for a in specflux_argv())
    agent.write_text(AGENT.replace("@REVIEW@", REVIEW).replace("@SPECFLUX@", sf), encoding="utf-8")
    return f"sh {shlex.quote(str(agent))}"


# ------------------------------------------------------------------------------------ the children
# The LangGraph loop and the floor run as whole processes of their own: `--child langgraph|floor
# REPO CMD DB`, printing a JSON summary of what they did.


def task_files(repo: Path) -> list[tuple[str, Path]]:
    """(id, file) of every task, in id order."""
    found = []
    for path in (repo / ".specflux" / "task-states").glob("task-*-state.md"):
        m = re.fullmatch(r"task-(\d+)-state\.md", path.name)
        if m:
            found.append((m.group(1), path))
    return sorted(found, key=lambda t: int(t[0]))


class Agent:
    """Runs the agent command as a hand-written loop would: the task file as its prompt on stdin,
    the environment a specflux run gives it; a reviewer's verdict read from its hand-in file. Also
    runs the validate command. `ms`: the time spent waiting for these processes, measured around
    each (the agents' own time inside this run)."""

    def __init__(self, repo: Path, cmd: str):
        self.repo, self.argv = repo, shlex.split(cmd)
        self.base = {**os.environ, "SPECFLUX_ROOT": str(repo), "SPECFLUX_RUN": "loop"}
        self.sessions = collections.Counter()
        self.validations = 0
        self.ms = 0.0

    def _run(self, role: str, task: str, path: Path, extra: dict) -> None:
        env = {**self.base, "SPECFLUX_ROLE": role, "SPECFLUX_TASK_ID": task, "SPECFLUX_TASK_FILE": str(path), **extra}
        prompt = path.read_bytes()
        t0 = time.perf_counter()
        done = subprocess.run(self.argv, cwd=self.repo, env=env, input=prompt, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        self.ms += (time.perf_counter() - t0) * 1000
        self.sessions[role] += 1
        if done.returncode:
            raise RuntimeError(f"{role} on task {task} exited {done.returncode}: {done.stderr.decode()[-2000:]}")

    def coder(self, task: str, path: Path) -> None:
        self._run("coder", task, path, {})

    def reviewer(self, task: str, path: Path) -> bool:
        folder = tempfile.mkdtemp(prefix="loop-handin-")
        handin = os.path.join(folder, "handin.json")
        step = f"s{sum(self.sessions.values()) + 1}"
        try:
            self._run("reviewer", task, path, {"SPECFLUX_HANDIN": handin, "SPECFLUX_HANDIN_KEY": os.urandom(32).hex(),
                                                "SPECFLUX_HANDIN_STEP": step})
            with open(handin, encoding="utf-8") as f:
                return bool(json.load(f)["data"]["approved"])
        finally:
            shutil.rmtree(folder, ignore_errors=True)


    def validate(self) -> bool:
        t0 = time.perf_counter()
        passed = subprocess.run(VALIDATE, shell=True, cwd=self.repo, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        self.ms += (time.perf_counter() - t0) * 1000
        self.validations += passed
        return passed

    def report(self) -> dict:
        return {"sessions": dict(self.sessions), "validations": self.validations, "agents_ms": self.ms}


def floor_child(repo: Path, cmd: str) -> dict:
    """The 3T invocations, nothing else: coder, validate, reviewer on each task."""
    agent = Agent(repo, cmd)
    for task, path in task_files(repo):
        agent.coder(task, path)
        agent.validate()
        if not agent.reviewer(task, path):
            raise RuntimeError(f"the reviewer rejected task {task}")
    return agent.report()


class Loop(TypedDict, total=False):
    """The LangGraph loop's state."""
    current: int       # the index of the task being worked on
    passed: bool       # the last validation
    approved: bool     # the last review
    attempts: dict     # coder attempts per task
    completed: list    # ids of accepted tasks


def langgraph_child(repo: Path, cmd: str, db: Path) -> dict:
    """The hand-written loop: a LangGraph StateGraph, coder -> validate -> reviewer, durable."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    agent = Agent(repo, cmd)
    tasks = task_files(repo)

    def commit(message: str) -> None:
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, check=True, stdout=subprocess.DEVNULL)

    def coder(state: Loop) -> dict:
        task, path = tasks[state["current"]]
        agent.coder(task, path)
        commit(f"task {task}: coder")
        return {"attempts": {**state["attempts"], task: state["attempts"].get(task, 0) + 1}}

    def run_validate(state: Loop) -> dict:
        return {"passed": agent.validate()}

    def reviewer(state: Loop) -> dict:
        task, path = tasks[state["current"]]
        if not agent.reviewer(task, path):
            return {"approved": False}
        text = path.read_text(encoding="utf-8")  # accepted: the task file says so
        path.write_text(text.replace('"status": "pending"', '"status": "complete"', 1), encoding="utf-8")
        commit(f"task {task}: accepted")
        return {"approved": True, "current": state["current"] + 1, "completed": [*state["completed"], task]}

    def after_validate(state: Loop) -> str:
        return "reviewer" if state["passed"] else "coder"

    def after_reviewer(state: Loop) -> str:
        if not state["approved"]:
            return "coder"
        return "coder" if state["current"] < len(tasks) else END

    graph = StateGraph(Loop)
    graph.add_node("coder", coder)
    graph.add_node("validate", run_validate)
    graph.add_node("reviewer", reviewer)
    graph.add_edge(START, "coder")
    graph.add_edge("coder", "validate")
    graph.add_conditional_edges("validate", after_validate, ["reviewer", "coder"])
    graph.add_conditional_edges("reviewer", after_reviewer, ["coder", END])
    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        app = graph.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 10 * len(tasks) + 20}
        final = app.invoke({"current": 0, "attempts": {}, "completed": []}, config, durability="sync")
    finally:
        conn.close()
    return {**agent.report(), "completed": len(final["completed"])}


# ------------------------------------------------------------------------------------ the sides


class Sides:
    """The whole processes under test, each on a repository prepared beforehand."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.cmd = write_agent(folder)
        self.dbs = 0
        self.reports: dict[str, list[dict]] = collections.defaultdict(list)  # what each child run said

    def specflux(self, repo: Path, sandbox: bool = True, env: dict | None = None) -> None:
        argv = [*specflux_argv(), "--root", str(repo), "flow", "start", "--agent", "command", "--cmd", self.cmd]
        run(argv + ([] if sandbox else ["--no-sandbox"]), env=env)

    def child(self, kind: str, repo: Path, env: dict | None = None) -> dict:
        self.dbs += 1
        db = self.folder / f"loop-{self.dbs}.sqlite"
        done = run([PYTHON, os.path.abspath(__file__), "--child", kind, str(repo), self.cmd, str(db)], env=env,
                   capture=True)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        self.reports[kind].append(report)
        return report


def specflux_summary(repo: Path) -> dict:
    """The run's state (`flow status --json`), with its agent sessions by role and its passed
    validations counted from the run's events."""
    done = run([*specflux_argv(), "--root", str(repo), "flow", "status", "--json"], capture=True)
    state = json.loads(done.stdout)
    sessions: collections.Counter = collections.Counter()
    validations = 0
    for log in (repo / ".specflux" / "runs").glob("*/events.jsonl"):
        for line in log.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event.get("type") == "step_finished":
                sessions[event["kind"]] += 1
                validations += bool((event.get("validation") or {}).get("passed"))
    return {**state, "sessions": dict(sessions), "validations": validations}


def check_equivalent(tasks: int, repos: dict[str, Path], summaries: dict[str, dict]) -> str:
    """Every task complete on both sides, one coder session per task (one line in each src/ file),
    the same number of agent sessions; returns a line saying so."""
    for side, repo in repos.items():
        statuses = [json.loads(re.search(r"```json\n(.*?)\n```", p.read_text(encoding="utf-8"), re.S).group(1))["status"]
                    for _, p in task_files(repo)] if side != "floor" else []
        assert side == "floor" or statuses == ["complete"] * tasks, (side, collections.Counter(statuses))
        lines = [len(p.read_text(encoding="utf-8").splitlines()) for p in (repo / "src").glob("task-*-state.txt")]
        assert lines == [1] * tasks, (side, lines)
    state = summaries["specflux"]
    assert state["status"] == "completed", (state["status"], state.get("failureReason"))
    assert state["metrics"]["tasksCompleted"] == tasks, state["metrics"]
    assert summaries["langgraph"]["completed"] == tasks, summaries["langgraph"]
    for side in ("specflux", "langgraph", "floor"):
        sessions, validations = summaries[side]["sessions"], summaries[side]["validations"]
        assert sessions == {"coder": tasks, "reviewer": tasks} and validations == tasks, (side, sessions, validations)
    return (f"checked: every task complete on both sides; {2 * tasks} agent sessions on each side (coder and "
            f"reviewer once per task) and {tasks} passed validations; one coder change per task in src/")


# ------------------------------------------------------------------------------------ git counts


def git_processes(trace: Path) -> collections.Counter:
    """git processes by subcommand from a GIT_TRACE file: every git process logs its own
    `trace: built-in: git SUBCOMMAND` line (a child git too, e.g. `maintenance` started by `commit`)."""
    counts: collections.Counter = collections.Counter()
    if not trace.exists():
        return counts
    for line in trace.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.search(r"trace: (?:built-in: git|exec: git-?)[ ]?([a-z][a-z0-9-]*)", line)
        if m:
            counts[m.group(1)] += 1
    return counts


def commits(repo: Path) -> int:
    return int(git(repo, "rev-list", "--all", "--count").strip())


def count_git(sides: Sides, template: Path, tasks: int, no_sandbox: bool) -> str:
    """One more run of each side with GIT_TRACE (untimed): git processes per step by subcommand,
    commits written; the equivalence check on these runs. Returns the markdown."""
    steps = 2 * tasks
    base = commits(template)
    wanted = ["specflux"] + (["specflux-nosandbox"] if no_sandbox else []) + ["langgraph", "floor"]
    counts, written, repos, summaries = {}, {}, {}, {}
    for side in wanted:
        repo = fresh_copy(template, sides.folder / f"traced-{side}")
        trace = sides.folder / f"trace-{side}.txt"
        env = {**os.environ, "GIT_TRACE": str(trace)}
        if side.startswith("specflux"):
            sides.specflux(repo, sandbox=side == "specflux", env=env)
            summaries[side] = specflux_summary(repo)
        else:
            summaries[side] = sides.child(side, repo, env=env)
        counts[side] = git_processes(trace)
        written[side] = commits(repo) - base
        repos[side] = repo
    checked = check_equivalent(tasks, {k: v for k, v in repos.items() if k != "specflux-nosandbox"}, summaries)
    shown = [s for s in wanted if s != "floor"]
    subcommands = sorted({c for s in shown for c in counts[s]}, key=lambda c: (-counts["specflux"][c], c))
    rows = [[f"`{c}`", *(f"{counts[s][c] / steps:.2f}" for s in shown)] for c in subcommands]
    rows.append(["**all git processes**", *(f"**{sum(counts[s].values()) / steps:.2f}**" for s in shown)])
    rows.append(["commits written (whole run)", *(str(written[s]) for s in shown)])
    out = [f"### git per agent step ({steps} steps; one untimed run each with GIT_TRACE)\n",
           md_table(["git subcommand", *(SIDES[s] for s in shown)], rows),
           f"\nThe floor ran {sum(counts['floor'].values())} git processes (the agent runs none). {checked}.\n"]
    return "\n".join(out)


# ------------------------------------------------------------------------------------ main


def bench(work: Path, tasks: int, rounds: int, no_sandbox: bool) -> int:
    template = make_template(work, tasks)
    sides = Sides(work)
    steps = 2 * tasks
    cases_wanted = [s for s in SIDES if no_sandbox or s != "specflux-nosandbox"]
    repos = {name: work / f"case-{name}" for name in cases_wanted}

    def setup(name: str) -> None:  # untimed: a fresh copy of the repository for each run
        fresh_copy(template, repos[name])

    runners = {
        "specflux": lambda: sides.specflux(repos["specflux"]),
        "specflux-nosandbox": lambda: sides.specflux(repos["specflux-nosandbox"], sandbox=False),
        "langgraph": lambda: sides.child("langgraph", repos["langgraph"]),
        "floor": lambda: sides.child("floor", repos["floor"]),
    }
    # counted first: it checks that both sides do the same work (and warms every side up)
    git_md = count_git(sides, template, tasks, no_sandbox)
    sides.reports.clear()
    start_load = load()
    samples = compare({name: runners[name] for name in cases_wanted}, runs=rounds, warmup=1, setup=setup)
    end_load = load()

    # per round: each side above the floor of the same round; and, as a cross-check of the smaller
    # figure, the loop's own time measured inside its process around its agent calls
    floor = samples["floor"]
    above = {s: [x - f for x, f in zip(samples[s], floor)] for s in cases_wanted if s != "floor"}
    lg_runs, floor_runs = sides.reports["langgraph"][1:], sides.reports["floor"][1:]  # the first warmed up
    lg_inside = [(x - r["agents_ms"]) - (f - q["agents_ms"])
                 for x, r, f, q in zip(samples["langgraph"], lg_runs, floor, floor_runs)]
    rows, cross = [], []
    for s, label in (("specflux", "default sandbox"), ("specflux-nosandbox", "`--no-sandbox`")):
        if s not in samples:
            continue
        ratios = round_ratios({"a": above[s], "b": above["langgraph"]}, "a", "b")
        rows.append([label, f"{md(above[s]) / steps:.1f} ms", f"{md(above['langgraph']) / steps:.1f} ms",
                     ratio_cell(ratios), f"{md(above[s]) / md(above['langgraph']):.2f}x"])
        inside = round_ratios({"a": above[s], "b": lg_inside}, "a", "b")
        cross.append([label, f"{md(above[s]) / steps:.1f} ms", f"{md(lg_inside) / steps:.1f} ms", ratio_cell(inside)])
    print(f"### Per agent step, above the agent's own time ({tasks} tasks, {steps} agent steps, "
          f"{tasks} validations; {rounds} interleaved rounds after 1 warm-up)\n")
    print(md_table(["per agent step, above the agent's own time", "specflux", "LangGraph + git",
                    "ratio: median of per-round ratios", "ratio of the medians"], rows))
    print(f"\n{start_load} at the start of the rounds, {end_load} at the end. Each round's ratio is "
          "(specflux - floor) / (LangGraph - floor), the cases of a round run back to back.\n")
    print("Cross-check of the smaller figure: the loop's own time measured inside its process (its whole "
          "time less the time it waited for the agents and validate, measured around each call), less the "
          "same for the floor, in the same round:\n")
    print(md_table(["per agent step, above the agent's own time", "specflux", "LangGraph + git, measured inside",
                    "ratio: median of per-round ratios"], cross))
    agents = [[SIDES[k], f"{md([r['agents_ms'] for r in v]) / steps:.1f} ms"] for k, v in (("langgraph", lg_runs),
                                                                                         ("floor", floor_runs))]
    print("\nThe agents' own time per agent step, measured around each call (the same invocations; what "
          "separates them is the machine's load):\n")
    print(md_table(["process", "agents and validate, per agent step (median)"], agents) + "\n")
    rows = [[SIDES[s], fmt_ms(md(samples[s])), f"{min(samples[s]):,.0f}-{max(samples[s]):,.0f}",
             f"{md(samples[s]) / steps:.1f}"] for s in cases_wanted]
    print(md_table(["whole process", "ms (median)", "range", "ms per agent step"], rows))
    print()
    print(git_md)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 tasks, 3 rounds")
    ap.add_argument("--tasks", type=int, help="independent tasks (default 50; 10 with --quick)")
    ap.add_argument("--rounds", type=int, help="timed rounds (default 7; 3 with --quick)")
    ap.add_argument("--no-sandbox-too", action="store_true", help="also time `flow start --no-sandbox`")
    ap.add_argument("--child", nargs=4, metavar=("KIND", "REPO", "CMD", "DB"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        kind, repo, cmd, db = a.child
        out = floor_child(Path(repo), cmd) if kind == "floor" else langgraph_child(Path(repo), cmd, Path(db))
        print(json.dumps(out))
        return 0
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: F401
    except ImportError:
        raise SystemExit('bench_whole_run needs LangGraph: pip install -e ".[bench]"') from None
    tasks = a.tasks or (10 if a.quick else 50)
    rounds = a.rounds or (3 if a.quick else 7)
    header("bench_whole_run: `specflux flow start` vs a LangGraph loop + git, the same agent calls", a.quick)
    work = Path(tempfile.mkdtemp(prefix="specflux-bench-whole-"))
    try:
        return bench(work, tasks, rounds, a.no_sandbox_too)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
