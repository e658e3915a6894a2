#!/usr/bin/env python3
"""One task's edit must not grow with the number of tasks.

Whole-process `specflux check ID 1`, `specflux uncheck ID 1` and
`specflux session ID --did x --no-commit` on the same task in a workspace of 100 tasks and in
one of 5,000 (1,000 with --quick), interleaved in one run. The session file is restored before
each `session` run, so every run appends to the same text.

A floor is measured too: a Python process that reads the task file, flips the first criterion's
box and writes it back atomically (temp file, fsync, os.replace, fsync of the folder), which is
the least a durable one-line edit costs from a cold interpreter.

Target: check (and uncheck) at the large N within 1.2x of the same command at N = 100.

Usage: python bench/bench_edit.py [--quick] [--runs K]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, compare, fmt_ms, header, make_workspace, md, md_table, ratio, run, specflux_argv, verdict  # noqa: E402

TARGET = 1.2

FLOOR = r"""
import os, sys, tempfile
path = sys.argv[1]
with open(path, "rb") as f:
    data = f.read()
i = data.index(b"- [", data.index(b"### Acceptance Criteria")) + 3
data = data[:i] + (b" " if data[i:i + 1] == b"x" else b"x") + data[i + 1:]
folder = os.path.dirname(path)
fd, tmp = tempfile.mkstemp(dir=folder)
with os.fdopen(fd, "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
os.replace(tmp, path)
dfd = os.open(folder, os.O_RDONLY)
os.fsync(dfd)
os.close(dfd)
"""


def first_unchecked_task(root: Path, limit: int) -> str:
    """A task whose first acceptance criterion is unticked (so `check 1` really writes)."""
    states = root / ".specflux" / "task-states"
    for i in range(limit // 2, 0, -1):
        text = (states / f"task-{i}-state.md").read_text(encoding="utf-8")
        m = re.search(r"### Acceptance Criteria\n- \[(.)\]", text)
        if m and m.group(1) == " ":
            return str(i)
    raise SystemExit("no task with an unticked first criterion")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 vs 1,000 tasks, 5 runs")
    ap.add_argument("--large", type=int, help="the large workspace size (default 5,000)")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    small, large = 100, a.large or (1000 if a.quick else 5000)
    runs = a.runs or (5 if a.quick else 10)

    header(f"bench_edit: one task's edit at N = {small:,} vs N = {large:,}", a.quick)
    sf = specflux_argv()
    roots = {small: make_workspace(small), large: make_workspace(large)}
    try:
        task = first_unchecked_task(roots[small], small)
        paths = {n: r / ".specflux" / "task-states" / f"task-{task}-state.md" for n, r in roots.items()}
        original = {n: p.read_bytes() for n, p in paths.items()}
        assert original[small] == original[large], "generated task differs between sizes"

        cases = {}
        for n, root in roots.items():
            base = [*sf, "--root", str(root)]
            cases[f"check@{n}"] = lambda base=base: run([*base, "check", task, "1"])
            cases[f"uncheck@{n}"] = lambda base=base: run([*base, "uncheck", task, "1"])
            cases[f"session@{n}"] = lambda base=base: run([*base, "session", task, "--did", "x", "--no-commit"])
            cases[f"floor@{n}"] = lambda n=n: run([PYTHON, "-c", FLOOR, str(paths[n])])

        def setup(name: str) -> None:
            n = int(name.split("@")[1])
            if name.startswith(("session", "check")):  # every check/session starts from the original
                paths[n].write_bytes(original[n])

        # sanity: check writes exactly one byte of difference, uncheck restores the file
        run([*sf, "--root", str(roots[small]), "check", task, "1"])
        after = paths[small].read_bytes()
        assert len(after) == len(original[small]) and sum(x != y for x, y in zip(after, original[small])) == 1
        run([*sf, "--root", str(roots[small]), "uncheck", task, "1"])
        assert paths[small].read_bytes() == original[small]

        samples = compare(cases, runs=runs, warmup=1, setup=setup)
        m = {k: md(v) for k, v in samples.items()}
        rows = []
        for cmd in ("check", "uncheck", "session", "floor"):
            label = {"floor": "floor: python read + flip one box + atomic write",
                     "session": f"`specflux session {task} --did x --no-commit`"}.get(cmd, f"`specflux {cmd} {task} 1`")
            rows.append([label, fmt_ms(m[f"{cmd}@{small}"]), fmt_ms(m[f"{cmd}@{large}"]),
                         ratio(m[f"{cmd}@{large}"], m[f"{cmd}@{small}"]),
                         ratio(m[f"{cmd}@{large}"], m[f"floor@{large}"]) if cmd != "floor" else "1.00x"])
        print(md_table(["command", f"N={small:,} ms", f"N={large:,} ms", f"{large:,} / {small:,}", f"vs floor at {large:,}"], rows))
        print(f"\nmedians of {runs} runs after 1 warm-up, all cases interleaved; task {task}\n")
        for cmd in ("check", "uncheck", "session"):
            r = m[f"{cmd}@{large}"] / m[f"{cmd}@{small}"]
            tgt = f"target {TARGET:g}x: {verdict(r, TARGET)}" if cmd != "session" else "(no target set; reported)"
            print(f"- {cmd}: N={large:,} / N={small:,} = {r:.2f}x {tgt}")
    finally:
        for root in roots.values():
            if a.keep:
                print(f"(kept {root})")
            else:
                shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
