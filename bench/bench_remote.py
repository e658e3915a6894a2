#!/usr/bin/env python3
"""Workers sharing one queue through a git remote (`flow start --all --remote origin`): 1 worker
against W workers, each a process in a clone of its own, over a real `git daemon` on loopback; how
long each worker takes from its start to its first agent session; and what a claim, a renewal and
an integration cost against the daemon.

A bare repository with T independent tasks, each changing its own file. The agent CLI is a POSIX
sh script that takes DELAY seconds a session (coder and reviewer alike), as an agent whose time
dominates would, and appends the time it started (`date +%s.%N`) to a file of its worker's outside
the repository. Each round runs the two cases back to back on fresh copies (1 worker, then W
workers all started at once, every round; the order alternates), each with a daemon of its own.
Reported: the median of the per-round ratios W workers / 1 worker with their spread, to the queue
drained (its last task integrated, as the workers print it) and to every worker exited (a worker
waiting on another's claim sees it end at its next poll, `[remote] poll_s` = 0.5 s here) (target <=
0.28x with W = 4; the agent alone sets 1/W), and from each worker's start (just before its process
is spawned) to its first agent session: median and worst over workers and rounds (target 0.5 s),
beside the start-up of a bare `specflux --version` measured in the same rounds. Then, untimed, one
round of W workers with `GIT_TRACE`: the git processes each worker ran before its first agent and
in all, by command. And claim (a push creating the claim ref), renew (a compare-and-swap push on
it) and integrate (fetch, merge, one atomic push) in-process (target < 0.5 s each).

~4 minutes with the defaults (T=16, DELAY=1.5 s, W=4, 3 rounds); --quick: T=8, DELAY=1 s, 2 rounds
(~1.5 min).

`--against CHECKOUT`: instead, W workers of this specflux against W of another checkout (a
`git worktree add` of an older commit), rounds interleaved, the per-round ratios of both figures.

`--jitter J`: sessions of DELAY x (1 + J x u), u in [-1, 1] fixed by task and role, so that both
cases run the same sessions; with every session exactly DELAY (the default), workers that finish
together meet again at their next integration and claim, which real agents' varying times avoid.

Usage: python bench/bench_remote.py [--quick] [--tasks T] [--delay S] [--workers W] [--rounds K] [--jitter J] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (bench_env, compare, fmt_ms, header, load, md, md_table, ratio_cell, round_ratios,  # noqa: E402
                     specflux_argv)

# The agent's environment is an allowlist (agent/environment.py): the bench's settings travel as
# SPECFLUX_* variables, which it passes.
AGENT = r"""#!/bin/sh
# The bench's agent CLI: notes when it started, takes DELAY seconds a session, then the least a session needs.
date +%s.%N >> "$SPECFLUX_BENCH_STAMPS"
# the CPU its worker (the `flow start` process above it) has used so far, its own and its
# finished children's (git), in clock ticks
p=$PPID
while [ "$p" -gt 1 ] && ! tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q ' flow start '; do p=$(awk '{ print $4 }' "/proc/$p/stat"); done
awk '{ print $14 + $15 + $16 + $17 }' "/proc/$p/stat" >> "$SPECFLUX_BENCH_STAMPS.cpu" 2>/dev/null
cat > /dev/null
# DELAY a session; with --jitter J, DELAY x (1 + J x u), u in [-1, 1] fixed by the task and role
# (cksum): every case runs the same sessions, as long as they were, in whatever order its workers take them
sleep "$(printf '%s' "$SPECFLUX_TASK_ID.$SPECFLUX_ROLE" | cksum | awk -v d="$SPECFLUX_BENCH_DELAY" \
  -v j="${SPECFLUX_BENCH_JITTER:-0}" '{ printf "%.3f", d * (1 + j * (($1 % 2001) / 1000 - 1)) }')"
if [ "$SPECFLUX_ROLE" = reviewer ]; then
  printf '%s\n' '{"approved": true, "issues": [], "criteria_results": [{"criterion": "1", "met": true}]}' | @SPECFLUX@ submit-review --json - > /dev/null
