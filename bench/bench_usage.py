#!/usr/bin/env python3
"""Reading an agent CLI's usage from a 10 MB Claude Code `stream-json` output.

The output is generated: a session of `system`/`init`, then assistant messages (text and tool
calls, each message's usage repeated on every content block, as Claude Code prints them) and
user messages carrying tool results (file contents, 1-6 KB), then the `result`. Cases, interleaved:

  floor: split lines          the text split into lines, nothing parsed
  floor: json.loads per line  every line parsed: what a reader that looks at everything pays
  UsageMeter, line by line    what the command backend does as the agent prints (usage_readers.py)
  read_usage("claude", text)  the same after the fact, on the whole text
  read_usage("auto", text)    every reader tried on every line
  CommandBackend.run          whole: an agent CLI (`cat` of the file) through the backend, its
                              output pumped, kept and read as it streams; against `cat` to /dev/null

Target (issue 18): reading usage from a 10 MB stream-json within 0.5 s.

Usage: python bench/bench_usage.py [--quick] [--mb 10] [--runs K]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import compare, fmt_ms, header, md, md_table, ratio  # noqa: E402

from specflux.agent.backend import SessionRequest  # noqa: E402
from specflux.agent.command_backend import CommandBackend  # noqa: E402
from specflux.agent.tools import Toolbox  # noqa: E402
from specflux.agent.usage_readers import UsageMeter, read_usage  # noqa: E402

MODEL = "claude-sonnet-4-5-20250929"
WORDS = "the task file session criterion agent usage tokens cost model run step branch merge".split()


def stream_json(size: int, seed: int = 42) -> str:
    rnd = random.Random(seed)
    out = [json.dumps({"type": "system", "subtype": "init", "session_id": "9f1c", "model": MODEL, "cwd": "/repo",
                       "tools": ["Read", "Edit", "Bash", "Grep", "Glob"]})]
    total, n = len(out[0]), 0
    while total < size:
        n += 1
        usage = {"input_tokens": rnd.randint(1, 9), "cache_creation_input_tokens": rnd.randint(0, 3000),
                 "cache_read_input_tokens": 10000 + 500 * n, "output_tokens": rnd.randint(20, 600),
                 "service_tier": "standard"}
        text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(5, 60)))
        blocks = [{"type": "text", "text": text},
                  {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"file_path": f"src/m{n}.py"}}]
        for block in blocks:  # one line per content block, the message's usage on each
            line = json.dumps({"type": "assistant", "session_id": "9f1c", "message": {
                "id": f"msg_{n}", "type": "message", "role": "assistant", "model": MODEL, "content": [block],
                "stop_reason": None, "usage": usage}})
            out.append(line)
            total += len(line) + 1
        body = "\n".join(f"    x{i} = {rnd.randint(0, 10**6)}  # {rnd.choice(WORDS)}" for i in range(rnd.randint(30, 180)))
        line = json.dumps({"type": "user", "session_id": "9f1c", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": body}]}})
        out.append(line)
        total += len(line) + 1
    out.append(json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": n,
                           "total_cost_usd": 1.2345, "usage": {"input_tokens": 5 * n, "output_tokens": 300 * n,
                                                               "cache_read_input_tokens": 10**6,
                                                               "cache_creation_input_tokens": 10**5}}))
    return "\n".join(out) + "\n"


class _Hooks:
    def check_criterion(self, index: int) -> str:
        raise AssertionError

    def end_session(self, handoff) -> str:
        raise AssertionError


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mb", type=float, default=10)
    parser.add_argument("--runs", type=int)
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 7)
    header("Usage from a Claude Code stream-json output", args.quick)
    text = stream_json(int(args.mb * 1024 * 1024))
    lines = text.splitlines(keepends=True)
    print(f"{len(text) / 2**20:.1f} MB, {len(lines):,} lines\n")

    def meter() -> object:
        m = UsageMeter("claude")
        for line in lines:
            m.feed(line)
        return m.usage()

    expected = read_usage("claude", text)
    assert meter() == expected and read_usage("auto", text) == expected and expected.cost_usd == 1.2345
    cases = {
        "floor: split lines": lambda: text.splitlines(),
        "floor: json.loads per line": lambda: [json.loads(line) for line in lines],
        "UsageMeter, line by line": meter,
        'read_usage("claude", text)': lambda: read_usage("claude", text),
        'read_usage("auto", text)': lambda: read_usage("auto", text),
    }
    samples = compare(cases, runs)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "stream.jsonl"
        path.write_text(text)
        repo = Path(folder) / "repo"
        repo.mkdir()
        request = SessionRequest(system="S", context="C", model="any", max_turns=1)
        cat = f"cat {shlex.quote(str(path))}"

        def backend() -> object:
            outcome = CommandBackend(cat, timeout_s=60, stream=False).run(request, Toolbox(repo, _Hooks()))
            assert outcome.usage == expected, outcome.usage
            return outcome

        whole = compare({"cat to /dev/null": lambda: subprocess.run(cat, shell=True, stdout=subprocess.DEVNULL),
                         "CommandBackend.run (cat)": backend}, runs)
    samples.update(whole)
    floor = md(samples["floor: split lines"])
    rows = [[name, fmt_ms(md(s)), ratio(md(s), floor)] for name, s in samples.items()]
    print(md_table(["case", "median", "vs split lines"], rows))
    took = md(samples["UsageMeter, line by line"])
    print(f"\nUsageMeter on {len(text) / 2**20:.1f} MB: {fmt_ms(took)} (target 500 ms: "
          f"{'met' if took <= 500 else 'NOT met'})")
    return 0 if took <= 500 else 1


if __name__ == "__main__":
    sys.exit(main())
