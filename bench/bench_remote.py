#!/usr/bin/env python3
"""Workers sharing one queue through a git remote (`flow start --all --remote origin`): 1 worker
against W workers, each a process in a clone of its own, over a real `git daemon` on loopback; and
what a claim, a renewal and an integration cost against it.

A bare repository with T independent tasks, each changing its own file. The agent CLI is a POSIX
sh script that takes DELAY seconds a session (coder and reviewer alike), as an agent whose time
dominates would. Reported: the wall time of 1 worker and of W workers (all started at once), the
ratio (target <= 0.3x with W = 4), and medians of claim (a push creating the claim ref), renew (a
compare-and-swap push on it) and integrate (fetch, merge, one atomic push of the branch and the
claim's deletion) in-process (target < 0.5 s each).

~5 minutes with the defaults (T=40, DELAY=2 s, W=4); --quick: T=8, DELAY=1 s (~40 s).

Usage: python bench/bench_remote.py [--quick] [--tasks T] [--delay S] [--workers W]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import bench_env, fmt_ms, header, md_table, specflux_argv, warm_bytecode  # noqa: E402

AGENT = r"""#!/bin/sh
# The bench's agent CLI: DELAY seconds a session, then the least a session needs.
cat > /dev/null
sleep "$BENCH_DELAY"
if [ "$SPECFLUX_ROLE" = reviewer ]; then
  printf '%s\n' '{"kind": "review", "data": {"approved": true, "issues": [], "criteria_results": [{"criterion": "1", "met": true}]}}' > "$SPECFLUX_HANDIN"
else
  echo "task $SPECFLUX_TASK_ID" > "out-$SPECFLUX_TASK_ID.txt"
  awk '$0 == "(To be completed)" { print "### Summary\nDone by the bench agent.\n\n### For Downstream Tasks\nNothing to add."; next } { print }' \
    "$SPECFLUX_TASK_FILE" > "$SPECFLUX_TASK_FILE.tmp" && mv "$SPECFLUX_TASK_FILE.tmp" "$SPECFLUX_TASK_FILE"