else
  echo "task $SPECFLUX_TASK_ID" > "out-$SPECFLUX_TASK_ID.txt"
  awk '$0 == "(To be completed)" { print "### Summary\nDone by the bench agent.\n\n### For Downstream Tasks\nNothing to add."; next } { print }' \
    "$SPECFLUX_TASK_FILE" > "$SPECFLUX_TASK_FILE.tmp" && mv "$SPECFLUX_TASK_FILE.tmp" "$SPECFLUX_TASK_FILE"
fi
"""


def agent_script() -> str:
    """The agent, its reviewer handing in its verdict as a reviewer must (sealed by `specflux submit-review`)."""
    return AGENT.replace("@SPECFLUX@", " ".join(shlex.quote(part) for part in specflux_argv()))


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
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)  # `git daemon` runs git-daemon as its child: killed as a group
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
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def clone(url: str, dest: Path) -> Path:
    git(dest.parent, "clone", "-q", url, str(dest))
    for key, value in IDENTITY:
        git(dest, "config", key, value)
    return dest


class Queue:
    """A fresh queue of `tasks` tasks on its own daemon, with `workers` clones ready (made untimed);
    `go()` starts one worker process in each clone at once and waits for all of them."""

    def __init__(self, parent: Path, tasks: int, workers: int, agent: Path, delay: float, trace: bool = False,
                 argv: list[str] | None = None, env: dict[str, str] | None = None, jitter: float = 0.0):
        self.folder = Path(tempfile.mkdtemp(prefix=f"queue-{workers}-", dir=parent))
        self.tasks, self.agent, self.delay, self.trace, self.jitter = tasks, agent, delay, trace, jitter
        self.argv = argv or specflux_argv()  # the specflux under test (another checkout's, to compare two)
        self.env = env or {}  # over this process's environment (PYTHONPATH: the other checkout)
        self.bare = make_origin(self.folder, tasks)
        self.daemon = Daemon(self.folder)
        self.clones = [clone(self.daemon.url("origin.git"), self.folder / f"w{i}") for i in range(workers)]
        self.starts: list[float] = []  # wall clock (the agent's `date` is too), just before each worker is spawned
        self.integrated: list[float] = []  # wall clock of each "integrated into" line the workers printed

    def stamps(self, i: int) -> Path:
        return self.folder / f"stamps-w{i}"

    def go(self) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        procs = []
        for i, c in enumerate(self.clones):
            env = {**os.environ, **self.env, "SPECFLUX_BENCH_DELAY": str(self.delay), "SPECFLUX_BENCH_JITTER": str(self.jitter),
                   "SPECFLUX_BENCH_STAMPS": str(self.stamps(i))}
            if self.trace:
                env["GIT_TRACE"] = str(self.folder / f"trace-w{i}")
            env = bench_env(env)
            argv = [*self.argv, "--root", str(c), "flow", "start", "--all", "--remote", "origin",
                    "--worker", f"w{i}", "--agent", "command", "--cmd", f"sh {self.agent}"]
            self.starts.append(time.time())
            procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        errors: list[list[str]] = [[] for _ in procs]

        def read(i: int) -> None:  # each line as it comes, to note when each task was integrated
            for line in procs[i].stderr:
                errors[i].append(line)
                if ", integrated into " in line:
                    self.integrated.append(time.time())

        readers = [threading.Thread(target=read, args=(i,)) for i in range(len(procs))]
        for t in readers:
            t.start()
        for p, t in zip(procs, readers):
            p.wait()
            t.join()
        if any(p.returncode for p in procs):
            raise SystemExit("a worker failed:\n" + "\n".join("".join(e)[-1500:] for e in errors))
        self.daemon.stop()  # reaped: its children's CPU (upload-pack, receive-pack) now counts in ours
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)

    def drained(self) -> float:
        """Seconds from the first worker's start to the last task integrated (the workers then see
        nothing left and stop: their exit is at most a poll interval later)."""
        return max(self.integrated) - self.starts[0]

    def check(self) -> None:
        done = git(self.bare, "ls-tree", "--name-only", "main").split()
        if sum(1 for name in done if name.startswith("out-")) != self.tasks:
            raise SystemExit(f"expected {self.tasks} out-*.txt files on the remote, found: {done}")
        sessions = sum(len(self.stamps(i).read_text().split()) for i in range(len(self.clones)) if self.stamps(i).exists())
        if sessions < 2 * self.tasks:
            raise SystemExit(f"expected {2 * self.tasks} agent sessions, the agent noted {sessions}")

    def first_agent(self) -> list[float]:
        """Seconds from each worker's start to its first agent session (a worker that ran none: left out)."""
        out = []
        for i, began in enumerate(self.starts):
            stamps = self.stamps(i).read_text().split() if self.stamps(i).exists() else []
            if stamps:
                out.append(min(map(float, stamps)) - began)
        return out

    def first_cpu(self) -> list[float]:
        """CPU seconds each worker had used (its own and its finished git processes') when its first
        agent session started, as that agent read it from /proc (10 ms ticks)."""
        out = []
        for i in range(len(self.starts)):
            noted = Path(f"{self.stamps(i)}.cpu")
            ticks = noted.read_text().split() if noted.exists() else []
            if ticks:
                out.append(int(ticks[0]) / os.sysconf("SC_CLK_TCK"))
        return out

    def close(self) -> None:
        if self.daemon.process.poll() is None:
            self.daemon.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


