#!/usr/bin/env python3
"""What a preset costs a session: `specflux run ID --agent claude` against the same agent CLI run
by hand, and against `--agent command` running it unconfined.

The "CLI" is a stand-in named `claude` on PATH (POSIX sh): it reads its prompt from stdin and
prints a Claude Code `--output-format json` result with usage, then exits, so that its own run
costs next to nothing and everything else timed is specflux's. A temporary git repository holds
one task; every session is committed, as a real one is (the commit is put back between runs with
`git reset --hard` of the first commit, outside the timing). Cases, interleaved, whole process:

  the CLI alone           `sh claude < prompt` (the floor: what the agent's own run costs)
  --agent command         `specflux run 1 --agent command --cmd claude --no-sandbox`: the session
                          (context, progress entry, usage, the commit) without a preset
  --agent claude          `specflux run 1 --agent claude`: the same through the preset: its command
                          line, the prompt file, the private HOME, the sandbox (bubblewrap or
                          Landlock, whichever is here)

Reported: the preset's overhead, (claude - command), and specflux's whole cost over the CLI's own
run, (claude - CLI alone). Target (issue 18): a preset's overhead within 50 ms per session.

Usage: python bench/bench_preset.py [--quick] [--runs K]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import compare, fmt_ms, header, md, md_table, specflux_argv, warm_bytecode  # noqa: E402

TARGET_MS = 50.0

FAKE_CLAUDE = r"""#!/bin/sh
# A stand-in for Claude Code's headless run: read the prompt, print a json result, exit.
cat > /dev/null
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done","total_cost_usd":0.0123,"usage":{"input_tokens":1200,"output_tokens":300,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"modelUsage":{"claude-sonnet-4-5":{}}}'
"""


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def setup(folder: Path) -> tuple[Path, dict[str, str]]:
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(FAKE_CLAUDE)
    fake.chmod(0o755)
    repo = folder / "repo"
    repo.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "HOME": str(folder / "home"), "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    (folder / "home").mkdir()
    git(repo, "init", "-q", "-b", "main")
    sf = specflux_argv()
    subprocess.run([*sf, "init", str(repo)], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([*sf, "--root", str(repo), "new", "Add the greeting", "--ac", "it greets"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project")
    return repo, env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer runs")
    ap.add_argument("--runs", type=int, default=None)
    opts = ap.parse_args()
    runs = opts.runs or (5 if opts.quick else 15)
    warm_bytecode()
    folder = Path(tempfile.mkdtemp(prefix="specflux-bench-preset-"))
    try:
        repo, env = setup(folder)
        sf = [*specflux_argv(), "--root", str(repo)]
        prompt = subprocess.run([*sf, "context", "1"], env=env, capture_output=True, text=True, check=True).stdout
        fake = str(folder / "bin" / "claude")
        base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                              check=True).stdout.strip()

        def session(*agent: str):
            done = subprocess.run([*sf, "run", "1", *agent], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise SystemExit(f"specflux run {' '.join(agent)} failed: {done.stderr}")

        cases = {
            "the CLI alone": lambda: subprocess.run(["sh", fake], input=prompt, text=True, stdout=subprocess.DEVNULL,
                                                    check=True),
            "--agent command (no preset, unconfined)": lambda: session("--agent", "command", "--cmd", "claude",
                                                                       "--no-sandbox"),
            "--agent claude (the preset, sandboxed)": lambda: session("--agent", "claude"),
        }
        samples = compare(cases, runs=runs, warmup=1, setup=lambda name: git(repo, "reset", "-q", "--hard", base))
        cli, command, preset = (md(samples[name]) for name in cases)
        header("A preset's cost per session (specflux run, whole process)", opts.quick)
        print(md_table(["case", "median ms", "runs"], [[name, fmt_ms(md(s)), len(s)] for name, s in samples.items()]))
        overhead = preset - command
        print(f"\nthe preset's overhead (claude - command): {fmt_ms(overhead)} ms "
              f"({'met' if overhead <= TARGET_MS else 'MISSED'}: target {TARGET_MS:g} ms)")
        print(f"specflux's whole cost over the CLI's own run (claude - CLI alone): {fmt_ms(preset - cli)} ms "
              "(interpreter start-up, context, progress entry, usage, the session's commit)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
