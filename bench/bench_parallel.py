#!/usr/bin/env python3
"""Parallel lanes (`specflux flow start --parallel N`) against the same run done one task at a time.

A committed git repository with T independent tasks, each changing its own file. The agent CLI is
a POSIX sh script that answers with a fixed delay, as an agent whose time dominates would: the
coder sleeps DELAY seconds, writes its file and the task's chain output; the reviewer approves at
once. Both sides are the whole process `specflux flow start --agent command --cmd AGENT`, run on a
fresh copy of the repository each time, interleaved:

    sequential   `flow start`                 T coder sessions one after the other
    parallel N   `flow start --parallel N`    up to N coder sessions at once, each in its own git
                 worktree (created, merged back into the branch with a merge commit, removed)

Reported: medians, the ratio parallel / sequential (the median of per-round ratios), and the floor the agent alone sets for each
(T x DELAY and ceil(T / N) x DELAY). Target: a fraction of the sequential time, i.e. near
ceil(T / N) / T of it plus the cost of the worktrees and merges.

~2 minutes with the defaults (T=6, DELAY=2 s, N=3, K=3 rounds after a warm-up round); --quick:
T=3, DELAY=1 s, K=2. Reported as the median of the per-round ratios with their spread, and the load.

Usage: python bench/bench_parallel.py [--quick] [--tasks T] [--delay S] [--parallel N] [--runs K]
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (compare, fmt_ms, header, load, md, md_table, ratio, ratio_cell, round_ratios,  # noqa: E402
                     specflux_argv)

# The agent's environment is an allowlist (agent/environment.py): the delay travels as a SPECFLUX_*
# variable, which it passes; the reviewer hands in its verdict as a reviewer must (`submit-review`
# seals it: a verdict written straight to $SPECFLUX_HANDIN is refused, and the task rejected).
AGENT = r"""#!/bin/sh
# The bench's agent CLI: a fixed delay for the coder, then the least a session needs.
cat > /dev/null
if [ "$SPECFLUX_ROLE" = reviewer ]; then
  printf '%s\n' '{"approved": true, "issues": [], "criteria_results": [{"criterion": "1", "met": true}]}' | @SPECFLUX@ submit-review --json - > /dev/null
else
  sleep "$SPECFLUX_BENCH_DELAY"
  echo "task $SPECFLUX_TASK_ID" > "out-$SPECFLUX_TASK_ID.txt"
  awk '$0 == "(To be completed)" { print "### Summary\nDone by the bench agent.\n\n### For Downstream Tasks\nNothing to add."; next } { print }' \
    "$SPECFLUX_TASK_FILE" > "$SPECFLUX_TASK_FILE.tmp" && mv "$SPECFLUX_TASK_FILE.tmp" "$SPECFLUX_TASK_FILE"
fi
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def make_template(parent: Path, tasks: int) -> Path:
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    root = parent / "template"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for key, value in (("user.name", "Bench"), ("user.email", "bench@example.com"), ("commit.gpgsign", "false")):
        git(root, "config", key, value)
    (root / "README.md").write_text("# bench project\n", encoding="utf-8")
    ws, _ = Workspace.init(root)
    manager = TaskStateManager(ws, git=False)
    for i in range(1, tasks + 1):
        manager.create(f"Task {i}: write out-{i}.txt", requirements="Write the file.", criteria=["the file exists"])
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project and tasks")
    time.sleep(1.1)  # past git's racy-clean second
    git(root, "update-index", "--refresh")
    return root


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tasks", type=int)
    p.add_argument("--delay", type=float)
    p.add_argument("--parallel", type=int, default=3)
    p.add_argument("--runs", type=int)
    a = p.parse_args()
    tasks = a.tasks or (3 if a.quick else 6)
    delay = a.delay or (1.0 if a.quick else 2.0)
    runs = a.runs or (2 if a.quick else 3)
    header("Parallel lanes: `flow start --parallel N` vs one task at a time", a.quick)
    folder = Path(tempfile.mkdtemp(prefix="specflux-bench-parallel-"))
    try:
        template = make_template(folder, tasks)
        agent = folder / "agent.sh"
        agent.write_text(AGENT.replace("@SPECFLUX@", " ".join(shlex.quote(part) for part in specflux_argv())),
                         encoding="utf-8")
        env = {**os.environ, "SPECFLUX_BENCH_DELAY": str(delay)}
        work = folder / "repo"

        def fresh(_name: str) -> None:
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(template, work, symlinks=True)
            git(work, "update-index", "-q", "--refresh")

        def flow(*extra: str):
            def go() -> None:
                done = subprocess.run([*specflux_argv(), "--root", str(work), "flow", "start", "--agent", "command",
                                       "--cmd", f"sh {agent}", *extra], env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    raise SystemExit(f"flow start {' '.join(extra)} failed:\n{done.stderr[-2000:]}")
                merges = git(work, "log", "--merges", "--oneline").count("\n")
                if extra and merges != tasks:
                    raise SystemExit(f"expected {tasks} merges, found {merges}")
                made = sum(1 for i in range(1, tasks + 1) if (work / f"out-{i}.txt").exists())
                done = git(work, "grep", "-l", '"status": "complete"', "--", ".specflux/task-states").split()
                if made != tasks or len(done) != tasks:
                    raise SystemExit(f"expected {tasks} tasks complete, found {len(done)} ({made} files written)")
            return go

        name = f"parallel {a.parallel}"
        samples = compare({"sequential": flow(), name: flow("--parallel", str(a.parallel))},
                          runs=runs, warmup=1, setup=fresh)
        seq, par = md(samples["sequential"]), md(samples[name])
        floor_seq = tasks * delay * 1000
        floor_par = math.ceil(tasks / a.parallel) * delay * 1000
        print(f"{tasks} independent tasks, coder delay {delay:g} s, reviewer at once; median of {runs} run(s) after a "
              f"warm-up, interleaved; {load()} at the end\n")
        print(md_table(["run", "median ms", "agent floor ms", "over the floor ms"], [
            ["sequential", fmt_ms(seq), fmt_ms(floor_seq), fmt_ms(seq - floor_seq)],
            [f"--parallel {a.parallel}", fmt_ms(par), fmt_ms(floor_par), fmt_ms(par - floor_par)],
        ]))
        print(f"\nparallel / sequential, per round: **{ratio_cell(round_ratios(samples, name, 'sequential'))}** "
              f"(the agent alone: {ratio(floor_par, floor_seq)}); "
              f"per task over the agent's time: sequential {fmt_ms((seq - floor_seq) / tasks)} ms, "
              f"parallel {fmt_ms((par - floor_par) / tasks)} ms (worktree, merge and clean-up included)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
