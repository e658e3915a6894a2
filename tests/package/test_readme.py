"""The README is a promise: every shell example in README.md and docs/ runs, as written, in a fresh
folder, through the installed `specflux` command, and prints what the page says it prints.

A document's examples run in order in one shell, the way a reader types them (a `cd` in one block
holds for the next). Two kinds of block:

- ```` ```sh ````: lines to run; the block must succeed (each command, `set -e`).
- ```` ```console ````: `$ COMMAND` lines, each followed by the lines it promises. A promised line
  matches an output line with runs of spaces made one and `...` standing for any text; the
  promised lines must appear in that order (other lines may come between). `[exit N]` says the
  command exits N (otherwise it must exit 0).

A block that cannot run here says why on the line before it: `<!-- not run: REASON -->`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_KINDS = ("sh", "bash", "shell", "console")
FENCE = re.compile(r"^\s*(`{3,})(\w*)\s*$")
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->")
EXIT = re.compile(r"^\[exit (\d+)\]$")


@dataclass
class Command:
    line: int  # 1-based, in the document
    text: str
    promised: list[str] = field(default_factory=list)
    exit: int = 0


@dataclass
class Block:
    doc: Path
    line: int
    kind: str
    body: str
    not_run: str | None  # the reason, when it does not run

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[Command]:
        """A console block's commands, each with what it promises."""
        out: list[Command] = []
        for n, line in enumerate(self.body.splitlines(), start=self.line + 1):
            if line.startswith("$ "):
                out.append(Command(n, line[2:]))
            elif out and (match := EXIT.match(line.strip())):
                out[-1].exit = int(match.group(1))
            elif out and line.strip():
                out[-1].promised.append(line.strip())
        return out


def blocks(doc: Path) -> list[Block]:
    """The shell blocks of `doc` (top-level and indented in lists), with their not-run reasons."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent = len(lines[i]) - len(lines[i].lstrip())
        fence, kind = match.group(1), match.group(2)
        start, body = i, []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence) and not lines[i].strip()[len(fence):]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i].lstrip())
            i += 1
        i += 1
        if kind in SHELL_KINDS:
            before = next((line for line in reversed(lines[:start]) if line.strip()), "")
            reason = NOT_RUN.search(before)
            found.append(Block(doc, start + 1, kind, "\n".join(body) + "\n", reason.group(1) if reason else None))
    return found


def promise(expected: str) -> re.Pattern:
    parts = [re.escape(part) for part in re.sub(r"\s+", " ", expected).split("...")]
    return re.compile(".*".join(parts))


def kept(expected: list[str], output: list[str]) -> str | None:
    """None when every promised line is in `output`, in order; else the first one missing."""
    lines = iter(re.sub(r"\s+", " ", line.strip()) for line in output)
    for want in expected:
        pattern = promise(want)
        if not any(pattern.fullmatch(line) for line in lines):
            return want
    return None


def runnable(doc: Path) -> list[Block]:
    return [block for block in blocks(doc) if block.not_run is None]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_shell_example_runs_or_says_why(doc):
    silent = [block.where for block in blocks(doc) if block.not_run == ""]
    assert not silent, f"blocks marked not run without a reason: {silent}"


def test_the_readme_runs_its_first_hour():
    assert len(runnable(ROOT / "README.md")) >= 5, "the README's examples are not being run"


@pytest.mark.parametrize("doc", [d for d in DOCS if runnable(d)], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_examples_run_as_written(doc, tmp_path):
    bin_dir = Path(sys.executable).parent
    assert shutil.which("specflux", path=str(bin_dir)), f"no specflux beside {sys.executable}: install the package"
    scripts = tmp_path / "examples"
    scripts.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    steps: list[tuple[str, Block, Command | None]] = []
    script = ["exec 2>&1 </dev/null"]
    for b, block in enumerate(runnable(doc)):
        if block.kind == "console":
            for c, command in enumerate(block.commands()):
                key = f"{b}.{c}"
                (scripts / f"{key}.sh").write_text(command.text + "\n")
                script.append(f'echo "@@start {key}"; . "{scripts}/{key}.sh"; echo "@@end {key} $?"')
                steps.append((key, block, command))
        else:
            key = f"{b}"
            (scripts / f"{key}.sh").write_text(block.body)
            script.append(f'echo "@@start {key}"; set -e; . "{scripts}/{key}.sh"; set +e; echo "@@end {key} 0"')
            steps.append((key, block, None))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANTHROPIC_", "SPECFLUX_", "GIT_")) and key not in ("VIRTUAL_ENV",)}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), GIT_CONFIG_NOSYSTEM="1",
               NO_COLOR="1", LC_ALL="C.UTF-8")
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)
    outputs: dict[str, list[str]] = {}
    ends: dict[str, int] = {}
    current = None
    for line in done.stdout.splitlines():
        if match := re.fullmatch(r"@@start (\S+)", line):
            current = match.group(1)
            outputs[current] = []
        elif match := re.fullmatch(r"@@end (\S+) (\d+)", line):
            ends[match.group(1)] = int(match.group(2))
            current = None
        elif current is not None:
            outputs[current].append(line)
    for key, block, command in steps:
        shown = "\n".join(outputs.get(key, ["(never started: an earlier block stopped the shell)"]))
        if command is None:
            assert ends.get(key) == 0, f"{block.where}: the block failed:\n{block.body}\n--- output:\n{shown}"
            continue
        where = f"{doc.relative_to(ROOT)}:{command.line}: $ {command.text}"
        assert ends.get(key) == command.exit, f"{where}\nexited {ends.get(key)}, the page says {command.exit}:\n{shown}"
        missing = kept(command.promised, outputs[key])
        assert missing is None, f"{where}\ndid not print {missing!r}; it printed:\n{shown}"


def test_the_checker_reads_promises_and_catches_a_broken_one(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("<!-- not run: needs a key -->\n```sh\nrun\n```\n\n```console\n$ echo a   b\na b\n$ false\n"
                   "[exit 1]\n```\n  ```sh\n  true\n  ```\n")
    found = blocks(doc)
    assert [(b.kind, b.not_run) for b in found] == [("sh", "needs a key"), ("console", None), ("sh", None)]
    commands = found[1].commands()
    assert [(c.text, c.promised, c.exit) for c in commands] == [("echo a   b", ["a b"], 0), ("false", [], 1)]
    assert kept(["task 1: ...", "run ...: completed"], ["x", "task 1: checked", "y", "run r-1: completed"]) is None
    assert kept(["run ...: completed"], ["run r-1: failed (max_iterations)"]) == "run ...: completed"
    assert kept(["b", "a"], ["a", "b"]) == "a"  # order matters
