"""The tools an agent session gets, confined to one repository.

`Toolbox.call` never raises for a problem the model caused (unknown tool, bad input, a path outside
the repo, a missing file, a refused hook call): those come back as `ToolResult(is_error=True)`
for the model to read and correct.

Each role gets its own tools (`Toolbox(role=...)`, `ROLE_SPECS`): the coder those of CONTRACT section 4
up to `end_session`; the reviewer reads, runs commands and hands in `submit_review`; the planner
reads and hands in `submit_tasks`. A session ends at its role's hand-in (`Toolbox.handed_in`).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from specflux.base.errors import SpecfluxError
from specflux.base.records import record

if TYPE_CHECKING:  # the session runner imports the sandbox; Toolbox only calls it
    from specflux.agent.handin import Review, TaskPlan
    from specflux.agent.handoff import Handoff, TaskHooks
    from specflux.agent.sandbox import Sandbox
    from specflux.agent.tool_inputs import EditIn, IndexIn, ListIn, PathIn, RunIn, SearchIn, WriteIn

SKIP_DIRS = frozenset({".git"})
# specflux's own bookkeeping: not the project's files, and different in every checkout (a listing
# that showed them would make recordings unreplayable elsewhere).
HIDDEN = (".specflux/recordings", ".specflux/locks")
MAX_LISTED = 2000
MAX_MATCHES = 200
RAW_INPUT = frozenset({"submit_review", "submit_tasks"})  # checked by the tool itself (handin.py)
SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")  # never handed to commands the agent runs

_STR = {"type": "string"}
_PATH = {"type": "string", "description": "Path relative to the repository root."}


def _spec(name: str, description: str, required: list[str], **properties: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"name": name, "description": description, "input_schema": schema}


TOOL_SPECS: list[dict[str, Any]] = [
    _spec("read_file", "Read a text file of the repository.", ["path"], path=_PATH),
    _spec("list_files", "List the files under a folder of the repository (default: all of it).", [],
          path=_PATH),
    _spec("search", "Search files for a Python regular expression; prints `path:line: text` per match.",
          ["pattern"], pattern=_STR, path=_PATH),
    _spec("write_file", "Create or replace a file with the given content.", ["path", "content"],
          path=_PATH, content=_STR),
    _spec("edit_file", "Replace the one exact occurrence of `old` in a file with `new`.",
          ["path", "old", "new"], path=_PATH, old=_STR, new=_STR),
    _spec("run_command", "Run a shell command in the repository root; returns its exit code, stdout "
          "and stderr (long output is truncated).", ["command"], command=_STR, timeout_s={"type": "number"}),
    _spec("check_criterion", "Tick acceptance criterion `index` (1-based) of your task once it is met "
          "and verified.", ["index"], index={"type": "integer", "minimum": 1}),
    _spec("end_session", "End the session with its progress-log entry. Give `chain_output` only when "
          "the task is complete: what downstream tasks need to know.", ["did", "issues", "next"],
          did={"type": "array", "items": _STR}, issues=_STR, next=_STR,
          chain_output={"type": "object", "properties": {"summary": _STR, "downstream": _STR},
                        "required": ["summary"]}),
]

_TEXT = {"type": "string", "minLength": 1}

REVIEWER_SPECS: list[dict[str, Any]] = [
    *TOOL_SPECS[:3],  # read_file, list_files, search
    _spec("run_command", "Run a shell command in the repository root, to run the tests or inspect the "
          "code; returns its exit code, stdout and stderr (long output is truncated). You are reviewing: "
          "the command must not change any file.", ["command"], command=_STR, timeout_s={"type": "number"}),
    _spec("submit_review", "Hand in your verdict and stop. `approved` only when every acceptance criterion "
          "is met and no blocker issue is listed; give one `criteria_results` entry per criterion.",
          ["approved", "issues", "criteria_results"],
          approved={"type": "boolean"},
          issues={"type": "array", "items": {
              "type": "object", "required": ["severity", "description"],
              "properties": {"severity": {"type": "string", "enum": ["blocker", "major", "minor"]},
                             "description": _TEXT}}},
          criteria_results={"type": "array", "minItems": 1, "items": {
              "type": "object", "required": ["criterion", "met"],
              "properties": {"criterion": _TEXT, "met": {"type": "boolean"}}}}),
]

PLANNER_SPECS: list[dict[str, Any]] = [
    *TOOL_SPECS[:3],  # read_file, list_files, search
    _spec("submit_tasks", "Hand in the task list and stop. Each task has a unique `key`; `dependencies` "
          "name the keys of tasks that must be done first (no cycles); every task needs at least one "
          "checkable acceptance criterion.", ["tasks"],
          tasks={"type": "array", "minItems": 1, "items": {
              "type": "object",
              "required": ["key", "title", "requirements", "acceptance_criteria", "priority", "complexity",
                           "dependencies"],
              "properties": {
                  "key": _TEXT, "title": _TEXT, "requirements": _TEXT,
                  "acceptance_criteria": {"type": "array", "minItems": 1, "items": _TEXT},
                  "priority": {"type": "integer", "minimum": 1, "maximum": 5},
                  "complexity": {"type": "string", "enum": ["simple", "medium", "complex"]},
                  "dependencies": {"type": "array", "items": _STR}}}},
          summary={"type": "object", "required": ["totalTasks", "estimatedComplexity"], "properties": {
              "totalTasks": {"type": "integer", "minimum": 0},
              "byPriority": {"type": "object", "additionalProperties": {"type": "integer"}},
              "estimatedComplexity": {"type": "string", "enum": ["hours", "days", "weeks"]}}}),
]

Role = Literal["coder", "reviewer", "planner"]
ROLE_SPECS: dict[str, list[dict[str, Any]]] = {"coder": TOOL_SPECS, "reviewer": REVIEWER_SPECS,
                                               "planner": PLANNER_SPECS}


@record(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False


class ToolError(Exception):
    """A problem the model caused; becomes an error result, never escapes `Toolbox.call`."""


def truncate(text: str, limit: int) -> str:
    """Keep the head and the tail of `text` within `limit` characters, saying what was cut."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters truncated ...]\n{text[len(text) - tail:]}"


