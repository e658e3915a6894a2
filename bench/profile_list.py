#!/usr/bin/env python3
"""Where `specflux list` spends its time: cProfile of `main(["list"])` over N generated tasks.

Prints the top functions by own time and by cumulative time, and the time per task of the main
steps. Run it when bench_list.py misses its target. The list cache is off (SPECFLUX_CACHE=0: every
file is parsed) unless --cache is given.

Usage: python bench/profile_list.py [N=5000] [--json] [--cache] [--top 25]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import make_workspace  # noqa: E402


def step_breakdown(manager, rows) -> list[tuple[str, float]]:
    """Replay what `summary()` does, one step at a time over every task, and time each step."""
    import json

    from specflux.format.document import TaskDocument
    from specflux.base.files import decode
    from specflux.surface.views import list_table

    out = []

    def step(name, fn):
        t = time.perf_counter()
        result = fn()
        out.append((name, (time.perf_counter() - t) * 1000))
        return result

    ws = manager.ws
    ids = step("ws.task_ids() (listdir + regex + natural sort)", ws.task_ids)
    paths = step("ws.task_rel(id) + os.path.join", lambda: [(os.path.join(ws.root, ws.task_rel(t)), ws.task_rel(t)) for t in ids])

    from specflux.base import files

    def read(p):
        with open(p, "rb") as f:
            return f.read()

    if hasattr(files, "read_bytes"):  # what summary() reads with, where the store has it
        read, how = files.read_bytes, "files.read_bytes"
    else:
        how = "open + read"
    texts = step(f"{how} + decode", lambda: [decode(read(p), r) for p, r in paths])
    step("  (floor: find ```json fence + json.loads)", lambda: [json.loads(t[t.index("\n", t.find("```json")) + 1 : t.index("\n```", t.find("```json"))]) for t in texts])
    step("len(text.encode()) / isascii", lambda: [len(t.encode("utf-8")) if not t.isascii() else len(t) for t in texts])
    docs = step("TaskDocument(text) (outline.scan + sections)", lambda: [TaskDocument(t, r) for t, (_, r) in zip(texts, paths)])
    step("  of which outline.scan(text)", lambda: [__import__("specflux.format.outline", fromlist=["scan"]).scan(t) for t in texts])
    step("doc.title", lambda: [d.title for d in docs])
    if hasattr(TaskDocument, "list_fields"):  # the one pass summary() makes
        step("doc.list_fields() (metadata, criteria and sessions in one pass)", lambda: [d.list_fields() for d in docs])
        docs = [TaskDocument(t, r) for t, (_, r) in zip(texts, paths)]  # fresh: the properties below read anew
        label = "  (the same from the properties `show` reads: "
        step(label + "status)", lambda: [d.status for d in docs])
        step(label + "criteria_lines)", lambda: [d.criteria_lines for d in docs])
        step(label + "session_count)", lambda: [d.session_count for d in docs])
    else:
        step("doc.status (metadata: fence, json.loads, checks)", lambda: [d.status for d in docs])
        step("doc.dependencies", lambda: [d.dependencies for d in docs])
        step("doc.criteria_lines (+ criteria_region)", lambda: [d.criteria_lines for d in docs])
        step("doc.session_count (session_regions + archived_region)", lambda: [d.session_count for d in docs])
    cfg = ws.config.archive
    step("config.archive.warnings", lambda: [cfg.warnings(r.size, r.sessions) for r in rows])
    table = step("views.list_table(rows)", lambda: list_table(rows))
    sink = io.StringIO()
    step("print(table)", lambda: print(table, file=sink))
    out.append(("**total of the steps above (without the floor rows)**", sum(ms for name, ms in out if not name.startswith("  "))))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="?", default=5000)
    ap.add_argument("--json", action="store_true", help="profile `list --json`")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--cache", action="store_true", help="profile with the list cache on (warm)")
    a = ap.parse_args()
    os.environ["SPECFLUX_CACHE"] = "1" if a.cache else "0"

    root = make_workspace(a.n)
    try:
        t0 = time.perf_counter()
        from specflux.cli.main import main as cli_main

        import_ms = (time.perf_counter() - t0) * 1000
        argv = ["--root", str(root), "list", *(["--json"] if a.json else [])]
        sink = io.StringIO()

        def once():
            sink.seek(0)
            sink.truncate()
            with contextlib.redirect_stdout(sink):
                assert cli_main(argv) == 0

        once()  # warm: imports the lazily imported modules, fills the OS cache
        plain = []
        for _ in range(5):
            t = time.perf_counter()
            once()
            plain.append((time.perf_counter() - t) * 1000)

        from specflux.store.manager import TaskStateManager
        from specflux.store.workspace import Workspace

        manager = TaskStateManager(Workspace(root), git=False)
        t = time.perf_counter()
        rows = manager.summaries()
        summaries_ms = (time.perf_counter() - t) * 1000
        from specflux.surface.views import list_table

        t = time.perf_counter()
        list_table(rows)
        table_ms = (time.perf_counter() - t) * 1000

        passes = [step_breakdown(manager, rows) for _ in range(5)]  # fresh documents each pass
        steps = [(name, statistics.median(p[i][1] for p in passes)) for i, (name, _) in enumerate(passes[0])]

        prof = cProfile.Profile()
        prof.enable()
        once()
        prof.disable()

        print(f"## profile_list: `specflux {' '.join(argv[2:])}` over {a.n:,} tasks, in-process, "
              f"cache {'on' if a.cache else 'off'}\n")
        print(f"- `import specflux.cli.main`: {import_ms:.1f} ms (the rest of the imports happen on first use)")
        print(f"- main({argv[2:]}) without profiler: median {statistics.median(plain):.1f} ms of 5 warm runs "
              f"({statistics.median(plain) * 1000 / a.n:.0f} µs per task)")
        print(f"- of which manager.summaries(): {summaries_ms:.1f} ms, views.list_table(): {table_ms:.1f} ms\n")
        print("### the steps of `TaskStateManager.summary`, each timed over all tasks (no profiler; median of 5 passes)\n")
        print("| step | ms for all tasks | µs per task |")
        print("|---|---|---|")
        for name, ms in steps:
            print(f"| {name} | {ms:.1f} | {ms * 1000 / a.n:.1f} |")
        print()
        for order, title in (("tottime", "own time"), ("cumulative", "cumulative time")):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).strip_dirs().sort_stats(order).print_stats(a.top)
            body = s.getvalue()
            print(f"### top {a.top} by {title} (under cProfile, which inflates call-heavy code)\n")
            print("```")
            print(body[body.find("   ncalls"):].rstrip())
            print("```\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
