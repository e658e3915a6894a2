#!/usr/bin/env python3
"""Which modules each everyday command imports, and what the imports cost.

Every command runs in a fresh `python -X importtime` process that calls `specflux.cli.main.main(argv)`
(as the console script does) and then reports `sys.modules`. `list` and the one-task commands
(`show`, `check`, `uncheck`, `session --no-commit`, `context`) must not import what they do not
use: pydantic, the agent stack (anthropic, httpx2, httpx), git (GitPython), mistune or jsonata (the
workflow engine's). typer, rich, yaml, frontmatter, tomllib and a few more are reported for information.

Exit status 1 when a forbidden module is imported (assert-ish), so CI can run it.
(tests/package/test_imports.py checks the same without the timings.)

Usage: python bench/bench_imports.py [--quick] [--top 12]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, bench_env, compare, fmt_ms, header, make_workspace, md, md_table, run, specflux_argv  # noqa: E402

FORBIDDEN = ("pydantic", "pydantic_core", "anthropic", "httpx2", "httpx", "git", "mistune", "jsonata")
WATCH = ("typer", "rich", "yaml", "frontmatter", "filelock", "tomllib", "tempfile", "argparse", "dataclasses")
STRICT = ("list", "list --json", "show", "show --json", "check", "uncheck", "session --no-commit",
          "context", "context --json")  # must be clean

PROBE = r"""
import sys, json
from specflux.cli.main import main
argv = json.loads(sys.argv[1])
real = sys.stdout
sys.stdout = open("/dev/null", "w")
rc = main(argv)
sys.stdout = real
sys.stderr.write("\n@@MODULES " + json.dumps({"rc": rc, "modules": sorted(sys.modules)}) + "\n")
"""

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def probe(argv: list[str]) -> dict:
    done = subprocess.run([PYTHON, "-X", "importtime", "-c", PROBE, json.dumps(argv)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=bench_env())
    marker = [ln for ln in done.stderr.splitlines() if ln.startswith("@@MODULES ")]
    if not marker:
        raise RuntimeError(f"probe failed for {argv}: {done.stderr[-2000:]}")
    info = json.loads(marker[-1][len("@@MODULES "):])
    imports = []  # (self_us, cumulative_us, depth, name)
    for ln in done.stderr.splitlines():
        m = _LINE.match(ln)
        if m:
            imports.append((int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    info["imports"] = imports
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer wall-clock runs")
    ap.add_argument("--top", type=int, default=12, help="how many of `list`'s costliest imports to show")
    a = ap.parse_args()

    header("bench_imports: what each command imports", a.quick)
    root = make_workspace(100)
    try:
        base = ["--root", str(root)]
        commands = {
            "list": [*base, "list"],
            "list --json": [*base, "list", "--json"],
            "show": [*base, "show", "7"],
            "show --json": [*base, "show", "7", "--json"],
            "check": [*base, "check", "7", "1"],
            "uncheck": [*base, "uncheck", "7", "1"],
            "session --no-commit": [*base, "session", "7", "--did", "x", "--no-commit"],
            "context": [*base, "context", "7"],
            "context --json": [*base, "context", "7", "--json"],
            "lint": [*base, "lint"],
            "ready": [*base, "ready"],
            "--version": ["--version"],
        }
        rows, bad = [], []
        results = {}
        probes = 1 if a.quick else 3
        for name, argv in commands.items():
            # import times are noisy: keep the probe with the smallest total of several
            info = min((probe(argv) for _ in range(probes)), key=lambda i: sum(s for s, _, _, _ in i["imports"]))
            results[name] = info
            top = {m.split(".")[0] for m in info["modules"]}
            forbidden = sorted(t for t in FORBIDDEN if t in top)
            watched = sorted(t for t in WATCH if t in top)
            total_ms = sum(s for s, _, _, _ in info["imports"]) / 1000
            sf_ms = sum(s for s, _, _, n in info["imports"] if n.startswith("specflux")) / 1000
            strict = name in STRICT
            if forbidden and strict:
                bad.append((name, forbidden))
            flag = ("**FAIL** " if strict else "(info) ") + ", ".join(forbidden) if forbidden else "none"
            rows.append([f"`{name}`", len(info["modules"]), f"{total_ms:.1f}", f"{sf_ms:.1f}", flag, ", ".join(watched) or "-"])
        print(md_table(["command", "modules loaded", "import time ms (sum of self)", "of which specflux.*",
                        "forbidden imported", "also loaded"], rows))
        print(f"\nimport times from `python -X importtime` (best of {probes} run(s) each; includes site/startup imports)\n")

        imports = results["list"]["imports"]
        firsts = sorted(imports, key=lambda r: -r[1])
        # the costliest imports `list` triggers, by cumulative time, at most two levels deep
        shown = [r for r in firsts if r[2] <= 1][: a.top]
        print("`list`'s costliest imports (cumulative, depth <= 1):\n")
        print(md_table(["module", "cumulative ms", "self ms", "depth"], [[n, f"{c / 1000:.1f}", f"{s / 1000:.1f}", d] for s, c, d, n in shown]))
        self_top = sorted(imports, key=lambda r: -r[0])[: a.top]
        print("\n`list`'s costliest imports (self time):\n")
        print(md_table(["module", "self ms", "cumulative ms"], [[n, f"{s / 1000:.1f}", f"{c / 1000:.1f}"] for s, c, d, n in self_top]))

        runs = 5 if a.quick else 15
        sf = specflux_argv()
        cases = {
            "python -c pass": lambda: run([PYTHON, "-c", "pass"]),
            "python -S -c pass": lambda: run([PYTHON, "-S", "-c", "pass"]),
            "python -c 'import specflux.cli.main'": lambda: run([PYTHON, "-c", "import specflux.cli.main"]),
            "specflux --version": lambda: run([*sf, "--version"]),
            "specflux list (100 tasks)": lambda: run([*sf, *base, "list"]),
            "specflux show 7 (100 tasks)": lambda: run([*sf, *base, "show", "7"]),
            "specflux context 7 (100 tasks)": lambda: run([*sf, *base, "context", "7"]),
        }
        samples = compare(cases, runs=runs, warmup=1)
        floor = md(samples["python -c pass"])
        print(f"\nStart-up, whole process (medians of {runs}, interleaved):\n")
        print(md_table(["command", "median ms", "over `python -c pass`"],
                       [[f"`{k}`", fmt_ms(md(v)), f"{md(v) - floor:+.1f} ms"] for k, v in samples.items()]))
        print()
        if bad:
            for name, mods in bad:
                print(f"FAIL: `specflux {name}` imports {', '.join(mods)}")
            return 1
        print("OK: " + "/".join(STRICT) + " import none of " + ", ".join(FORBIDDEN))
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
