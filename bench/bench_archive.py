#!/usr/bin/env python3
"""Archiving, chain wiring and session commits, each against a floor measured in the same run.

1. Archive a 100-session task file, in-process: `archive_task` with a TaskStateManager(git=False)
   and `archive_kb` set low enough to trigger. Floors: read + plain write of the file; read + two
   durable writes (temp file, fsync, os.replace, fsync of the folder: what any safe tool pays to
   write the state and the archive file). Also checks that every session is in exactly one file.
2. Wiring across a 1,000-task graph: whole-process `specflux complete ID --no-commit` of a task
   with ~5 dependents, versus `specflux list` of the same workspace. Verifies (sizes, mtimes and
   hashes of every file under .specflux/) that only the task and its dependents changed.
3. Session commits in a real temporary git repo (1,000 task files, identity set locally):
   in-process `Git.commit([file], ...)` from specflux.vcs vs `git commit -m msg -- file` run as a
   subprocess (target: within 1.5x); and whole-process `specflux session ID --did x` (append +
   commit) vs `git commit -m msg -- file` and vs a Python process that appends and runs that git
   commit.

Usage: python bench/bench_archive.py [--quick] [--runs K]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PYTHON, compare, fmt_ms, header, make_workspace, md, md_table, ratio, run, specflux_argv, verdict  # noqa: E402
import gen_tasks  # noqa: E402

COMMIT_TARGET = 1.5


def durable_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# ------------------------------------------------------------------------------------ 1. archive


def bench_archive(runs: int) -> list[str]:
    from specflux.store.archive import archive_task
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    out = []
    root = Path(tempfile.mkdtemp(prefix="specflux-bench-archive-"))
    try:
        gen_tasks.generate(1, root, sessions=100)
        (root / ".specflux" / "config.toml").write_text("[archive]\narchive_kb = 16\nwarn_kb = 12\n", encoding="utf-8")
        state = root / ".specflux" / "task-states" / "task-1-state.md"
        archive = root / ".specflux" / "archives" / "task-1-archive.md"
        original = state.read_bytes()
        half = len(original) // 2

        def archive_once():
            ws = Workspace(root)
            outcome = archive_task(TaskStateManager(ws, git=False), "1")
            assert outcome.archived, "nothing was archived"

        def floor_plain():
            data = state.read_bytes()
            state.write_bytes(data)

        def floor_durable():
            data = state.read_bytes()
            durable_write(state, data[half:])
            durable_write(archive, data[:half])

        def setup(name):
            state.write_bytes(original)
            archive.unlink(missing_ok=True)

        setup("")
        archive_once()
        moved_state, moved_archive = state.read_text(encoding="utf-8"), archive.read_text(encoding="utf-8")
        heads = moved_state.count("\n### Session ") + moved_archive.count("\n### Session ")
        summary = [ln for ln in moved_state.splitlines() if ln.startswith("### Archived Summary")]

        samples = compare({"archive_task (specflux)": archive_once, "floor: read + plain write": floor_plain,
                           "floor: read + 2 durable writes": floor_durable}, runs=runs, warmup=2, setup=setup)
        m = {k: md(v) for k, v in samples.items()}
        out.append(f"### 1. Archive a 100-session file ({len(original) / 1024:.1f} KiB, archive_kb = 16), in-process\n")
        out.append(md_table(["case", "median ms", "vs plain floor", "vs durable floor"],
                            [[k, fmt_ms(v), ratio(v, m["floor: read + plain write"]), ratio(v, m["floor: read + 2 durable writes"])] for k, v in m.items()]))
        out.append(f"\nmedians of {runs} runs, interleaved. After archiving: state {len(moved_state) / 1024:.1f} KiB, "
                   f"archive {len(moved_archive) / 1024:.1f} KiB, `{summary[0] if summary else 'no summary!'}`; "
                   f"session headings across both files: {heads} (expected 100: {'ok' if heads == 100 else 'WRONG'})\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------------- 2. wiring


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    out = {}
    for folder in ("task-states", "archives"):
        for p in sorted((root / ".specflux" / folder).iterdir()):
            st = p.stat()
            out[f"{folder}/{p.name}"] = (st.st_size, st.st_mtime_ns, hashlib.sha1(p.read_bytes()).hexdigest())
    return out


def bench_wiring(n: int, runs: int) -> list[str]:
    sf = specflux_argv()
    root = make_workspace(n)
    out = []
    try:
        states = root / ".specflux" / "task-states"
        heads = {i: gen_tasks.task_head(i) for i in range(1, n + 1)}
        dependents: dict[int, list[int]] = {i: [] for i in heads}
        for i in heads:
            for d in gen_tasks.dependencies(i):
                dependents[d].append(i)
        candidates = [i for i in heads if heads[i].status != "complete"]
        task = min(candidates, key=lambda i: (abs(len(dependents[i]) - 5), i))
        deps = dependents[task]
        touched = [task, *deps]
        originals = {i: (states / f"task-{i}-state.md").read_bytes() for i in touched}

        def restore(name=""):
            for i, data in originals.items():
                p = states / f"task-{i}-state.md"
                if p.read_bytes() != data:
                    p.write_bytes(data)

        complete = [*sf, "--root", str(root), "complete", str(task), "--summary", "Built the thing; see the API below.",
                    "--downstream", "Call `thing.get(id)`; it raises NotFound.", "--no-commit"]
        before = snapshot(root)
        done = run(complete, capture=True)
        after = snapshot(root)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        expected = sorted(f"task-states/task-{i}-state.md" for i in touched)
        extra, missing = sorted(set(changed) - set(expected)), sorted(set(expected) - set(changed))
        wired_lines = [ln for ln in done.stdout.splitlines() if ln.startswith("wired")]
        restore()
        assert snapshot(root).keys() == before.keys()

        samples = compare({"complete": lambda: run(complete), "list": lambda: run([*sf, "--root", str(root), "list"])},
                          runs=runs, warmup=1, setup=lambda name: restore())
        m = {k: md(v) for k, v in samples.items()}
        out.append(f"### 2. Wiring across a {n:,}-task graph: complete task {task} ({len(deps)} dependents: {', '.join(map(str, deps))})\n")
        out.append(md_table(["command (whole process)", "median ms", "vs list"],
                            [[f"`specflux complete {task} --summary ... --no-commit`", fmt_ms(m["complete"]), ratio(m["complete"], m["list"])],
                             ["`specflux list` (same workspace)", fmt_ms(m["list"]), "1.00x"]]))
        verdict_files = "ok: only the task and its dependents" if not extra and not missing else "WRONG"
        out.append(f"\nmedians of {runs} runs, interleaved. Files changed by one `complete` (size/mtime/sha1 of every file "
                   f"under task-states/ and archives/): {len(changed)} of {len(before)}; expected {len(expected)} -> {verdict_files}"
                   + (f"; extra: {extra}" if extra else "") + (f"; missing: {missing}" if missing else "")
                   + f"; `wired` lines printed: {len(wired_lines)}\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------------ 3. commits


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def bench_commit(n: int, runs: int) -> list[str]:
    from specflux.vcs.git import Git

    sf = specflux_argv()
    root = make_workspace(n, name="git")
    out = []
    try:
        git(root, "init", "-q")
        for key, value in (("user.name", "Bench"), ("user.email", "bench@example.com"), ("commit.gpgsign", "false")):
            git(root, "config", key, value)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "tasks")
        # files written in the same second as the index are "racily clean" and git re-reads them on
        # every commit until the index is rewritten later: let the clock move on, then refresh it
        time.sleep(1.1)
        git(root, "update-index", "--refresh")
        git(root, "status", "--porcelain")
        task = "7"
        rel = f".specflux/task-states/task-{task}-state.md"
        path = root / rel
        repo = Git(root)
        counter = [0]

        def touch(name=""):
            counter[0] += 1
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"\n<!-- edit {counter[0]} -->\n")

        def specflux_commit():
            sha = repo.commit([rel], f"task {task}: session {counter[0]} — bench", {"Specflux-Task": task, "Specflux-Session": str(counter[0])})
            assert sha

        def git_commit():
            subprocess.run(["git", "commit", "-q", "-m", f"bench {counter[0]}", "--", rel], cwd=root, check=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        samples = compare({"Git.commit (specflux.vcs)": specflux_commit, "git commit -m msg -- file": git_commit},
                          runs=runs * 2, warmup=2, setup=touch)
        m = {k: md(v) for k, v in samples.items()}
        r_commit = m["Git.commit (specflux.vcs)"] / m["git commit -m msg -- file"]
        out.append(f"### 3. Session commits in a git repo of {n:,} task files\n")
        out.append("In-process, the commit step alone (the file is modified before each run, untimed):\n")
        out.append(md_table(["case", "median ms", "vs git commit"],
                            [[k, fmt_ms(v), ratio(v, m["git commit -m msg -- file"])] for k, v in m.items()]))
        out.append(f"\nmedians of {runs * 2} runs, interleaved. Target: Git.commit within {COMMIT_TARGET:g}x of "
                   f"`git commit -- file`: {r_commit:.2f}x -> {verdict(r_commit, COMMIT_TARGET)}\n")

        floor = (
            "import subprocess, sys\n"
            "p = sys.argv[1]\n"
            "open(p, 'a', encoding='utf-8').write('\\n- x\\n')\n"
            "subprocess.run(['git', 'commit', '-q', '-m', 'msg', '--', p], check=True)\n"
        )
        cases = {
            "session": lambda: run([*sf, "--root", str(root), "session", task, "--did", "x"], cwd=root),
            "git": git_commit,
            "python+git": lambda: run([PYTHON, "-c", floor, rel], cwd=root),
        }

        def setup(name):
            if name == "git":
                touch()

        before = int(git(root, "rev-list", "--count", "HEAD").strip())
        samples = compare(cases, runs=runs, warmup=1, setup=setup)
        made = int(git(root, "rev-list", "--count", "HEAD").strip()) - before
        assert made == 3 * (runs + 1), f"expected {3 * (runs + 1)} commits, got {made}"
        last = git(root, "log", "-1", "--format=%B", "--grep=Specflux-Task")
        assert "Specflux-Session" in last
        clean = git(root, "status", "--porcelain", "--untracked-files=no").strip()
        m = {k: md(v) for k, v in samples.items()}
        rows = [
            [f"`specflux session {task} --did x` (append + commit)", fmt_ms(m["session"]), ratio(m["session"], m["git"]), ratio(m["session"], m["python+git"])],
            ["`git commit -m msg -- file` (file modified beforehand)", fmt_ms(m["git"]), "1.00x", ratio(m["git"], m["python+git"])],
            ["floor: python process appending + `git commit -- file`", fmt_ms(m["python+git"]), ratio(m["python+git"], m["git"]), "1.00x"],
        ]
        out.append("Whole process:\n")
        out.append(md_table(["command", "median ms", "vs git commit", "vs python+git floor"], rows))
        out.append(f"\nmedians of {runs} runs, interleaved; every run made its commit ({made} commits); "
                   f"work tree {'clean' if not clean else 'DIRTY: ' + clean[:200]} afterwards\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--tasks", type=int, default=1000, help="tasks in the wiring and git workspaces")
    a = ap.parse_args()
    runs = a.runs or (5 if a.quick else 10)

    header("bench_archive: archiving, wiring and session commits", a.quick)
    for part in (bench_archive(runs * 3), bench_wiring(a.tasks, runs), bench_commit(a.tasks, runs)):
        print("\n".join(part))
    return 0


if __name__ == "__main__":
    sys.exit(main())
