#!/usr/bin/env python3
"""In-process parse, serialize and edit of one big (~75 KB, many sessions) task file.

Cases, each timed on the same file in the same run (medians, interleaved):
  floor                 read the file + text.split("\\n")
  TaskDocument()        read + TaskDocument(text): the outline scan
  + list fields         what `list` asks of it: title, status, dependencies, criteria, session count
  + to_state()          the full model, dataclasses (`show`)
  + str()               ... and back to text (must be the same bytes)
  check(1)              TaskDocument(text).check(1, True)
  append session        the edits `session` makes: append a session block + metadata edits
  mistune (tokens)      mistune 3 full parse to AST tokens, for comparison
  mistune (block only)  mistune's block-level pass alone

Usage: python bench/bench_parse.py [--quick] [--kb 75] [--runs K]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import compare, fmt_ms, header, md, md_table, ratio  # noqa: E402
import gen_tasks  # noqa: E402


def big_task(kb: float) -> str:
    """Task 7 (complete, with a chain output) with as many sessions as fit under `kb` KiB."""
    limit = int(kb * 1024)
    lo, hi = 1, 400
    while lo < hi:  # largest session count whose text fits
        mid = (lo + hi + 1) // 2
        if len(gen_tasks.task_text(7, sessions=mid).encode("utf-8")) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return gen_tasks.task_text(7, sessions=lo)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 runs instead of 100")
    ap.add_argument("--kb", type=float, default=75.0)
    ap.add_argument("--runs", type=int)
    a = ap.parse_args()
    runs = a.runs or (20 if a.quick else 100)

    from specflux.format.document import TaskDocument
    from specflux.format.edits import apply_edits
    from specflux.base.files import read_text
    from specflux.format.render import render_session

    header("bench_parse: in-process parse / serialize / edit of one big task file", a.quick)
    folder = Path(tempfile.mkdtemp(prefix="specflux-bench-parse-"))
    try:
        text = big_task(a.kb)
        path = folder / "task-7-state.md"
        path.write_bytes(text.encode("utf-8"))
        doc0 = TaskDocument(text)
        sessions = doc0.session_count
        print(f"file: {len(text.encode('utf-8')) / 1024:.1f} KiB, {text.count(chr(10)):,} lines, {sessions} sessions, "
              f"{len(doc0.outline.headings)} headings, {len(doc0.criteria_lines)} criteria\n")
        assert str(TaskDocument(read_text(path))) == text

        def list_fields(doc):
            return doc.title, doc.status, doc.dependencies, doc.criteria_lines, doc.session_count

        def full():
            doc = TaskDocument(read_text(path))
            doc.to_state("7")
            out = str(doc)
            assert out is doc.text
            return out

        block = render_session(sessions + 1, "2024-12-01 10:00", ["Did a thing", "Did another"], "None", "Next step")

        def append():
            doc = TaskDocument(read_text(path))
            edits = [doc.append_to_section("progress", block)]
            edits += doc.metadata_edits({"status": "in_progress", "total_sessions": doc.session_count + 1})
            return apply_edits(doc.text, edits)

        cases = {
            "floor": lambda: read_text(path).split("\n"),
            "floor (open().read())": lambda: open(path, encoding="utf-8").read().split("\n"),
            "read + TaskDocument(text)": lambda: TaskDocument(read_text(path)),
            "... + list fields": lambda: list_fields(TaskDocument(read_text(path))),
            "... + to_state() + str()": full,
            "read + check(1)": lambda: TaskDocument(read_text(path)).check(1, False),
            "read + append session edits": append,
        }
        try:
            import mistune

            tokens = mistune.create_markdown(renderer=None)
            tokens_tl = mistune.create_markdown(renderer=None, plugins=["task_lists"])

            def block_only():
                state = tokens.block.state_cls()
                state.process(read_text(path))
                tokens.block.parse(state)
                return state

            cases["mistune: read + parse to tokens"] = lambda: tokens(read_text(path))
            cases["mistune: ... with task_lists plugin"] = lambda: tokens_tl(read_text(path))
            cases["mistune: read + block-level only"] = block_only
            version = mistune.__version__
        except ImportError:
            version = None

        samples = compare(cases, runs=runs, warmup=3)
        floor = md(samples["floor"])
        rows = [[name, fmt_ms(md(v)) if md(v) >= 1 else f"{md(v):.3f}", ratio(md(v), floor)] for name, v in samples.items()]
        print(md_table(["case (in-process)", "median ms", "vs floor"], rows))
        print(f"\nmedians of {runs} runs after 3 warm-ups, interleaved"
              + (f"; mistune {version}" if version else "; mistune not installed"))
        check_ms, append_ms, doc_ms = md(samples["read + check(1)"]), md(samples["read + append session edits"]), md(samples["read + TaskDocument(text)"])
        print(f"\n- check/append cost over the parse: {check_ms - doc_ms:+.3f} / {append_ms - doc_ms:+.3f} ms")
        if version:
            mt = md(samples["mistune: read + parse to tokens"])
            print(f"- mistune full parse is {mt / doc_ms:.1f}x the TaskDocument outline scan on this file")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
