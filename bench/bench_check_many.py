"""`specflux check` of thousands of criteria at once is linear.

Times `check ID <2,000 indices>` in a task with 10,000 criteria (whole process) against two
floors measured in the same run: Python reading that file and flipping the 2,000 boxes with one
pass of `str` slicing plus a durable write, and `check ID 1` on the same file (one box). Also
times the in-process `TaskDocument.check_many` for 500, 1,000, 2,000 and 4,000 indices: twice the
indices should cost about twice the time (linear), not four times.

    python bench/bench_check_many.py [--quick]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specflux.format.document import TaskDocument  # noqa: E402

N_CRITERIA = 10_000


def task_text(n: int) -> str:
    items = "\n".join(f"- [ ] criterion number {i} holds" for i in range(1, n + 1))
    return ("# Task #1: many criteria\n\n## 0. Metadata\n```json\n{\n  \"task_id\": 1,\n  \"status\": \"pending\",\n"
            "  \"total_sessions\": 0\n}\n```\n\n## 1. Context\n\n### Acceptance Criteria\n" + items +
            "\n\n## 3. Progress Log\n\n(No sessions yet)\n")


FLOOR = r"""
import json, os, sys, tempfile
path = sys.argv[1]
text = open(path, encoding="utf-8").read()
wanted = set(range(1, 4001, 2))
out, i, pos = [], 0, 0
while True:
    at = text.find("- [ ]", pos)
    if at < 0:
        break
    i += 1
    if i in wanted:
        out.append(text[pos:at] + "- [x]")
        pos = at + 5
    else:
        out.append(text[pos:at + 5])
        pos = at + 5
out.append(text[pos:])
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
with os.fdopen(fd, "w", encoding="utf-8") as f:
    f.write("".join(out)); f.flush(); os.fsync(f.fileno())
os.replace(tmp, path)
"""


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> int:
    quick = "--quick" in sys.argv
    runs = 3 if quick else 7
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run([sys.executable, "-m", "specflux.cli", "init", str(root)], check=True, capture_output=True)
        path = root / ".specflux" / "task-states" / "task-1-state.md"
        text = task_text(N_CRITERIA)
        indices = [str(i) for i in range(1, 4001, 2)]  # 2,000 of them

        def reset() -> None:
            path.write_text(text)

        def check_many() -> None:
            reset()
            subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(root), "check", "1", *indices],
                           check=True, capture_output=True)

        def check_one() -> None:
            reset()
            subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(root), "check", "1", "1"],
                           check=True, capture_output=True)

        def floor() -> None:
            reset()
            subprocess.run([sys.executable, "-c", FLOOR, str(path)], check=True)

        for fn in (check_many, check_one, floor):  # warm-up
            fn()
        many = median_ms(check_many, runs)
        one = median_ms(check_one, runs)
        base = median_ms(floor, runs)

    doc = TaskDocument(text)
    scaling = {k: median_ms(lambda k=k: doc.check_many(range(1, 2 * k, 2), True), runs) for k in (500, 1000, 2000, 4000)}

    print(f"| what ({N_CRITERIA:,} criteria) | median | ratio |")
    print("| --- | --- | --- |")
    print(f"| `check 1` + 2,000 indices (whole process) | {many:.0f} ms | {many / base:.2f}x floor |")
    print(f"| `check 1 1` (one box) | {one:.0f} ms | {many / one:.2f}x of it |")
    print(f"| floor: Python flips the same 2,000 boxes and writes durably | {base:.0f} ms | |")
    for k, ms in scaling.items():
        print(f"| in-process `check_many`, {k:,} indices | {ms:.1f} ms | {ms / scaling[500]:.2f}x the 500 case |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