fi
"""
IDENTITY = (("user.name", "Bench"), ("user.email", "bench@example.com"), ("commit.gpgsign", "false"))


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def make_origin(parent: Path, tasks: int) -> Path:
    """`origin.git`: a bare repository holding a specflux project with `tasks` independent tasks."""
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    seed = parent / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    for key, value in IDENTITY:
        git(seed, "config", key, value)
    (seed / "README.md").write_text("# bench project\n", encoding="utf-8")
    ws, _ = Workspace.init(seed)
    manager = TaskStateManager(ws, git=False)
    for i in range(1, tasks + 1):
        manager.create(f"Task {i}: write out-{i}.txt", requirements="Write the file.", criteria=["the file exists"])
    config = ws.dir / "config.toml"
    config.write_text(config.read_text().replace('sandbox = "auto"', 'sandbox = "off"')
                      + "\n[remote]\nlease_s = 30\npoll_s = 0.5\n", encoding="utf-8")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "project and tasks")
    git(parent, "clone", "-q", "--bare", str(seed), "origin.git")
    return parent / "origin.git"


class Daemon:
    def __init__(self, base: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.process = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
                                         f"--base-path={base}", "--listen=127.0.0.1", f"--port={self.port}", str(base)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("git daemon did not start")

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def clone(url: str, dest: Path) -> Path:
    git(dest.parent, "clone", "-q", url, str(dest))
    for key, value in IDENTITY:
        git(dest, "config", key, value)
    return dest


def queue(parent: Path, tasks: int, workers: int, agent: Path, delay: float) -> float:
    """Seconds for `workers` workers (started at once) to finish a fresh queue of `tasks` tasks."""
    folder = parent / f"queue-{workers}"
    folder.mkdir()
    bare = make_origin(folder, tasks)
    daemon = Daemon(folder)
    try:
        clones = [clone(daemon.url("origin.git"), folder / f"w{i}") for i in range(workers)]
        env = bench_env({**os.environ, "BENCH_DELAY": str(delay)})
        began = time.monotonic()
        procs = [subprocess.Popen([*specflux_argv(), "--root", str(c), "flow", "start", "--all", "--remote", "origin",
                                   "--worker", f"w{i}", "--agent", "command", "--cmd", f"sh {agent}"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for i, c in enumerate(clones)]
        errors = [p.communicate()[1] for p in procs]
        took = time.monotonic() - began
        if any(p.returncode for p in procs):
            raise SystemExit("a worker failed:\n" + "\n".join(e[-1500:] for e in errors))
        done = git(bare, "ls-tree", "--name-only", "main").split()
        if sum(1 for name in done if name.startswith("out-")) != tasks:
            raise SystemExit(f"expected {tasks} out-*.txt files on the remote, found: {done}")
        return took
    finally:
        daemon.stop()


def costs(parent: Path, rounds: int) -> dict[str, list[float]]:
    """Claim, renew and integrate in-process against a loopback git daemon, `rounds` times each."""
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.integrate import ensure_driver, integrate
    from specflux.flow.remote.lease import Lease
    from specflux.flow.remote.transport import Remote

    folder = parent / "costs"
    folder.mkdir()
    make_origin(folder, rounds)
    daemon = Daemon(folder)
    out: dict[str, list[float]] = {"claim": [], "renew": [], "integrate": []}
    try:
        root = clone(daemon.url("origin.git"), folder / "w")
        ensure_driver(root)
        remote = Remote(root, "origin", "main")
        claims = Claims(remote, lease_s=30)
        remote.fetch()
        for i in range(1, rounds + 1):
            task = str(i)
            began = time.perf_counter()
            claim = claims.create(task, "bench", f"run-{i}")
            out["claim"].append(time.perf_counter() - began)
            assert claim is not None
            lease = Lease(claims, claim, "bench", f"run-{i}", every_s=3600)
            began = time.perf_counter()
            assert lease.renew()
            out["renew"].append(time.perf_counter() - began)
            (root / f"out-{task}.txt").write_text(f"task {task}\n")
            git(root, "add", f"out-{task}.txt")
            git(root, "commit", "-q", "-m", f"task {task}")
            began = time.perf_counter()
            result = integrate(remote, lease, task)
            out["integrate"].append(time.perf_counter() - began)
            assert result.outcome == "pushed", result
    finally:
        daemon.stop()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tasks", type=int)
    p.add_argument("--delay", type=float)
    p.add_argument("--workers", type=int, default=4)
    a = p.parse_args()
    tasks = a.tasks or (8 if a.quick else 40)
    delay = a.delay or (1.0 if a.quick else 2.0)
    header("Workers sharing a git remote: W workers vs 1; claim, renew, integrate", a.quick)
    warm_bytecode()
    folder = Path(tempfile.mkdtemp(prefix="specflux-bench-remote-"))
    try:
        agent = folder / "agent.sh"
        agent.write_text(AGENT, encoding="utf-8")
        each = costs(folder, 5 if a.quick else 15)
        print(md_table(["operation (loopback git daemon)", "median ms", "max ms", "target"],
                       [[name, fmt_ms(statistics.median(v) * 1000), fmt_ms(max(v) * 1000), "< 500 ms"]
                        for name, v in each.items()]))
        one = queue(folder, tasks, 1, agent, delay)
        many = queue(folder, tasks, a.workers, agent, delay)
        floor_one = tasks * 2 * delay
        print(f"\n{tasks} independent tasks, {delay:g} s a session (coder and reviewer)\n")
        print(md_table(["workers", "wall s", "agent floor s"], [
            ["1", f"{one:.1f}", f"{floor_one:.0f}"],
            [str(a.workers), f"{many:.1f}", f"{floor_one / a.workers:.0f}"],
        ]))
        print(f"\n{a.workers} workers / 1 worker: **{many / one:.2f}x** (target <= 0.3x with 4 workers; "
              f"the agent alone: {1 / a.workers:.2f}x)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
