#!/usr/bin/env python3
"""The control room at size: `specflux board --serve` over 1,000 tasks (gen_tasks.py, with git
history) and a finished run of 10,000 events, in headless Chromium (playwright and a `chromium`
binary needed).

Measured, whole process, each repeated (`--rounds`), reported as the median with its spread and the
machine's load:
- first paint: `page.goto(url)` until every card and the graph are drawn (targets: under 1 s);
- an event on screen: a task's title changed by `specflux set` until the card shows it, timed from
  the moment the command returned (under 1 s);
- an edit written: the page's tick (`POST /api/action`) until its answer, the file written (under 0.5 s).

Usage: python bench/bench_room.py [--tasks 1000] [--events 10000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import specflux_argv  # noqa: E402
from bench_board import make_repo  # noqa: E402
from bench_flow import long_run_events  # noqa: E402


def add_long_run(root: Path, target: int) -> int:
    from specflux.flow.record.events import EventLog

    run_dir = root / ".specflux" / "runs" / "run-bench-long"
    run_dir.mkdir(parents=True)
    log = EventLog(run_dir / "events.jsonl")
    real_fsync = os.fsync
    os.fsync = lambda fd: None  # the fixture's durability does not matter
    try:
        events = long_run_events(target)
        for event in events:
            log.append(event)
    finally:
        os.fsync = real_fsync
    return len(events)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms (min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f}, n={len(values)})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--events", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    from playwright.sync_api import expect, sync_playwright

    root = make_repo(args.tasks)
    events = add_long_run(root, args.events)
    started = time.perf_counter()
    proc = subprocess.Popen([*specflux_argv(), "--root", str(root), "board", "--serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    ready = time.perf_counter() - started
    url, base, token = (lambda m: (m.group(0), m.group(1), m.group(2)))(
        re.search(r"(http://127\.0\.0\.1:\d+/)\?token=(\S+)", line))
    paints, shown, edits = [], [], []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
            for _ in range(args.rounds):
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                t0 = time.perf_counter()
                page.goto(url)
                page.locator(".card").nth(args.tasks - 1).wait_for(state="attached", timeout=60000)
                page.locator("svg.graph").wait_for(state="attached", timeout=60000)
                paints.append(time.perf_counter() - t0)
                page.wait_for_selector(".live:not(.off)")
                page.close()
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            page.wait_for_selector(".live:not(.off)")
            for n in range(args.rounds):
                title = f"Renamed {n}"
                subprocess.run([*specflux_argv(), "--root", str(root), "set", "7", "--title", title], check=True,
                               capture_output=True)
                t0 = time.perf_counter()
                expect(page.locator('.card[data-id="7"] .title')).to_have_text(title, timeout=30000)
                shown.append(time.perf_counter() - t0)
            data = json.loads(urllib.request.urlopen(urllib.request.Request(
                base + "api/data", headers={"X-Specflux-Token": token})).read())
            task = next(t for t in data["tasks"] if t["id"] == "9")
            for n in range(args.rounds):
                page.keyboard.press("Escape")
                page.locator('.card[data-id="9"]').click()
                page.wait_for_selector("#detail button.tick")
                before = (root / ".specflux" / "task-states" / "task-9-state.md").read_bytes()
                was = page.locator("#detail button.tick").first.inner_text()
                t0 = time.perf_counter()
                with page.expect_response(lambda r: r.url.endswith("/api/action")) as answer:
                    page.locator("#detail button.tick").first.click()
                assert answer.value.ok, answer.value.text()
                edits.append(time.perf_counter() - t0)
                assert (root / ".specflux" / "task-states" / "task-9-state.md").read_bytes() != before
                expect(page.locator("#detail button.tick").first).not_to_have_text(was, timeout=30000)  # pushed back
            browser.close()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    print(f"control room, {args.tasks} tasks, a run of {events} events; load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  server ready (process start to URL): {ready * 1000:.0f} ms")
    print(f"  first paint: {spread(paints)}   target < 1000 ms")
    print(f"  an event on screen: {spread(shown)}   target < 1000 ms")
    print(f"  an edit written (click to answer): {spread(edits)}   target < 500 ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