_BUILTIN = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) .*trace: (?:built-in|exec): git (\S+)")


def traced(q: Queue) -> list[tuple[Counter, Counter]]:
    """For each worker of a traced run: (git processes before its first agent session, all), by command."""
    out = []
    for i, began in enumerate(q.starts):
        stamps = q.stamps(i).read_text().split() if q.stamps(i).exists() else []
        first = min(map(float, stamps)) if stamps else float("inf")
        day = time.mktime(time.localtime(began)[:3] + (0, 0, 0, 0, 0, -1))
        before, every = Counter(), Counter()
        path = q.folder / f"trace-w{i}"
        for line in (path.read_text(errors="replace").splitlines() if path.exists() else []):
            m = _BUILTIN.match(line)
            if not m:
                continue
            at = day + int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3])
            every[m[4]] += 1
            if at < first:
                before[m[4]] += 1
        out.append((before, every))
    return out


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
        remote = Remote(root, "origin", "main")
        ensure_driver(remote)
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


def against(other: Path, tasks: int, delay: float, w: int, rounds: int, quick: bool) -> None:
    """W workers of this checkout against W of `other`, on fresh queues, the order alternating
    round by round: per-round ratios (this / other) of the queue drained and of the median first
    agent, so that a change is measured against what it changed, in the same minutes."""
    header(f"Workers sharing a git remote: this checkout against {other}, {w} workers each", quick)
    if not (other / "specflux" / "cli" / "__main__.py").exists():
        raise SystemExit(f"{other} holds no specflux checkout")
    folder = Path(tempfile.mkdtemp(prefix="specflux-bench-remote-ab-"))
    try:
        agent = folder / "agent.sh"
        agent.write_text(agent_script(), encoding="utf-8")
        # both started the same way (`python -m`, the checkout first on the path), so that the
        # comparison is of the code, not of the console script against `-m`
        here = Path(__file__).resolve().parents[1]
        sides = {"this": {"PYTHONPATH": str(here)}, "other": {"PYTHONPATH": str(other)}}
        argv = {n: [sys.executable, "-m", "specflux.cli"] for n in sides}
        drained: dict[str, list[float]] = {n: [] for n in sides}
        first: dict[str, list[float]] = {n: [] for n in sides}
        cpu: dict[str, list[float]] = {n: [] for n in sides}  # CPU seconds a task, every process of the side
        before: dict[str, list[float]] = {n: [] for n in sides}  # a worker's CPU before its first agent (median)
        for n in sides:  # untimed: compiles what each side's worker imports
            warm = Queue(folder, 1, 1, agent, 0, argv=argv[n], env=sides[n])
            try:
                warm.go()
            finally:
                warm.close()
        for r in range(rounds):
            for n in (["this", "other"] if r % 2 == 0 else ["other", "this"]):
                q = Queue(folder, tasks, w, agent, delay, argv=argv[n], env=sides[n])
                try:
                    q.go()
                    q.check()
                    drained[n].append(q.drained())
                    first[n].append(md(q.first_agent()))
                    cpu[n].append(q.cpu / tasks)
                    before[n].append(md(q.first_cpu()))
                finally:
                    q.close()
        print(f"{tasks} independent tasks, {delay:g} s a session; {rounds} rounds, the sides interleaved; "
              f"{load()} at the end\n")
        print(md_table(["side", "queue drained, s (min-max)", "first agent, median of the workers, ms (min-max)",
                        "its CPU before it, ms", "CPU s a task (min-max)"], [
            [n, f"{md(drained[n]):.1f} ({min(drained[n]):.1f}-{max(drained[n]):.1f})",
             f"{md(first[n]) * 1000:.0f} ({min(first[n]) * 1000:.0f}-{max(first[n]) * 1000:.0f})",
             f"{md(before[n]) * 1000:.0f} ({min(before[n]) * 1000:.0f}-{max(before[n]) * 1000:.0f})",
             f"{md(cpu[n]):.3f} ({min(cpu[n]):.3f}-{max(cpu[n]):.3f})"] for n in sides]))
        print(f"\nthis / other, per round: drained **{ratio_cell(round_ratios(drained, 'this', 'other'))}**; "
              f"first agent **{ratio_cell(round_ratios(first, 'this', 'other'))}**; "
              f"CPU before it **{ratio_cell(round_ratios(before, 'this', 'other'))}**; "
              f"CPU a task **{ratio_cell(round_ratios(cpu, 'this', 'other'))}**")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--tasks", type=int)
    p.add_argument("--delay", type=float)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--rounds", type=int)
    p.add_argument("--jitter", type=float, default=0.0, help="sessions of DELAY x (1 +- up to J), fixed per task and "
                   "role (default 0: every session exactly DELAY, which keeps workers in step)")
    p.add_argument("--no-costs", action="store_true", help="leave out claim/renew/integrate in-process")
    p.add_argument("--against", metavar="CHECKOUT", help="instead: W workers of this specflux against W of another "
                   "checkout's (e.g. `git worktree add /tmp/old <commit>`), rounds interleaved")
    a = p.parse_args()
    tasks = a.tasks or (8 if a.quick else 16)
    delay = a.delay or (1.0 if a.quick else 1.5)
    rounds = a.rounds or (2 if a.quick else 3)
    w = a.workers
    if a.against:
        return against(Path(a.against).resolve(), tasks, delay, a.workers, rounds, a.quick)
    header("Workers sharing a git remote: W workers vs 1, start to first agent; claim, renew, integrate", a.quick)
    folder = Path(tempfile.mkdtemp(prefix="specflux-bench-remote-"))
    try:
        agent = folder / "agent.sh"
        agent.write_text(agent_script(), encoding="utf-8")
        one, many = "1 worker", f"{w} workers"
        queues: dict[str, Queue] = {}
        firsts: dict[str, list[float]] = {one: [], many: []}
        befores: dict[str, list[float]] = {one: [], many: []}  # each worker's CPU before its first agent
        cpu: dict[str, list[float]] = {one: [], many: []}  # CPU seconds a task: workers, git, the daemon, the agent
        drained: dict[str, list[float]] = {one: [], many: []}

        def setup(name: str) -> None:
            if name in queues:
                queues.pop(name).close()
            queues[name] = Queue(folder, tasks, 1 if name == one else w, agent, delay, jitter=a.jitter)

        def case(name: str):
            def go() -> None:
                queues[name].go()
            return go

        def version() -> None:
            subprocess.run([*specflux_argv(), "--version"], env=bench_env(), stdout=subprocess.DEVNULL, check=True)

        warm = Queue(folder, 1, 1, agent, 0)  # untimed: compiles what a worker imports (the first run would pay it)
        try:
            warm.go()
        finally:
            warm.close()
        samples: dict[str, list[float]] = {one: [], many: [], "start-up": []}
        for r in range(rounds):  # the order alternates round by round: neither side always goes first
            names = [one, many] if r % 2 == 0 else [many, one]
            got = compare({n: case(n) for n in names} | {"start-up": version}, runs=1, warmup=0,
                          setup=lambda n: setup(n) if n != "start-up" else None)
            for n, values in got.items():
                samples[n] += values
            for n in (one, many):
                queues[n].check()
                firsts[n] += queues[n].first_agent()
                befores[n] += queues[n].first_cpu()
                drained[n].append(queues[n].drained() * 1000)
                cpu[n].append(queues[n].cpu / tasks)
        for q in queues.values():
            q.close()
        floor_one = tasks * 2 * delay

        def secs(values: list[float]) -> str:
            return f"{md(values) / 1000:.1f} ({min(values) / 1000:.1f}-{max(values) / 1000:.1f})"

        spread = f" (+-{a.jitter:.0%}, fixed per task and role)" if a.jitter else ""
        print(f"{tasks} independent tasks, {delay:g} s{spread} a session (coder and reviewer); {rounds} rounds, the cases "
              f"interleaved; {load()} at the end\n")
        print(md_table(["case", "queue drained: last task integrated, s (min-max)", "every worker exited, s",
                        "agent floor s", "CPU s a task (min-max)"], [
            [n, secs(drained[n]), secs(samples[n]), f"{floor_one / (1 if n == one else w):.0f}",
             f"{md(cpu[n]):.2f} ({min(cpu[n]):.2f}-{max(cpu[n]):.2f})"] for n in (one, many)
        ]))
        print("\n(CPU: user + system time of every process of the case, workers, git, the daemon's children and the "
              "agent's, over the tasks: what a busy machine cannot hide)")
        print(f"\n{many} / {one}, per round: drained **{ratio_cell(round_ratios(drained, many, one))}**; every worker "
              f"exited {ratio_cell(round_ratios(samples, many, one))} (target <= 0.28x with 4 workers; the agent "
              f"alone: {1 / w:.2f}x)\n")
        cpu_ms = lambda n: fmt_ms(md(befores[n]) * 1000) if befores[n] else "-"  # noqa: E731
        print(md_table(["from a worker's start to its first agent session", "median ms", "max ms", "n",
                        "its CPU till then, median ms", "target"], [
            [f"{one}", fmt_ms(md(firsts[one]) * 1000), fmt_ms(max(firsts[one]) * 1000), len(firsts[one]), cpu_ms(one),
             "< 500 ms"],
            [f"{many}, started at once", fmt_ms(md(firsts[many]) * 1000), fmt_ms(max(firsts[many]) * 1000),
             len(firsts[many]), cpu_ms(many), "< 500 ms"],
            ["(floor) `specflux --version`, whole process", fmt_ms(md(samples["start-up"])),
             fmt_ms(max(samples["start-up"])), len(samples["start-up"]), "", ""],
        ]))
        print("\n(its CPU: the worker's own and its finished git processes', read by its first agent from /proc)")
        q = Queue(folder, tasks, w, agent, delay, trace=True)
        try:
            q.go()
            q.check()
            counted = traced(q)
        finally:
            q.close()
        before = sum((b for b, _ in counted), Counter())
        every = sum((e for _, e in counted), Counter())
        print(f"\ngit processes (`GIT_TRACE`, one untimed round of {many}; children git spawns included), per "
              f"worker before its first agent session, and per task in all:\n")
        print(md_table(["git command", "per worker before its first agent", "per task"], [
            [cmd, f"{before[cmd] / w:.1f}", f"{every[cmd] / tasks:.1f}"] for cmd, _ in every.most_common()
        ] + [["all", f"{sum(before.values()) / w:.1f}", f"{sum(every.values()) / tasks:.1f}"]]))
        if not a.no_costs:
            each = costs(folder, 5 if a.quick else 15)
            print()
            print(md_table(["operation (loopback git daemon)", "median ms", "max ms", "target"],
                           [[name, fmt_ms(statistics.median(v) * 1000), fmt_ms(max(v) * 1000), "< 500 ms"]
                            for name, v in each.items()]))
        print(f"\n{load()} at the end")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
