#!/usr/bin/env python3
"""Whole-process `specflux --root DIR list` (and `list --json`) versus a Python floor.

The floor is a Python process (same interpreter) that reads every task file, finds its ```json
fence and json.loads the metadata: the least any Python `list` can do. Cases run interleaved,
after a warm-up, at N = 100, 1,000 and 5,000 generated tasks (gen_tasks.py).

Targets at 5,000 tasks: `list` within 2x of the floor; `list` with the cache off
(SPECFLUX_CACHE=0: every file parsed) within 3x. The ratios are medians of per-round ratios
(`_common.round_ratios`): each round runs the floor and every command once, back to back.

Usage: python bench/bench_list.py [--quick] [--sizes 100,1000] [--runs K]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (PEERS, PYTHON, bench_env, compare, fmt_ms, header, load, make_workspace, md, md_table, ratio_cell,  # noqa: E402
                     round_ratios, run, specflux_argv, verdict)

FLOOR = r"""
import json, os, sys
d = os.path.join(sys.argv[1], ".specflux", "task-states")
rows = []
for e in os.scandir(d):
    if not e.name.endswith("-state.md"):
        continue
    with open(e.path, encoding="utf-8") as f:
        t = f.read()
    s = t.find("```json")
    s = t.index("\n", s) + 1
    meta = json.loads(t[s:t.index("\n```", s)])
    rows.append((meta["task_id"], meta["status"]))
print(len(rows))
"""

TARGET = 2.0
TARGET_COLD = 3.0


def peak_rss_mib(argv: list[str]) -> float:
    """Peak resident memory of one run of `argv` (Linux/macOS), in MiB."""
    p = subprocess.Popen(argv, env=bench_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(p.pid, 0)
    p.returncode = 0
    kib = usage.ru_maxrss / (1024 if sys.platform == "darwin" else 1)
    return kib / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 100 and 1,000, 5 runs")
    ap.add_argument("--sizes", help="comma-separated task counts")
    ap.add_argument("--runs", type=int, help="timed runs per case (default 10; 5 at 5,000)")
    ap.add_argument("--keep", action="store_true", help="keep the generated workspaces")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")] if a.sizes else ([100, 1000] if a.quick else [100, 1000, 5000])

    header("bench_list: whole-process `specflux list` vs a Python floor", a.quick)
    sf = specflux_argv()
    rows, memory, results = [], [], {}
    for n in sizes:
        root = make_workspace(n)
        try:
            runs = a.runs or (5 if a.quick or n >= 5000 else 10)
            cold = {**os.environ, "SPECFLUX_CACHE": "0"}
            cases = {
                "floor": lambda: run([PYTHON, "-c", FLOOR, str(root)]),
                "list": lambda: run([*sf, "--root", str(root), "list"]),
                "list --json": lambda: run([*sf, "--root", str(root), "list", "--json"]),
                "list (no cache)": lambda: run([*sf, "--root", str(root), "list"], env=cold),
            }
            check = run([*sf, "--root", str(root), "list"], capture=True)
            assert check.stdout.count("\n") >= n, "list printed fewer rows than tasks"
            samples = compare(cases, runs=runs, warmup=1)
            floor = md(samples["floor"])
            results[n] = {}
            for name in ("list", "list --json", "list (no cache)"):
                m = md(samples[name])
                ratios = round_ratios(samples, name, "floor")
                results[n][name] = md(ratios)
                label = "`specflux list` with SPECFLUX_CACHE=0 (every file parsed)" if name == "list (no cache)" else f"`specflux {name}`"
                rows.append([f"{n:,}", label, fmt_ms(m), fmt_ms(floor), ratio_cell(ratios), load()])
            results[n]["ms"] = md(samples["list"])
            memory.append([f"{n:,}", f"{peak_rss_mib([*sf, '--root', str(root), 'list']):.0f}",
                           f"{peak_rss_mib([PYTHON, '-c', FLOOR, str(root)]):.0f}"])
        finally:
            if a.keep:
                print(f"(kept {root})")
            else:
                shutil.rmtree(root, ignore_errors=True)

    print(md_table(["N", "command", "median ms", "floor ms", "ratio to the floor, per round", "load after"], rows))
    print("\nratio: the median of per-round ratios (each round runs every case once, back to back), with its "
          "quartiles, range and rounds; the medians in ms are for scale only\n")
    print(md_table(["N", "`list` peak RSS MiB", "floor peak RSS MiB"], memory))
    print()
    big = max(results)
    r = results[big]["list"]
    cold = results[big]["list (no cache)"]
    note = "" if big >= 5000 else " (targets are set at 5,000; run without --quick)"
    print(f"Target ({load()} at the end): `list` at {big:,} tasks within {TARGET:g}x of the floor: {r:.2f}x -> {verdict(r, TARGET)}{note}")
    print(f"Target: `list` with the cache off at {big:,} tasks within {TARGET_COLD:g}x of the floor: "
          f"{cold:.2f}x -> {verdict(cold, TARGET_COLD)}{note}")
    print()
    print("For scale, peers measured on the same kind of machine (shared/LIBRARIES.md, another run):\n")
    peer_rows = [[name, *(f"{v[n]:,}" for n in (100, 1000, 5000))] for name, v in PEERS.items()]
    here = ["**specflux list (this run)**", *(fmt_ms(results[n]["ms"]) if n in results else "-" for n in (100, 1000, 5000))]
    print(md_table(["command (median ms)", "100", "1,000", "5,000"], [*peer_rows, here]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