def kill_group(proc: subprocess.Popen) -> None:
    """Kill `proc` and everything it started (it must have been started in its own session)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows has no process groups to signal
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


class Toolbox:
    """The tools of one session, every path confined to `root`."""

    def __init__(self, root: Path, hooks: TaskHooks, command_timeout_s: float = 120,
                 output_limit: int = 20_000, read_only: tuple[str, ...] = (), sandbox: Sandbox | None = None,
                 role: Role = "coder"):
        """`read_only`: repo-relative folders the agent may read but not write (the task files,
        which it changes through check_criterion and end_session). `sandbox`: what confines
        run_command's writes (None: nothing does); a confined command gets a private temp folder,
        kept for the session and removed by `close()`. `role`: whose tools these are (`ROLE_SPECS`);
        a reviewer's hand-in goes to `hooks.submit_review(review)` and `self.review`, a planner's to
        `hooks.submit_tasks(plan)` and `self.tasks` (each hook only where `hooks` has it)."""
        if role not in ROLE_SPECS:
            raise ValueError(f"unknown role {role!r}; the roles are: {', '.join(ROLE_SPECS)}")
        self.role = role
        self.root = Path(os.path.realpath(root))
        self.sandbox = sandbox
        self._tmp: Path | None = None
        self.read_only = tuple(Path(os.path.realpath(self.root / p)) for p in read_only)
        self.hooks = hooks
        self.command_timeout_s = command_timeout_s
        self.output_limit = output_limit
        self.ended: Handoff | None = None
        self.review: Review | None = None
        self.tasks: TaskPlan | None = None
        # what each tool does, given its input as its model reads it (plain_inputs.py, tool_inputs.MODELS)
        every: dict[str, Callable[[Any], str]] = {
            "read_file": self._read_file, "list_files": self._list_files, "search": self._search,
            "write_file": self._write_file, "edit_file": self._edit_file, "run_command": self._run_command,
            "check_criterion": self._check_criterion, "end_session": self._end_session,
            "submit_review": self._submit_review, "submit_tasks": self._submit_tasks,
        }
        self._tools = {spec["name"]: every[spec["name"]] for spec in ROLE_SPECS[role]}

    @property
    def specs(self) -> list[dict[str, Any]]:
        """The tool specs of this role, as the API is sent them (a fresh copy, free to change)."""
        return copy.deepcopy(ROLE_SPECS[self.role])

    @property
    def handed_in(self) -> bool:
        """The agent has ended its session with its role's hand-off: end_session, submit_review or submit_tasks."""
        return self.ended is not None or self.review is not None or self.tasks is not None

    def call(self, name: str, input: dict) -> ToolResult:  # noqa: A002 - the API's word
        """Run tool `name`; every tool-level problem comes back as an error result."""
        if name not in self._tools:
            return ToolResult(f"unknown tool {name!r}; the tools are: {', '.join(self._tools)}", True)
        from specflux.agent.plain_inputs import plain

        run = self._tools[name]
        data = input if isinstance(input, dict) else {}
        try:
            if name in RAW_INPUT:
                return ToolResult(run(data))
            fits = plain(name, data)  # (the usual case: no pydantic)
            if fits is None:
                from specflux.agent.tool_inputs import MODELS, ValidationError

                try:
                    fits = MODELS[name].model_validate(data)
                except ValidationError as e:
                    problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'input'}: {err['msg']}"
                                         for err in e.errors())
                    return ToolResult(f"bad input for {name}: {problems}", True)
            return ToolResult(run(fits))
        except (ToolError, SpecfluxError) as e:
            return ToolResult(str(e), True)
        except (OSError, UnicodeDecodeError) as e:
            return ToolResult(f"{name} failed: {e}", True)

    # -- paths -------------------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """The real path of repo-relative `path`; ToolError if it leaves the repo or is in `.git`."""
        if not path or os.path.isabs(path) or "\0" in path:
            raise ToolError(f"{path!r}: give a path relative to the repository root")
        real = Path(os.path.realpath(self.root / path))
        refusal = self._refusal(real)
        if refusal:
            raise ToolError(f"{path!r} {refusal}")
        return real

    def _refusal(self, real: Path) -> str | None:
        """Why an agent may not touch real path `real`, or None."""
        if not real.is_relative_to(self.root):
            return "is outside the repository"
        parts = real.relative_to(self.root).parts
        if parts and parts[0].lower() in SKIP_DIRS:
            return "is inside .git, which agents may not touch"
        return None

    def _show(self, real: Path) -> str:
        return real.relative_to(self.root).as_posix() or "."

    def _walk(self, top: Path):
        """Files under `top` (or `top` itself), skipping .git, in a stable order."""
        if top.is_file():
            yield top
            return
        if not top.is_dir():
            raise ToolError(f"{self._show(top)}: no such file or folder")
        hidden = {os.path.join(self.root, h) for h in HIDDEN}
        for here, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d.lower() not in SKIP_DIRS and os.path.join(here, d) not in hidden)
            for name in sorted(files):
                yield Path(here, name)

    # -- the tools ---------------------------------------------------------------------------

    def _read_file(self, a: PathIn) -> str:
        real = self.resolve(a.path)
        if not real.is_file():
            raise ToolError(f"{a.path}: no such file")
        data = real.read_bytes()
        if b"\0" in data[:8192]:
            raise ToolError(f"{a.path}: binary file ({len(data)} bytes), not shown")
        text = data.decode("utf-8", errors="replace")
        if len(text) > self.output_limit:
            return (text[: self.output_limit] + f"\n[truncated: showed {self.output_limit} of {len(text)} "
                    "characters; use search or run_command to see the rest]")
        return text

    def _list_files(self, a: ListIn) -> str:
        top = self.resolve(a.path)
        names = []
        for n, p in enumerate(self._walk(top)):
            if n == MAX_LISTED:
                names.append(f"[stopped after {MAX_LISTED} files; list a sub-folder]")
                break
            names.append(self._show(p))
        return truncate("\n".join(names), self.output_limit) if names else "(no files)"

    def _search(self, a: SearchIn) -> str:
        try:
            regex = re.compile(a.pattern)
        except re.error as e:
            raise ToolError(f"bad pattern {a.pattern!r}: {e}") from None
        lines: list[str] = []
        for p in self._walk(self.resolve(a.path)):
            real = Path(os.path.realpath(p))
            if self._refusal(real) or not real.is_file():
                continue  # a symlink out of the repo or into .git
            data = real.read_bytes()
            if b"\0" in data[:8192]:
                continue
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    lines.append(f"{self._show(p)}:{number}: {line[:300]}")
                    if len(lines) == MAX_MATCHES:
                        lines.append(f"[stopped after {MAX_MATCHES} matches; narrow the pattern or path]")
                        return truncate("\n".join(lines), self.output_limit)
        return truncate("\n".join(lines), self.output_limit) if lines else "(no matches)"

    def writable(self, path: str) -> Path:
        real = self.resolve(path)
        if any(real.is_relative_to(folder) for folder in self.read_only):
            raise ToolError(f"{path!r} is read-only in this session: change the task state with check_criterion "
                            "and end_session")
        return real

    def _write_file(self, a: WriteIn) -> str:
        real = self.writable(a.path)
        existed = real.exists()
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_text(a.content, encoding="utf-8", newline="")
        return f"{'replaced' if existed else 'created'} {a.path} ({len(a.content)} characters)"

    def _edit_file(self, a: EditIn) -> str:
        real = self.writable(a.path)
        if not real.is_file():
            raise ToolError(f"{a.path}: no such file")
        text = real.read_bytes().decode("utf-8")
        old, new = a.old, a.new
        if text.count(old) == 0 and "\r\n" in text and "\r\n" not in old:  # a CRLF file, LF edit
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"{a.path}: `old` occurs 0 times; read the file and copy the text exactly")
        if count > 1:
            raise ToolError(f"{a.path}: `old` occurs {count} times; it must occur exactly once "
                            "(include more of the surrounding text)")
        real.write_bytes(text.replace(old, new, 1).encode("utf-8"))
        return f"edited {a.path}"

    def _run_command(self, a: RunIn) -> str:
        timeout = min(a.timeout_s or self.command_timeout_s, self.command_timeout_s)
        from specflux.agent.environment import agent_env

        env = agent_env(os.environ)  # the allowlist: no API key, SSH agent or other secret of the user's
        command: str | list[str] = a.command
        if self.sandbox is not None and self.sandbox.confined:
            if self._tmp is None:
                self._tmp = Path(tempfile.mkdtemp(prefix="specflux-run-"))
            from specflux.agent.sandbox import temp_env

            env.update(temp_env(self._tmp))
            # no network: what an API agent runs needs none (the engine talks to the model)
            command = self.sandbox.argv(a.command, self.root, self._tmp,
                                        connect=[] if self.sandbox.confines_network else None)
        if isinstance(command, str):
            command = ["/bin/sh", "-c", command]
        from specflux.agent import reaper  # nothing the command starts outlives it, `setsid` or not

        proc = subprocess.Popen(reaper.argv(command), cwd=self.root, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            reaper.stop(proc)
            try:
                out, err = proc.communicate(timeout=2)
            except subprocess.TimeoutExpired:  # something escaped the group and holds the pipes
                out, err = b"", b""
            raise ToolError(f"timed out after {timeout:g}s; the command and its children were killed\n"
                            + self._streams(out, err)) from None
        except BaseException:
            reaper.stop(proc)
            raise
        return f"exit code: {proc.returncode}\n" + self._streams(out, err)

    def close(self) -> None:
        """Remove run_command's private temp folder, if one was made."""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _streams(self, out: bytes | None, err: bytes | None) -> str:
        def show(data: bytes | None) -> str:
            return truncate((data or b"").decode("utf-8", errors="replace"), self.output_limit)

        return f"--- stdout ---\n{show(out)}\n--- stderr ---\n{show(err)}"

    def _check_criterion(self, a: IndexIn) -> str:
        return self.hooks.check_criterion(a.index)

    def _end_session(self, handoff: Handoff) -> str:
        if self.ended is not None:
            raise ToolError("the session has already ended")
        message = self.hooks.end_session(handoff)
        self.ended = handoff
        return message

    def _submit_review(self, data: dict) -> str:
        from specflux.agent.handin_rules import HandinError
        from specflux.agent.plain_inputs import review_of

        review = self._checked("submit_review", review_of, data)
        hook = getattr(self.hooks, "submit_review", None)
        if hook is not None:
            try:
                hook(review)
            except HandinError as e:
                raise ToolError(f"submit_review refused: {e.message}. Correct it and call submit_review again.") from None
        self.review = review
        return "review recorded; stop now"

    def _submit_tasks(self, data: dict) -> str:
        from specflux.agent.handin import check_tasks

        plan = self._checked("submit_tasks", check_tasks, data)
        hook = getattr(self.hooks, "submit_tasks", None)
        if hook is not None:
            hook(plan)
        self.tasks = plan
        count = len(plan.tasks)
        return f"{count} task{'s' if count != 1 else ''} recorded; stop now"

    def _checked(self, name: str, check: Callable[[Any], Any], data: dict) -> Any:
        from specflux.agent.handin_rules import HandinError

        if self.handed_in:
            raise ToolError("you have already handed in; the session is over")
        try:
            return check(data)
        except HandinError as e:
            raise ToolError(f"{name} refused: {e.message}. Correct it and call {name} again.") from None
