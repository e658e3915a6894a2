#!/usr/bin/env python3
"""One-task commands against the least a Python process can do for the same job.

Whole-process `specflux show ID`, `show ID --json`, `check ID 1`, `uncheck ID K`, `session ID
--did x --no-commit` and `context ID` on one task of a generated workspace (1,000 tasks; 100 with --quick), interleaved
in one run with two floors, both `python -c` programs run by the same interpreter:

  floor: read    reads the one task file, finds its ```json fence and `json.loads` the metadata
                 (what `show`, `show --json` and `context` are compared with);
  floor: write   the same, then writes the file back with a session-sized block appended,
                 durably (temp file, fsync, os.replace, fsync of the folder): what `check`, `uncheck`
                 and `session` are compared with.

The task file is restored before every run of `check`, `uncheck`, `session` and the write floor, so every
run starts from the same text. `python -c pass` is reported for scale.

Target: each command within 2.5x of its floor: the median of per-round ratios (each round runs
every case once, back to back, so a busy minute slows both sides of a ratio alike).

Usage: python bench/bench_one_task.py [--quick] [--n 1000] [--runs K]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (PYTHON, compare, fmt_ms, header, load, make_workspace, md, md_table, ratio_cell, round_ratios,  # noqa: E402
                     run, specflux_argv, verdict)

TARGET = 2.5  # issue 26

FLOOR_READ = r"""
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    t = f.read()
s = t.index("\n", t.find("```json")) + 1
meta = json.loads(t[s:t.index("\n```", s)])
print(meta["task_id"], meta["status"], len(t))
"""

FLOOR_WRITE = r"""
import json, os, sys, tempfile
path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    t = f.read()
s = t.index("\n", t.find("```json")) + 1
meta = json.loads(t[s:t.index("\n```", s)])
t += "\n### Session %d - 2024-01-01 00:00\n**Did:**\n- x\n\n**Issues:** None\n\n**Next:** x\n" % (meta.get("total_sessions", 0) + 1)
folder = os.path.dirname(path)
fd, tmp = tempfile.mkstemp(dir=folder)
with os.fdopen(fd, "wb") as f:
    f.write(t.encode("utf-8"))
    f.flush()
    os.fsync(f.fileno())
os.replace(tmp, path)
dfd = os.open(folder, os.O_RDONLY)
os.fsync(dfd)
os.close(dfd)
"""

# command label -> (argv after `--root DIR`, floor it is compared with); ID is filled in
COMMANDS = {
    "show": (["show", "ID"], "floor: read"),
    "show --json": (["show", "ID", "--json"], "floor: read"),
    "context": (["context", "ID"], "floor: read"),
    "check": (["check", "ID", "1"], "floor: write"),
    "uncheck": (["uncheck", "ID", "TICKED"], "floor: write"),
    "session --no-commit": (["session", "ID", "--did", "x", "--no-commit"], "floor: write"),
}
RESTORE = ("check", "uncheck", "session --no-commit", "floor: write")  # cases that change the file


def pick_task(root: Path, n: int) -> tuple[str, str]:
    """A task with an unticked first criterion (so `check 1` writes), a ticked one (so `uncheck`
    writes) and a dependency (so `context` embeds an upstream), as near the middle of the workspace
    as possible; (its id, the number of its first ticked criterion)."""
    states = root / ".specflux" / "task-states"
    for i in range(n // 2, 0, -1):
        text = (states / f"task-{i}-state.md").read_text(encoding="utf-8")
        m = re.search(r"### Acceptance Criteria\n((?:- \[.\] .*\n)+)", text)
        boxes = re.findall(r"- \[(.)\]", m.group(1)) if m else []
        if boxes and boxes[0] == " " and "x" in boxes and '"dependencies"' in text:
            return str(i), str(boxes.index("x") + 1)
    raise SystemExit("no task with an unticked first criterion, a ticked one and a dependency")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 tasks, 7 runs")
    ap.add_argument("--n", type=int, help="workspace size (default 1,000; 100 with --quick)")
    ap.add_argument("--runs", type=int, help="timed runs per case (default 21; 7 with --quick)")
    ap.add_argument("--keep", action="store_true", help="keep the generated workspace")
    a = ap.parse_args()
    n = a.n or (100 if a.quick else 1000)
    runs = a.runs or (7 if a.quick else 21)

    header(f"bench_one_task: one-task commands vs a same-run floor (N = {n:,})", a.quick)
    sf = specflux_argv()
    root = make_workspace(n)
    try:
        task, ticked = pick_task(root, n)
        fill = {"ID": task, "TICKED": ticked}
        path = root / ".specflux" / "task-states" / f"task-{task}-state.md"
        original = path.read_bytes()
        base = [*sf, "--root", str(root)]

        cases = {
            "python -c pass": lambda: run([PYTHON, "-c", "pass"]),
            "floor: read": lambda: run([PYTHON, "-c", FLOOR_READ, str(path)]),
            "floor: write": lambda: run([PYTHON, "-c", FLOOR_WRITE, str(path)]),
        }
        for label, (argv, _) in COMMANDS.items():
            full = [*base, *(fill.get(x, x) for x in argv)]
            cases[label] = lambda full=full: run(full)

        def setup(name: str) -> None:
            if name in RESTORE:
                path.write_bytes(original)

        # sanity: every command succeeds and writes what it should
        for label, (argv, _) in COMMANDS.items():
            setup(label)
            run([*base, *(fill.get(x, x) for x in argv)])
        path.write_bytes(original)
        run([*base, "check", task, "1"])
        after = path.read_bytes()
        assert len(after) == len(original) and sum(x != y for x, y in zip(after, original)) == 1, "check changed more than one byte"
        path.write_bytes(original)

        samples = compare(cases, runs=runs, warmup=2, setup=setup)
        path.write_bytes(original)
        m = {k: md(v) for k, v in samples.items()}
        rows = []
        for label in ("python -c pass", "floor: read", "floor: write"):
            rows.append([label, fmt_ms(m[label]), "", "", ""])
        results = {}
        for label, (argv, floor) in COMMANDS.items():
            shown = " ".join(fill.get(x, x) for x in argv)
            ratios = round_ratios(samples, label, floor)
            results[label] = md(ratios)
            rows.append([f"`specflux {shown}`", fmt_ms(m[label]), floor, ratio_cell(ratios), verdict(results[label], TARGET)])
        print(md_table(["command", "median ms", "compared with", "ratio, per round", f"target {TARGET:g}x"], rows))
        print(f"\n{runs} rounds after 2 warm-ups, every case once a round; ratio: the median of per-round ratios with "
              f"quartiles, range and rounds; task {task} ({len(original):,} bytes) of {n:,}; {load()} at the end\n")
        missed = [k for k, r in results.items() if r > TARGET]
        print("MISSED: " + ", ".join(missed) if missed else f"OK: every one-task command within {TARGET:g}x of its floor")
        return 0
    finally:
        if a.keep:
            print(f"(kept {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
