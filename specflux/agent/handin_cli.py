"""An agent CLI's hand-in: `specflux submit-review --json FILE|-` / `specflux submit-tasks --json FILE|-`.

The JSON is checked as the `submit_review` / `submit_tasks` tools check it (handin.py), then
written, sealed with the step's key, to `$SPECFLUX_HANDIN` for the run to pick up
(handin_channel.py). A verdict that needs nothing of the model (`handin_rules.plain_review`, the
common case) is checked without importing pydantic: this command is a process of its own, run in
every reviewer session of an agent CLI.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping, TextIO

from specflux.agent.handin_rules import KEY_VAR, STEP_VAR, HandinError, Kind, agreed_plain_review, judges, sign
from specflux.base.errors import ParseError
from specflux.base.files import atomic_write, os_error, read_text

ROLES = {"review": "reviewer", "tasks": "planner"}
COMMANDS = {"review": "specflux submit-review", "tasks": "specflux submit-tasks"}


def submit_from_cli(kind: Kind, source: str, env: Mapping[str, str], stdin: TextIO | None = None) -> tuple[int, str]:
    """Check the JSON at `source` (a file path, or `-` for standard input) and write it, sealed
    with the step's key ($SPECFLUX_HANDIN_KEY), to `$SPECFLUX_HANDIN` for the run; (exit code,
    one line to print): 0 when it was recorded, 1 for a file that cannot be read, bad JSON or a
    refused hand-in, 2 when run outside a session of the right role. Handing in again replaces
    the earlier hand-in."""
    command, role = COMMANDS[kind], ROLES[kind]
    target = env.get("SPECFLUX_HANDIN", "")
    if not target:
        return 2, f"{command} runs inside a workflow run's {role} session (SPECFLUX_HANDIN is not set)"
    if not os.path.isabs(target):
        return 2, f"SPECFLUX_HANDIN must be an absolute file path, not {target!r}"
    session_role = env.get("SPECFLUX_ROLE")
    if session_role and session_role != role:
        return 2, f"{command} is the {role}'s hand-in; this session's role is {session_role} (SPECFLUX_ROLE)"
    missing = next((name for name in (KEY_VAR, STEP_VAR) if not env.get(name)), None)
    if missing:
        return 2, (f"{command} runs inside a workflow run's {role} session ({missing} is not set: only the "
                   "session the run started for this step can hand in for it)")

    shown = "<stdin>" if source == "-" else source
    try:
        text = (stdin or sys.stdin).read() if source == "-" else read_text(Path(source), shown)
    except OSError as e:
        return 1, str(os_error(e, shown, "read"))
    except UnicodeDecodeError as e:
        return 1, f"{shown}: not valid UTF-8 (byte {e.start})"
    except ParseError as e:
        return 1, str(e)
    if not text.strip():
        return 1, f"{shown}: empty: give the {kind} as one JSON object"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return 1, f"{shown}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}"
    try:
        data = checked(kind, data, env.get("SPECFLUX_TASK_FILE"))
    except HandinError as e:
        return 1, f"{shown}: refused: {e.message}"

    step = env[STEP_VAR]
    record = {"kind": kind, "step": step, "data": data, "seal": sign(env[KEY_VAR], step, kind, data)}
    try:
        atomic_write(Path(target), json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    except OSError as e:
        return 1, str(os_error(e, target))
    if kind == "review":
        return 0, "review recorded"
    count = len(data["tasks"])
    return 0, f"{count} task{'s' if count != 1 else ''} recorded"


def checked(kind: Kind, data: Any, task_file: str | None = None) -> dict[str, Any]:
    """`data` checked as the tools check it, as its model dumps it (JSON); HandinError when refused.
    A review is also held to the criteria of `task_file` (the session's task), where given. (The
    run reads every hand-in through this too: handin_channel.py.)"""
    plain = agreed_plain_review(data) if kind == "review" else None
    if plain is None:
        from specflux.agent.handin import CHECKS

        plain = CHECKS[kind](data).model_dump(mode="json")
    if kind == "review" and task_file:
        judges([r["criterion"] for r in plain["criteria_results"]], task_criteria(task_file))
    return plain


def task_criteria(task_file: str | os.PathLike[str]) -> list[str]:
    """The acceptance criteria of the task file at `task_file`, in order ([] when it cannot be read)."""
    from specflux.format.document import TaskDocument

    try:
        text = Path(task_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    try:
        return [item[3] for item in TaskDocument(text, str(task_file)).criteria_lines]
    except Exception:  # a broken task file: the run's own checks report it; the review stands unjudged
        return []
