#!/usr/bin/env python3
"""The engine's own cost per step, side by side with LangGraph on the same coder/reviewer loop.

The loop: T tasks, in order; on each, a coder step then a reviewer step; the reviewer rejects
the second task's first attempt once (one retry: coder and reviewer again), approves every other.
That is 2T + 2 agent steps. The agents do no work: each step returns its output at once, so what
is timed is the orchestration alone:

  specflux   `specflux.flow.engine.Engine` in-process over a workspace of T task files, driven as
             `flow/runs.py` drives it (the built-in `queue` workflow, its JSONata edges), with
             roles that return at once. No git (the workspace is outside a repository): git aside,
             as the issue asks. Every event durable as in a real run; accepting a task writes its
             chain output into its task file, as in a real run.
  LangGraph  a `StateGraph` with the same nodes (coder, reviewer) and conditional edges (reviewer
             -> coder on a rejection, -> the next task's coder on approval, -> END after the last),
             compiled with a durable `SqliteSaver` checkpointer (a file database; LangGraph's own
             `setup()` puts it in WAL mode; `synchronous` left at SQLite's default, FULL, which
             syncs the WAL at every commit) and run with `durability="sync"` (each step's
             checkpoint written before the next step starts: what specflux promises). LangGraph's
             default, `durability="async"` (the checkpoint written while the next step runs), is
             measured too, for scale.
  CPU cost   both again with their syncs off (specflux inside `not_durable()`, SQLite with
             `PRAGMA synchronous=OFF`): what each costs apart from waiting for the disk.

Runs are interleaved (specflux, LangGraph sync, LangGraph async, ...) after a warm-up, each on a
fresh copy of the workspace / a fresh database; reported: the median cost per step, for each
pairing (specflux vs LangGraph sync, vs async, and both with syncs off) the median of the per-round
ratios with their spread (a busy minute slows both sides of a round alike) and the machine's load,
and fsyncs per step, counted twice: by wrapping os.fsync in-process (specflux's own), and for both
sides by `strace -f -e trace=fsync,fdatasync,msync,sync_file_range,syncfs` of one untimed run in a
child process (SQLite syncs from C). Only the timed part counts: specflux's `Engine.drive` (not
`flow start`'s creation of the run and its task holds) and LangGraph's `invoke` (not `setup`). Then one specflux run under cProfile: where its time goes.

Needs the bench extra: `pip install -e ".[bench]"` (langgraph, langgraph-checkpoint-sqlite).

Usage: python bench/bench_engine.py [--quick] [--tasks T] [--runs K] [--top N]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, fmt_ms, header, load, md, md_table, ratio_cell, round_ratios  # noqa: E402

REJECTED = 1  # the index of the task whose first review is a rejection
CRITERIA = ("negative numbers are handled", "the signature is unchanged", "a test covers it")
SYNC_CALLS = "fsync,fdatasync,msync,sync_file_range,syncfs"
SIDES = {  # the cases, in the order they run in each round
    "specflux": "specflux Engine (no git)",
    "langgraph-sync": "LangGraph + SqliteSaver, durability=\"sync\"",
    "langgraph-async": "LangGraph + SqliteSaver, durability=\"async\" (its default)",
    "specflux-nosync": "specflux Engine, fsyncs off (`not_durable()`): its CPU cost",
    "langgraph-nosync": "LangGraph, durability=\"sync\", `PRAGMA synchronous=OFF`: its CPU cost",
}
TRACED = ("specflux", "langgraph-sync", "langgraph-async")  # counted under strace
PAIRS = {  # (specflux side, LangGraph side): each round's ratio of the two, run back to back
    "specflux / LangGraph sync (equal durability)": ("specflux", "langgraph-sync"),
    "specflux / LangGraph async (its default)": ("specflux", "langgraph-async"),
    "specflux / LangGraph, syncs off (CPU)": ("specflux-nosync", "langgraph-nosync"),
}


# ------------------------------------------------------------------------------------ specflux


def make_workspace(parent: Path, tasks: int) -> Path:
    """A workspace (no git) with `tasks` independent pending tasks of three criteria each."""
    from specflux.cli.main import main

    root = parent / "template"
    root.mkdir(parents=True)
    quiet = open(os.devnull, "w")
    saved = sys.stdout
    sys.stdout = quiet
    try:
        assert main(["init", str(root)]) == 0
        for i in range(tasks):
            argv = ["--root", str(root), "new", f"Task {i + 1}"]
            for c in CRITERIA:
                argv += ["--ac", c]
            assert main(argv) == 0
    finally:
        sys.stdout = saved
        quiet.close()
    return root


def aged() -> None:
    """Wait until the task files just copied are older than the list cache's racy window (2 s):
    a run starts on task files written some time before, whose rows the cache holds (accepting a
    task reads every task's dependencies, from the cache where a file is unchanged)."""
    from specflux.store.summary_cache import RACY_NS

    time.sleep(RACY_NS / 1e9 + 0.1)


class InstantRoles:
    """The coder and the reviewer, answering at once: the coder hands over a chain output with its
    self-validation passed; the reviewer judges every criterion, rejecting task REJECTED's first
    attempt and approving everything else."""

    def __init__(self) -> None:
        self.reviews: dict[str, int] = {}

    def perform(self, step: dict[str, Any], state: dict[str, Any], resumed: bool = False, key: str = "",
                stamp: str | None = None):
        from specflux.flow.steps.roles import StepResult

        task_id = step["taskId"]
        if step["kind"] == "coder":
            output = {"taskId": task_id, "code": "", "status": "complete",
                      "selfValidation": {"passed": True, "issues": [], "claimedByAgent": True}}
            return StepResult("OK", output, chain_output={"summary": f"Task {task_id} done.", "downstream": ""})
        n = self.reviews[task_id] = self.reviews.get(task_id, 0) + 1
        index = next(i for i, t in enumerate(state["tasks"]) if t["id"] == task_id)
        approved = not (index == REJECTED and n == 1)
        output = {"taskId": task_id, "approved": approved,
                  "criteriaResults": [{"criterion": str(i + 1), "met": approved} for i in range(len(CRITERIA))],
                  "issues": [] if approved else [{"severity": "blocker", "description": "a test is missing"}]}
        return StepResult("OK", output)


def mark(what: str) -> None:
    """A system call strace sees (`access` of a path that does not exist): where the timed part
    of a traced run starts and ends."""
    os.access(f"/specflux-bench-mark-{what}", os.F_OK)


def specflux_loop(root: Path) -> tuple[int, float]:
    """One run of the loop in the workspace at `root`: (steps, ms of `Engine.drive`; creating the
    run and loading the workflow are not timed)."""
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace
    from specflux.flow import runs
    from specflux.flow.engine import Engine
    from specflux.flow.steps.roles import Agents
    from specflux.flow.workflow.edges import spec_for
    from specflux.flow.workflow.workflow_file import load_workflow

    manager = TaskStateManager(Workspace.find(explicit=str(root)), git=False)
    run = runs.start(manager, agents=Agents(kind="command", cmd="true"))
    flow = load_workflow("queue", manager.ws.dir)
    engine = Engine(manager, run, spec_for(flow, manager.ws.root), InstantRoles())
    mark("start")
    t0 = time.perf_counter()
    state = engine.drive()
    ms = (time.perf_counter() - t0) * 1000
    mark("end")
    assert state["status"] == "completed", (state["status"], state.get("failureReason"), state.get("failureDetail"))
    return state["iteration"], ms


# ------------------------------------------------------------------------------------ LangGraph


class LoopState(TypedDict, total=False):
    """LangGraph's state for the loop: the tasks, the queue's position, the outputs."""

    tasks: list
    current: int
    reviews: dict
    coderOutput: dict
    reviewerOutput: dict
    steps: int


def lg_coder(state: LoopState) -> dict:
    task = state["tasks"][state["current"]]
    return {"coderOutput": {"taskId": task["id"], "code": "", "status": "complete",
                            "selfValidation": {"passed": True, "issues": [], "claimedByAgent": True}},
            "steps": state.get("steps", 0) + 1}


def lg_reviewer(state: LoopState) -> dict:
    i = state["current"]
    task = state["tasks"][i]
    n = state["reviews"].get(task["id"], 0) + 1
    approved = not (i == REJECTED and n == 1)
    out = {"reviewerOutput": {"taskId": task["id"], "approved": approved,
                              "criteriaResults": [{"criterion": str(k + 1), "met": approved} for k in range(len(CRITERIA))],
                              "issues": [] if approved else [{"severity": "blocker", "description": "a test is missing"}]},
           "reviews": {**state["reviews"], task["id"]: n}, "steps": state.get("steps", 0) + 1}
    if approved:  # the task is accepted: its status and the queue's position move on
        out["tasks"] = [dict(t, status="complete") if k == i else t for k, t in enumerate(state["tasks"])]
        out["current"] = i + 1
    return out


def lg_after_coder(state: LoopState) -> str:
    return "reviewer" if state["coderOutput"]["selfValidation"]["passed"] else "coder"


def lg_after_reviewer(state: LoopState) -> str:
    from langgraph.graph import END

    if not state["reviewerOutput"]["approved"]:
        return "coder"
    return "coder" if state["current"] < len(state["tasks"]) else END


def langgraph_loop(db: Path, tasks: int, durability: str = "sync", synchronous: bool = True) -> tuple[int, float]:
    """The same loop as a LangGraph StateGraph with a durable SqliteSaver: (steps, ms of the
    `invoke`; building the graph and opening the database are not timed). `synchronous=False`:
    SQLite's `PRAGMA synchronous=OFF` (no syncs at all; for where the time goes)."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(LoopState)
    graph.add_node("coder", lg_coder)
    graph.add_node("reviewer", lg_reviewer)
    graph.add_edge(START, "coder")
    graph.add_conditional_edges("coder", lg_after_coder, ["reviewer", "coder"])
    graph.add_conditional_edges("reviewer", lg_after_reviewer, ["coder", END])
    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        if not synchronous:
            conn.execute("PRAGMA synchronous=OFF")
        app = graph.compile(checkpointer=saver)
        start = {"tasks": [{"id": str(k + 1), "status": "pending", "acceptanceCriteria": list(CRITERIA)}
                           for k in range(tasks)], "current": 0, "reviews": {}, "steps": 0}
        config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 10 * tasks + 20}
        mark("start")
        t0 = time.perf_counter()
        final = app.invoke(start, config, durability=durability)
        ms = (time.perf_counter() - t0) * 1000
        mark("end")
    finally:
        conn.close()
    assert final["current"] == tasks, final["current"]
    return final["steps"], ms


def sqlite_settings(db: Path) -> str:
    """The journal mode and synchronous level a SqliteSaver's connection has (after its setup)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(db), check_same_thread=False)
    try:
        SqliteSaver(conn).setup()
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        level = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(conn.execute("PRAGMA synchronous").fetchone()[0])
    finally:
        conn.close()
    return f"journal_mode={mode}, synchronous={level}"


# ------------------------------------------------------------------------------------ counting


def child(side: str, folder: Path, tasks: int) -> None:
    """One untimed run of one side, for strace to count its syncs (`--child SIDE DIR T`)."""
    if side == "specflux":
        steps, _ = specflux_loop(folder)
    else:
        steps, _ = langgraph_loop(folder / "lg.sqlite", tasks, side.split("-", 1)[1])
    print(steps)


def traced_syncs(side: str, folder: Path, tasks: int) -> tuple[int, int] | None:
    """(sync system calls, steps) of one run of `side` in a child process under strace, or None
    when strace is not there (or not allowed)."""
    if shutil.which("strace") is None:
        return None
    log = folder / f"strace-{side}.txt"
    done = subprocess.run(["strace", "-f", "-qq", "-e", f"trace={SYNC_CALLS},access", "-o", str(log), PYTHON,
                           __file__, "--child", side, str(folder), str(tasks)], capture_output=True, text=True)
    if done.returncode != 0 or not log.exists():
        return None
    calls, timed = 0, False
    for line in log.read_text().splitlines():
        if "specflux-bench-mark-" in line:
            timed = "mark-start" in line
        elif timed and "(" in line and "resumed>" not in line and "access(" not in line:
            calls += 1
    return calls, int(done.stdout.split()[-1])


class FsyncCounter:
    """os.fsync wrapped: how often specflux's own code calls it during the timed part (between
    the marks; SQLite's syncs are C calls, which only strace sees)."""

    def __init__(self) -> None:
        self.calls = 0
        self._real_fsync, self._real_access = os.fsync, os.access
        self._timed = False

    def __enter__(self) -> "FsyncCounter":
        def counted(fd: int) -> None:
            self.calls += self._timed
            self._real_fsync(fd)

        def marked(path, *args, **kwargs):
            if str(path).startswith("/specflux-bench-mark-"):
                self._timed = str(path).endswith("start")
            return self._real_access(path, *args, **kwargs)

        os.fsync, os.access = counted, marked
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync, os.access = self._real_fsync, self._real_access


# ------------------------------------------------------------------------------------ main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 tasks (22 steps), 5 runs")
    ap.add_argument("--tasks", type=int, help="tasks in the loop (default 50: 102 steps; 10 with --quick)")
    ap.add_argument("--runs", type=int, help="timed runs per case (default 11; 5 with --quick)")
    ap.add_argument("--top", type=int, default=15, help="rows of the profile table")
    ap.add_argument("--child", nargs=3, metavar=("SIDE", "DIR", "T"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], Path(a.child[1]), int(a.child[2]))
        return 0
    try:
        import langgraph  # noqa: F401
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: F401
    except ImportError:
        raise SystemExit('bench_engine needs LangGraph: pip install -e ".[bench]"') from None
    tasks = a.tasks or (10 if a.quick else 50)
    runs = a.runs or (5 if a.quick else 11)
    header("bench_engine: specflux's engine vs LangGraph, the same coder/reviewer loop", a.quick)
    work = Path(tempfile.mkdtemp(prefix="specflux-bench-engine-"))
    try:
        template = make_workspace(work, tasks)
        settings = sqlite_settings(work / "settings.sqlite")
        samples: dict[str, list[float]] = {side: [] for side in SIDES}
        steps: dict[str, int] = {}
        fsyncs: dict[str, int] = {}
        for i in range(runs + 1):  # every copy made first, then aged (see aged())
            for side in ("specflux", "specflux-nosync"):
                shutil.copytree(template, work / f"{side}-{i}")
        for name in ("traced-specflux", "profiled"):
            shutil.copytree(template, work / name)
        aged()
        start_load = load()
        for i in range(runs + 1):  # the first round warms up
            for side in samples:
                folder = work / f"{side}-{i}"
                if side == "specflux":
                    with FsyncCounter() as counter:
                        n, ms = specflux_loop(folder)
                    fsyncs[side] = counter.calls
                elif side == "specflux-nosync":
                    from specflux.base.files import not_durable

                    with not_durable():
                        n, ms = specflux_loop(folder)
                else:
                    folder.mkdir()
                    n, ms = langgraph_loop(folder / "lg.sqlite", tasks, "async" if side.endswith("async") else "sync",
                                           synchronous=not side.endswith("nosync"))
                steps[side] = n
                if i:
                    samples[side].append(ms / n)
                shutil.rmtree(folder, ignore_errors=True)

        end_load = load()
        traced = {}
        for side in TRACED:
            folder = work / f"traced-{side}"
            if side != "specflux":
                folder.mkdir()
            traced[side] = traced_syncs(side, folder, tasks)
        per = {side: md(v) for side, v in samples.items()}
        rows = []
        for side, label in SIDES.items():
            t = traced.get(side)
            sync_calls = f"{t[0] / t[1]:.2f}" if t else ("0" if side.endswith("nosync") else "n/a (no strace)")
            own = f"{fsyncs[side] / steps[side]:.2f}" if side in fsyncs else "-"
            rows.append([label, steps[side], f"{per[side]:.2f}", f"{min(samples[side]):.2f}-{max(samples[side]):.2f}",
                         sync_calls, own])
        print(f"### The same loop: {tasks} tasks, coder then reviewer each, one rejection ({steps['specflux']} steps)\n")
        print(md_table(["orchestrator", "steps", "ms per step (median)", "range", "sync calls per step (strace)",
                        "os.fsync per step"], rows))
        ratios = {name: round_ratios(samples, a, b) for name, (a, b) in PAIRS.items()}
        print(f"\nPaired, round by round ({runs} rounds after one warm-up; {start_load} at the start of the "
              f"rounds, {end_load} at the end):\n")
        print(md_table(["pairing", "median of per-round ratios (spread)"],
                       [[name, ratio_cell(r)] for name, r in ratios.items()]))
        print(f"\nLangGraph's SQLite: {settings}. Each run on a fresh copy of the workspace / a fresh database.\n")

        # where specflux's time goes
        folder = work / "profiled"
        prof = cProfile.Profile()
        prof.enable()
        n, wall = specflux_loop(folder)
        prof.disable()
        stats = pstats.Stats(prof)
        rows = []
        entries = sorted(stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)  # cumulative
        for (file, line, name), (cc, nc, tt, ct, callers) in entries[: a.top]:
            where = file.split("site-packages/")[-1].split("/specflux/")[-1] if "/" in file else file
            rows.append([f"`{where}:{name}`", nc, f"{ct * 1000:.1f}", f"{ct * 1000 / n:.2f}"])
        print(f"### Where specflux's time goes (one run under cProfile: {fmt_ms(wall)} for {n} steps)\n")
        print(md_table(["function (cumulative)", "calls", "ms", "ms per step"], rows))
        own = sorted(entries, key=lambda kv: kv[1][2], reverse=True)[: a.top]
        rows = [[f"`{(f.split('/specflux/')[-1] if '/specflux/' in f else f.split('/')[-1])}:{name}`", nc,
                 f"{tt * 1000:.1f}", f"{tt * 1000 / n:.2f}"] for (f, _, name), (cc, nc, tt, ct, _) in own]
        print("\nOwn time (leaf functions):\n")
        print(md_table(["function (own)", "calls", "ms", "ms per step"], rows))
        sync = ratio_cell(ratios["specflux / LangGraph sync (equal durability)"])
        print(f"\nspecflux {per['specflux']:.2f} ms per step against LangGraph's {per['langgraph-sync']:.2f} "
              f"(sync): {sync} per round; {load()}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
